// `forge storage` as a user runs it: the real binary, against the filesystem store and s3rver.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "s3peer.h"
#include "support/files.h"
#include "support/forge.h"
#include "support/temp_dir.h"

namespace starforge::objstore {
namespace {

using support::ReadFile;
using support::RunForge;
using support::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::S3Peer;

class StorageCli : public ::testing::Test {
 protected:
  void SetUp() override {
    // Until src/cli/forge.cc calls RegisterStorageCommands, every case here would fail
    // obscurely; say why once instead.
    support::Captured help = RunForge("--help", "");
    ASSERT_THAT(help.out, HasSubstr("storage"))
        << "`forge storage` is missing: is RegisterStorageCommands called from src/cli/forge.cc?";
    std::ofstream(file_, std::ios::binary) << std::string(100000, 'c') << "end";
  }
  TempDir tmp_;
  std::string file_ = tmp_ / "capsule.zip";
};

TEST_F(StorageCli, FilesystemStorePutHeadPresignGet) {
  const std::string root = tmp_ / "root";
  const std::string env = "FORGE_STORAGE_ROOT=" + root;
  support::Captured r = RunForge("storage put " + file_ + " capsules/sha256-x.zip", env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "capsules/sha256-x.zip: 100003 bytes uploaded to filesystem store at " + root +
                       "/objects\n");
  EXPECT_EQ(r.err, "");  // no progress meter when stderr is not a terminal

  r = RunForge("storage put " + file_ + " capsules/sha256-x.zip", env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "capsules/sha256-x.zip: already stored (100003 bytes); 0 bytes uploaded\n");

  r = RunForge("storage head capsules/sha256-x.zip", env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "key: capsules/sha256-x.zip\nsize: 100003\n");

  r = RunForge("storage presign capsules/sha256-x.zip --now 20130524T000000Z", env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "file://" + root + "/objects/capsules/sha256-x.zip\n");

  r = RunForge("storage get capsules/sha256-x.zip " + (tmp_ / "back.zip").string(), env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(tmp_ / "back.zip"), ReadFile(file_));

  r = RunForge("storage head capsules/absent.zip", env);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("object \"capsules/absent.zip\" does not exist"));
}

TEST_F(StorageCli, UsageErrors) {
  const std::string env = "FORGE_STORAGE_ROOT=" + (tmp_ / "root").string();
  support::Captured r = RunForge("storage presign k --expires 604801", env);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("between 1 and 604800 seconds"));
  r = RunForge("storage presign k --now 2013-05-24", env);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--now: expected YYYYMMDDTHHMMSSZ"));
  EXPECT_EQ(RunForge("storage", env).code, 2);
  r = RunForge("storage put " + file_ + " ../escape.zip", env);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("\"..\" path segment"));
}

class StorageCliS3 : public StorageCli {
 protected:
  void SetUp() override {
    StorageCli::SetUp();
    std::string error;
    peer_ = S3Peer::Start(&error);
    ASSERT_TRUE(peer_) << error;
  }
  std::string Env(const std::string& bucket = S3Peer::kBucket) const {
    return "FORGE_S3_ENDPOINT=" + peer_->endpoint() + " FORGE_S3_BUCKET=" + bucket +
           " FORGE_S3_ACCESS_KEY=" + S3Peer::kAccessKey +
           " FORGE_S3_SECRET_KEY=" + S3Peer::kSecretKey;
  }
  std::unique_ptr<S3Peer> peer_;
};

TEST_F(StorageCliS3, PutHeadPresignAgainstS3rver) {
  const std::string key = "capsules/sha256-cli.zip";
  support::Captured r = RunForge("storage put " + file_ + " " + key, Env());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, key + ": 100003 bytes uploaded to s3 bucket \"forge-test\" at " +
                       peer_->endpoint() + " (region us-east-1, path-style addressing)\n");
  r = RunForge("storage put " + file_ + " " + key, Env());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("0 bytes uploaded"));

  r = RunForge("storage head " + key, Env());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("size: 100003\netag: "));

  // --now makes the URL reproducible.
  const std::string fixed = "storage presign " + key + " --expires 3600 --now 20130524T000000Z";
  support::Captured a = RunForge(fixed, Env());
  support::Captured b = RunForge(fixed, Env());
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_THAT(a.out, HasSubstr(peer_->endpoint() + "/forge-test/" + key +
                               "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=S3RVER%2F"
                               "20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date="
                               "20130524T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&"
                               "X-Amz-Signature="));

  r = RunForge("storage presign " + key, Env());
  ASSERT_EQ(r.code, 0) << r.err;
  std::string url = r.out.substr(0, r.out.size() - 1);
  const std::string fetched = tmp_ / "fetched.zip";
  const int status = std::system(("curl -sS -f -o '" + fetched + "' '" + url + "'").c_str());
  ASSERT_EQ(status, 0) << url;
  EXPECT_EQ(ReadFile(fetched), ReadFile(file_));
}

TEST_F(StorageCliS3, MissingBucketAndBadCredentials) {
  support::Captured r = RunForge("storage put " + file_ + " k.zip", Env("no-such-bucket"));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "forge: storage put: bucket \"no-such-bucket\" does not exist at " +
                       peer_->endpoint() + "\n");

  const std::string secret = "cli-secret-never-printed";
  r = RunForge("storage head k.zip",
               "FORGE_S3_ENDPOINT=" + peer_->endpoint() +
                   " FORGE_S3_BUCKET=forge-test FORGE_S3_ACCESS_KEY=AKIAWRONGCLI "
                   "FORGE_S3_SECRET_KEY=" +
                   secret);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("the S3 credentials were rejected (InvalidAccessKeyId)"));
  EXPECT_THAT(r.err + r.out, Not(HasSubstr(secret)));
  EXPECT_THAT(r.err + r.out, Not(HasSubstr("AKIAWRONGCLI")));
}

}  // namespace
}  // namespace starforge::objstore
