// Incremental builds (capsule/reuse.h): a build that borrows from the previous one gives exactly
// the bytes of a full build, whatever changed in between.
#include "starforge/capsule/reuse.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "capsule_test_support.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/inspect.h"

namespace starforge::capsule {
namespace {

using testing::Joined;
using testing::MiniSpec;
using testing::ReadFile;
using testing::TempDir;
using testing::Write;
namespace fs = std::filesystem;

constexpr std::string_view kRunner = "PK-fake-runner-bytes\n";

std::string Text(int lines, const std::string& word) {
  std::string text;
  for (int i = 0; i < lines; ++i)
    text += word + " " + std::to_string(i * 7 % 13) + "\n";
  return text;
}

void MakeTree(const fs::path& root) {
  Write(root / "train.py", "import sys\nprint('hi')\n");
  Write(root / "lib/a.py", Text(3000, "alpha"));
  Write(root / "lib/b.py", Text(3000, "beta"));
  Write(root / "lib/c.py", Text(10, "gamma"));
  std::string noise(300000, '\0');
  uint64_t x = 1;
  for (auto& c : noise) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    c = static_cast<char>(x >> 56);
  }
  Write(root / "data/noise.bin", noise);
  Write(root / "empty", "");
  // Entries of a megabyte and more are copied file to file (copy_file_range), and stored files
  // of 4 MiB and more are streamed: both paths must give the same bytes.
  std::string big;
  while (big.size() < (5u << 20))
    big += noise;
  Write(root / "data/big.bin", big.substr(0, 5u << 20));
  Write(root / "data/text.txt", Text(200000, "delta"));
}

struct Built {
  BuildResult result;
  std::string bytes;
};

// Builds `code` into `out`, borrowing from `index` (and saving it) when given.
Built BuildTree(const fs::path& code, const fs::path& out, const fs::path& index = {}) {
  CollectResult c = Collect(code);
  EXPECT_TRUE(c.ok()) << Joined(c.errors);
  BuildOptions opts;
  opts.output = out;
  opts.runner = kRunner;
  ReuseIndex reuse;
  if (!index.empty()) reuse = ReuseIndex::Load(index);
  opts.reuse = &reuse;
  Built b{Build(c.files, MiniSpec(), opts), ""};
  EXPECT_TRUE(b.result.ok()) << Joined(b.result.errors);
  if (!index.empty() && b.result.ok()) ReuseIndex::Save(index, b.result.path, b.result.entries);
  b.bytes = ReadFile(out);
  return b;
}

// Each step changes the tree, then checks that the incremental build equals a full one.
TEST(Reuse, IncrementalBuildsAreByteIdenticalToFullBuilds) {
  TempDir t;
  MakeTree(t / "code");
  const fs::path index = t / "index";
  Built first = BuildTree(t / "code", t / "0.zip", index);
  EXPECT_EQ(first.result.entries_reused, 0u);
  EXPECT_EQ(first.result.files_read, 8u);

  struct Step {
    const char* what;
    std::function<void()> change;
    size_t reused;  // entries copied from the previous capsule
  };
  const std::vector<Step> steps = {
      {"nothing", [] {}, 8},
      {"one file's contents",
       [&] { Write(t / "code/lib/a.py", Text(3000, "alpha") + "one more line\n"); }, 7},
      {"a file removed", [&] { fs::remove(t / "code/lib/c.py"); }, 7},
      {"a file renamed", [&] { fs::rename(t / "code/lib/b.py", t / "code/lib/b2.py"); }, 7},
      {"a copy under a new name",
       [&] { fs::copy_file(t / "code/lib/b2.py", t / "code/lib/b3.py"); }, 8},
      {"the executable bit", [&] { fs::permissions(t / "code/train.py", fs::perms(0755)); }, 8},
      {"stored file changed, same size",
       [&] {
         std::string s = ReadFile(t / "code/data/noise.bin");
         s[1000] = static_cast<char>(s[1000] ^ 1);
         Write(t / "code/data/noise.bin", s);
       },
       7},
  };
  int n = 1;
  for (const Step& step : steps) {
    SCOPED_TRACE(step.what);
    step.change();
    const fs::path out = t / (std::to_string(n++) + ".zip");
    Built incremental = BuildTree(t / "code", out, index);
    Built full = BuildTree(t / "code", t / "full.zip");
    EXPECT_EQ(incremental.result.sha256, full.result.sha256);
    EXPECT_TRUE(incremental.bytes == full.bytes);
    EXPECT_EQ(incremental.result.entries_reused, step.reused);
    EXPECT_EQ(full.result.entries_reused, 0u);
    EXPECT_TRUE(Inspect(out).ok());
  }
}

TEST(Reuse, UnchangedFilesAreNotReadOnceTheirTimesAreOldEnough) {
  TempDir t;
  MakeTree(t / "code");
  const fs::path index = t / "index";
  Built first = BuildTree(t / "code", t / "0.zip", index);
  // Just written: file times within the clock's granularity of the build are not trusted.
  for (const auto& e : first.result.entries)
    EXPECT_FALSE(e.has_stat) << e.path;
  Built fresh = BuildTree(t / "code", t / "1.zip", index);
  EXPECT_EQ(fresh.result.files_read, 8u);
  EXPECT_EQ(fresh.result.entries_reused, 8u);

  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  Built settled = BuildTree(t / "code", t / "2.zip", index);
  EXPECT_EQ(settled.result.files_read, 8u);  // the index was written with fresh times
  Built unchanged = BuildTree(t / "code", t / "3.zip", index);
  EXPECT_EQ(unchanged.result.files_read, 0u);
  EXPECT_EQ(unchanged.result.entries_reused, 8u);
  EXPECT_EQ(unchanged.result.sha256, first.result.sha256);

  Write(t / "code/lib/a.py", Text(3000, "ALPHA"));  // same size, new times
  Built changed = BuildTree(t / "code", t / "4.zip", index);
  EXPECT_EQ(changed.result.files_read, 1u);
  EXPECT_NE(changed.result.sha256, first.result.sha256);
  EXPECT_EQ(changed.bytes, BuildTree(t / "code", t / "full.zip").bytes);
}

TEST(Reuse, AnIndexWhoseCapsuleChangedOrIsDamagedIsIgnored) {
  TempDir t;
  MakeTree(t / "code");
  const fs::path index = t / "index";
  BuildTree(t / "code", t / "0.zip", index);
  ASSERT_FALSE(ReuseIndex::Load(index).empty());

  // The capsule it points to is replaced by other bytes of the same size.
  std::string bytes = ReadFile(t / "0.zip");
  bytes[100] = static_cast<char>(bytes[100] ^ 0xff);
  fs::remove(t / "0.zip");
  Write(t / "0.zip", bytes);
  EXPECT_TRUE(ReuseIndex::Load(index).empty());

  BuildTree(t / "code", t / "1.zip", index);
  std::string text = ReadFile(index);
  ASSERT_FALSE(ReuseIndex::Load(index).empty());
  Write(index, text.substr(0, text.size() - 5));  // a record cut short
  EXPECT_TRUE(ReuseIndex::Load(index).empty());
  Write(index, "starforge-capsule-index 1\tsome-other-format\n" + text.substr(text.find('\n') + 1));
  EXPECT_TRUE(ReuseIndex::Load(index).empty());
  fs::remove(t / "1.zip");
  Write(index, text);
  EXPECT_TRUE(ReuseIndex::Load(index).empty());  // the capsule is gone
  // And a build with an empty index is a full build.
  Built full = BuildTree(t / "code", t / "2.zip", index);
  EXPECT_EQ(full.result.entries_reused, 0u);
}

}  // namespace
}  // namespace starforge::capsule
