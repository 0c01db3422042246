// Incremental builds (capsule/reuse.h): a build that borrows from the previous one gives exactly
// the bytes of a full build, whatever changed in between.
#include "starforge/capsule/reuse.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "capsule_test_support.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/inspect.h"
#include "starforge/common/sha256.h"

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
  if (!index.empty() && b.result.ok())
    ReuseIndex::Save(index, b.result.path, b.result.entries, b.result.checkpoints);
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

// `index` (the text of one) with its last line, the SHA-256 of the rest, made to match again.
std::string Resealed(const std::string& index) {
  const std::string body = index.substr(0, index.rfind("end\t"));
  return body + "end\t" + Sha256Hex(body) + "\n";
}

// A chmod (even to the same mode) sets every file's ctime to now: the files are "just written"
// for the build that follows, however long the previous steps took on a loaded machine.
void TouchAll(const fs::path& root) {
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) fs::permissions(e.path(), e.status().permissions());
}

TEST(Reuse, UnchangedFilesAreNotReadOnceTheirTimesAreOldEnough) {
  TempDir t;
  MakeTree(t / "code");
  const fs::path index = t / "index";
  TouchAll(t / "code");
  Built first = BuildTree(t / "code", t / "0.zip", index);
  // Just written: file times within the clock's granularity of the build are not trusted.
  for (const auto& e : first.result.entries)
    EXPECT_FALSE(e.has_stat) << e.path;
  TouchAll(t / "code");
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

// The archive's SHA-256 is not recomputed over the bytes it shares with the previous capsule at
// the same offsets: it resumes from the state the index kept at the last MiB before the first
// byte that differs. The digest stays the plain SHA-256 of the whole archive.
TEST(Reuse, HashingResumesWhereTheArchiveFirstDiffers) {
  TempDir t;
  MakeTree(t / "code");  // data/big.bin (5 MiB) comes first in path order
  const fs::path index = t / "index";
  Built first = BuildTree(t / "code", t / "0.zip", index);
  EXPECT_EQ(first.result.bytes_hashed, first.result.size);
  EXPECT_EQ(first.result.checkpoints.size(), first.result.size >> 20);

  struct Step {
    const char* what;
    std::function<void()> change;
    // Past data/big.bin (the first 5 MiB): less than half of the archive hashed. StarForge's
    // files, the manifest among them, come after the user's (format 3), so a change to any
    // file after the first leaves the archive's first 5 MiB as they were.
    bool resumes;
  };
  const std::vector<Step> steps = {
      {"nothing", [] {}, true},
      {"the last file", [&] { Write(t / "code/train.py", "print('bye')\n"); }, true},
      {"nothing again", [] {}, true},
      {"a file in the middle",
       [&] { Write(t / "code/lib/a.py", Text(3000, "alpha") + "one more line\n"); }, true},
      {"a file removed", [&] { fs::remove(t / "code/lib/c.py"); }, true},
      {"a file renamed", [&] { fs::rename(t / "code/lib/b.py", t / "code/lib/b0.py"); }, true},
      {"a file added at the end", [&] { Write(t / "code/zz.py", "z = 26\n"); }, true},
      {"a file before all others", [&] { Write(t / "code/a.py", "x = 1\n"); }, false},
      {"the first file",
       [&] {
         std::string s = ReadFile(t / "code/data/big.bin");
         s[10] = static_cast<char>(s[10] ^ 1);
         Write(t / "code/data/big.bin", s);
       },
       false},
      {"back to the same first file", [&] { fs::remove(t / "code/a.py"); }, false},
  };
  int n = 1;
  for (const Step& step : steps) {
    SCOPED_TRACE(step.what);
    step.change();
    const fs::path out = t / (std::to_string(n++) + ".zip");
    Built incremental = BuildTree(t / "code", out, index);
    Built full = BuildTree(t / "code", t / "full.zip");
    EXPECT_EQ(incremental.result.sha256, full.result.sha256);
    EXPECT_EQ(incremental.result.sha256, Sha256Hex(incremental.bytes));
    EXPECT_TRUE(incremental.bytes == full.bytes);
    EXPECT_EQ(incremental.result.checkpoints, full.result.checkpoints);
    if (step.resumes) {
      EXPECT_LT(incremental.result.bytes_hashed, incremental.result.size / 2);
    } else {
      EXPECT_EQ(incremental.result.bytes_hashed, incremental.result.size);
    }
  }
}

// An index that Load accepts (its trailer matches) but whose hash states are not its capsule's
// — a bug, or an index edited by hand — must not give a wrong digest: the state resumed from is
// first checked against the one before it, over the capsule's bytes, and hashing otherwise
// starts from byte 0.
TEST(Reuse, HashStatesThatDoNotMatchTheCapsuleAreNotResumedFrom) {
  TempDir t;
  MakeTree(t / "code");
  const fs::path index = t / "index";
  BuildTree(t / "code", t / "0.zip", index);
  std::string text = ReadFile(index);
  // "checkpoints\t<n>" then n "<offset>\t<64 hex>" lines: every state becomes another one.
  size_t at = text.find("\ncheckpoints\t");
  ASSERT_NE(at, std::string::npos);
  const int changed = std::stoi(text.substr(at + 13));
  ASSERT_GE(changed, 5);
  for (int i = 0; i < changed; ++i) {
    at = text.find('\n', at + 1);
    const size_t hex = text.find('\t', at) + 1;
    text[hex] = text[hex] == '0' ? '1' : '0';
  }
  Write(index, Resealed(text));
  ASSERT_EQ(ReuseIndex::Load(index).checkpoints().size(), static_cast<size_t>(changed));

  Built incremental = BuildTree(t / "code", t / "1.zip", index);  // nothing changed
  EXPECT_EQ(incremental.result.sha256, Sha256Hex(incremental.bytes));
  EXPECT_GE(incremental.result.bytes_hashed, incremental.result.size);  // from byte 0
  EXPECT_EQ(incremental.result.entries_reused, 8u);  // the entries themselves are still reused
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
  // Cut short anywhere (a crash while it was written: it is not fsynced), or one byte changed.
  for (size_t cut : {text.size() - 1, text.size() - 5, text.rfind("end\t"), text.size() / 2}) {
    Write(index, text.substr(0, cut));
    EXPECT_TRUE(ReuseIndex::Load(index).empty()) << cut;
  }
  std::string flipped = text;
  flipped[text.size() / 2] = static_cast<char>(flipped[text.size() / 2] ^ 1);
  Write(index, flipped);
  EXPECT_TRUE(ReuseIndex::Load(index).empty());
  // Another format, even with a trailer that matches.
  Write(index, Resealed("starforge-capsule-index 2\tsome-other-format\n" +
                        text.substr(text.find('\n') + 1)));
  EXPECT_TRUE(ReuseIndex::Load(index).empty());
  // Format 2 (StarForge's files among the user's, by path) wrote this same index: its offsets
  // and hash states describe another archive, so it is not used.
  std::string v2 = FormatVersion();
  ASSERT_NE(v2.find("-v3 "), std::string::npos) << v2;
  v2.replace(v2.find("-v3 "), 4, "-v2 ");
  Write(index, Resealed(text.substr(0, text.find('\t') + 1) + v2 + "\n" +
                        text.substr(text.find('\n') + 1)));
  EXPECT_TRUE(ReuseIndex::Load(index).empty());
  Write(index, text);
  ASSERT_FALSE(ReuseIndex::Load(index).empty());
  fs::remove(t / "1.zip");
  EXPECT_TRUE(ReuseIndex::Load(index).empty());  // the capsule is gone
  // And a build with an empty index is a full build.
  Built full = BuildTree(t / "code", t / "2.zip", index);
  EXPECT_EQ(full.result.entries_reused, 0u);
  EXPECT_EQ(full.result.bytes_hashed, full.result.size);
}

}  // namespace
}  // namespace starforge::capsule
