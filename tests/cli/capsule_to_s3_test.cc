// The capsule's whole trip as a user drives it, with the real `forge` binary and a real S3 peer:
// `forge capsule build` → `forge storage put` (s3rver) → `forge storage presign` → fetched with
// curl → the same bytes, unpacked the way Ray unpacks a working_dir (Python zipfile), and the
// capsule's own runner verifies and runs it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "../objstore/s3peer.h"
#include "support/files.h"
#include "support/shell.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
namespace support = starforge::support;
using starforge::objstore::testing::S3Peer;
using support::ReadFile;
using support::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

using Result = support::Captured;

Result Sh(const TempDir& tmp, const std::string& cmd) {
  return support::Capture(cmd, tmp.path());
}

std::string Field(const std::string& text, const std::string& name) {
  std::smatch m;
  const std::regex re("(^|\n)" + name + " +([^\n]+)");
  return std::regex_search(text, m, re) ? m[2].str() : "";
}

TEST(CapsuleToS3, BuildPutPresignFetchUnpackRun) {
  TempDir tmp;
  std::string error;
  auto peer = S3Peer::Start(&error);
  ASSERT_TRUE(peer) << error;

  fs::create_directories(tmp.path() / "code/pkg");
  std::ofstream(tmp / "code/train.py")
      << "import pkg.util, sys\nprint(pkg.util.hello(sys.argv[1]))\n";
  std::ofstream(tmp / "code/pkg/__init__.py") << "";
  std::ofstream(tmp / "code/pkg/util.py") << "def hello(x):\n    return 'hello ' + x\n";
  std::ofstream(tmp / "job.yaml") << "name: trip\nimage: img:1\n"
                                  << "entrypoint: [python3, train.py, 'a b; $(c)']\n"
                                  << "pools: [{name: main}]\n";
  const std::string forge = STARFORGE_FORGE_BIN;
  const std::string env = "env -i PATH=/usr/bin:/bin FORGE_S3_ENDPOINT=" + peer->endpoint() +
                          " FORGE_S3_BUCKET=" + S3Peer::kBucket +
                          " FORGE_S3_ACCESS_KEY=" + S3Peer::kAccessKey +
                          " FORGE_S3_SECRET_KEY=" + S3Peer::kSecretKey + " ";

  Result built = Sh(tmp, env + forge + " capsule build code --job job.yaml -o capsule.zip");
  ASSERT_EQ(built.code, 0) << built.err;
  const std::string sha = Field(built.out, "sha256");
  const std::string key = Field(built.out, "key");
  ASSERT_EQ(sha.size(), 64u) << built.out;
  EXPECT_EQ(key, "capsules/sha256-" + sha + ".zip");

  Result put = Sh(tmp, env + forge + " storage put capsule.zip " + key);
  ASSERT_EQ(put.code, 0) << put.err;
  EXPECT_THAT(put.out, Not(HasSubstr("already stored")));
  // Resubmitting unchanged code uploads nothing.
  Result again = Sh(tmp, env + forge + " storage put capsule.zip " + key);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("already stored"));
  EXPECT_THAT(again.out, HasSubstr("; 0 bytes uploaded"));

  Result presigned = Sh(tmp, env + forge + " storage presign " + key + " --expires 600");
  ASSERT_EQ(presigned.code, 0) << presigned.err;
  const std::string url = presigned.out.substr(0, presigned.out.find('\n'));
  EXPECT_EQ(url.find(S3Peer::kSecretKey + std::string("/")), std::string::npos);
  ASSERT_EQ(Sh(tmp, "curl -sS -f -o fetched.zip '" + url + "'").code, 0) << url;
  ASSERT_EQ(Sh(tmp, "sha256sum fetched.zip").out.substr(0, 64), sha);

  // Ray's working_dir unpacking: Python's zipfile, no mode bits, top-level dir kept (≥ 2 entries).
  ASSERT_EQ(
      Sh(tmp, "python3 -c 'import zipfile; zipfile.ZipFile(\"fetched.zip\").extractall(\"wd\")'")
          .code,
      0);
  ASSERT_TRUE(fs::exists(tmp.path() / "wd/train.py"));
  Result ran = Sh(tmp, "cd wd && env -i PATH=/usr/bin:/bin FORGE_JOB_ID=j-1 FORGE_STORAGE_ROOT=" +
                           (tmp / "storage").string() + " python3 .starforge/runner.pyz run");
  ASSERT_EQ(ran.code, 0) << ran.out << ran.err;
  EXPECT_EQ(ran.out, "hello a b; $(c)\n");
  EXPECT_EQ(ReadFile(tmp / "storage/jobs/j-1/logs/driver.log"), "hello a b; $(c)\n");
}

}  // namespace
