// The filesystem store: the embedded default under <storage root>/objects.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "s3peer.h"
#include "starforge/objstore/fs_store.h"

namespace starforge::objstore {
namespace {

namespace fs = std::filesystem;
using support::ReadFile;
using support::TempDir;
using ::testing::HasSubstr;

class FsStoreTest : public ::testing::Test {
 protected:
  std::string root() const { return tmp_ / "objects"; }
  TempDir tmp_;
  std::unique_ptr<ObjectStore> store_ = OpenFilesystem(tmp_ / "objects");
};

TEST_F(FsStoreTest, PutHeadGetRoundTrip) {
  const std::string data(3 << 20, 'z');  // several copy chunks
  const std::string src = tmp_ / "capsule.zip";
  std::ofstream(src, std::ios::binary) << data;
  std::vector<int64_t> seen;
  auto put = store_->PutFile("capsules/sha256-a.zip", src,
                             [&](int64_t done, int64_t) { seen.push_back(done); });
  ASSERT_TRUE(put) << put.status().message();
  EXPECT_EQ(put->size, 3 << 20);
  EXPECT_EQ(put->bytes_uploaded, 3 << 20);
  EXPECT_FALSE(put->already_present);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), 3 << 20);
  EXPECT_EQ(ReadFile(root() + "/capsules/sha256-a.zip"), data);

  auto head = store_->Head("capsules/sha256-a.zip");
  ASSERT_TRUE(head);
  ASSERT_TRUE(head.value());
  EXPECT_EQ(head.value()->size, 3 << 20);

  EXPECT_TRUE(store_->GetBytes("capsules/sha256-a.zip").value() == data);
  const std::string out = tmp_ / "out.zip";
  EXPECT_EQ(store_->GetFile("capsules/sha256-a.zip", out).value(), 3 << 20);
  EXPECT_TRUE(ReadFile(out) == data);
}

TEST_F(FsStoreTest, ExistingKeyIsNotRewritten) {
  ASSERT_TRUE(store_->PutBytes("capsules/k.zip", "same"));
  const std::string path = root() + "/capsules/k.zip";
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  auto again = store_->PutBytes("capsules/k.zip", "same");
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->already_present);
  EXPECT_EQ(again->bytes_uploaded, 0);
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);  // not replaced by a rename

  auto different = store_->PutBytes("capsules/k.zip", "longer");
  ASSERT_FALSE(different);
  EXPECT_THAT(different.status().message(), HasSubstr("content-addressed"));
}

TEST_F(FsStoreTest, AFinishedFileIsLinkedIntoPlaceNotCopied) {
  const std::string src = tmp_ / "upload.zip";
  std::ofstream(src, std::ios::binary) << "capsule bytes";
  ::chmod(src.c_str(), 0600);  // as the API's uploads are
  auto put = store_->PutFinishedFile("capsules/sha256-f.zip", src);
  ASSERT_TRUE(put) << put.status().message();
  EXPECT_EQ(put->size, 13);
  EXPECT_FALSE(put->already_present);
  const std::string path = root() + "/capsules/sha256-f.zip";
  struct stat object {
  }, source{};
  ASSERT_EQ(::stat(path.c_str(), &object), 0);
  ASSERT_EQ(::stat(src.c_str(), &source), 0);
  EXPECT_EQ(object.st_ino, source.st_ino);  // one inode: no byte copied
  EXPECT_EQ(object.st_mode & 0777, 0644u);  // readable as every other object
  // The caller removes its file once the job moves on: the object stays.
  fs::remove(src);
  EXPECT_EQ(ReadFile(path), "capsule bytes");
  for (const auto& entry : fs::recursive_directory_iterator(root()))
    EXPECT_EQ(entry.path().filename().string().find(".link-"), std::string::npos) << entry.path();

  // Stored again (a crash between storing and moving on): nothing changes.
  std::ofstream(src, std::ios::binary) << "capsule bytes";
  auto again = store_->PutFinishedFile("capsules/sha256-f.zip", src);
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_TRUE(again->already_present);
  auto missing = store_->PutFinishedFile("capsules/sha256-g.zip", tmp_ / "nope.zip");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.status().message(), HasSubstr("nope.zip"));
}

TEST_F(FsStoreTest, WritesLeaveNoTemporaryFiles) {
  ASSERT_TRUE(store_->PutBytes("a/b/c.zip", "x"));
  for (const auto& entry : fs::recursive_directory_iterator(root())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

TEST_F(FsStoreTest, MissingObjects) {
  auto head = store_->Head("capsules/none.zip");
  ASSERT_TRUE(head);
  EXPECT_FALSE(head.value());
  auto get = store_->GetBytes("capsules/none.zip");
  ASSERT_FALSE(get);
  EXPECT_EQ(get.status().reason(), ToString(ErrorKind::kNotFound));
  EXPECT_THAT(get.status().message(), HasSubstr("object \"capsules/none.zip\" does not exist"));
  EXPECT_FALSE(store_->GetFile("capsules/none.zip", tmp_ / "x.zip"));
  EXPECT_FALSE(fs::exists(tmp_ / "x.zip"));
}

TEST_F(FsStoreTest, KeysCannotEscapeTheRoot) {
  for (const char* key :
       {"../escape.zip", "a/../../b", "/abs.zip", "a//b", "a/./b", "", "a\\b", "a/\nb", "dir/"}) {
    auto put = store_->PutBytes(key, "x");
    ASSERT_FALSE(put) << key;
    EXPECT_EQ(put.status().reason(), ToString(ErrorKind::kInvalid));
  }
  EXPECT_FALSE(fs::exists(tmp_ / "escape.zip"));
}

TEST_F(FsStoreTest, PresignIsAFileUrl) {
  auto url = store_->PresignGet("capsules/sha256-a.zip", 3600, 0);
  ASSERT_TRUE(url);
  EXPECT_EQ(*url, "file://" + root() + "/capsules/sha256-a.zip");
  EXPECT_FALSE(store_->PresignGet("capsules/sha256-a.zip", 604801, 0));
  EXPECT_EQ(store_->Describe(), "filesystem store at " + root());
}

TEST_F(FsStoreTest, UnreadableSourceIsAClearError) {
  auto put = store_->PutFile("k", tmp_ / "does-not-exist");
  ASSERT_FALSE(put);
  EXPECT_THAT(put.status().message(), HasSubstr("does-not-exist: No such file or directory"));
}

TEST_F(FsStoreTest, UnusableRootIsAClearError) {
  // A file where the root directory should be (permissions would not stop root, who runs CI).
  std::ofstream(root()) << "in the way";
  auto put = store_->PutBytes("capsules/k.zip", "x");
  ASSERT_FALSE(put);
  EXPECT_EQ(put.status().reason(), ToString(ErrorKind::kInvalid));
  EXPECT_THAT(put.status().message(), HasSubstr(root()));
}

TEST(FsStoreFactory, RelativeRootsBecomeAbsolute) {
  auto store = OpenFilesystem("relative/objects");
  EXPECT_EQ(store->PresignGet("k", 1, 0).value(),
            "file://" + (fs::current_path() / "relative/objects/k").string());
}

}  // namespace
}  // namespace starforge::objstore
