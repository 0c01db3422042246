// Inspect: a capsule that does not match its manifest is caught, whatever was changed.
#include "starforge/capsule/inspect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "capsule_test_support.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/extract.h"

namespace starforge::capsule {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Joined;
using testing::Python;
using testing::Quote;
using testing::ReadFile;
using testing::Shell;
using testing::TempDir;
using testing::Write;
namespace fs = std::filesystem;

class InspectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Write(t_ / "code/train.py", "print('train')\n");
    Write(t_ / "code/lib/util.py", "def f():\n    return 1\n");
    Write(t_ / "code/run.sh", "#!/bin/sh\n", fs::perms(0755));
    CollectResult c = Collect(t_ / "code");
    BuildOptions opts;
    opts.output = capsule_;
    opts.runner = "runner";
    BuildResult r = Build(c.files, testing::MiniSpec(), opts);
    ASSERT_TRUE(r.ok()) << Joined(r.errors);
  }

  // Python rewrites the archive (valid zip, consistent CRCs), so only the manifest can tell.
  // `command` is "replace" (data given) or "drop".
  fs::path Tampered(const std::string& command, const std::string& name,
                    const std::string& data = "") {
    const fs::path out = t_ / "tampered.zip";
    fs::remove(out);
    std::string args =
        command + " " + Quote(capsule_.string()) + " " + Quote(out.string()) + " " + Quote(name);
    if (command == "replace") args += " " + Quote(data);
    support::Output o = Shell(Python(args));
    EXPECT_EQ(o.code, 0) << o.out;
    return out;
  }

  TempDir t_;
  fs::path capsule_ = t_ / "c.zip";
};

TEST_F(InspectTest, AGoodCapsuleVerifies) {
  InspectResult r = Inspect(capsule_);
  EXPECT_TRUE(r.ok()) << Joined(r.problems);
  EXPECT_EQ(r.verified, 5u);
}

// Capsules of format 2 (entries in plain path order, .starforge/ among the user's files) stay
// valid: readers find every entry by name, never by position.
TEST_F(InspectTest, ACapsuleOfFormat2WithEntriesInPathOrderStillVerifies) {
  const fs::path old = t_ / "format2.zip";
  support::Output o =
      Shell(Python("path-order " + Quote(capsule_.string()) + " " + Quote(old.string())));
  ASSERT_EQ(o.code, 0) << o.out;
  InspectResult r = Inspect(old);
  EXPECT_TRUE(r.ok()) << Joined(r.problems);
  EXPECT_EQ(r.verified, 5u);
  ExtractResult x = ExtractZip(old, t_ / "x");
  ASSERT_TRUE(x.ok()) << Joined(x.errors);
  EXPECT_EQ(x.files, 6u);
  EXPECT_EQ(ReadFile(t_ / "x/.starforge/manifest.json"), ToText(*r.manifest));
  // And it really was in the other order: the manifest before run.sh and train.py.
  const std::string bytes = ReadFile(old);
  EXPECT_LT(bytes.find(".starforge/manifest.json"), bytes.find("train.py"));
  EXPECT_GT(ReadFile(capsule_).find(".starforge/manifest.json"),
            ReadFile(capsule_).find("train.py"));
}

TEST_F(InspectTest, ChangedContentIsCaught) {
  InspectResult r = Inspect(Tampered("replace", "train.py", "print('evil!')\n"));
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.problems.size(), 1u) << Joined(r.problems);
  EXPECT_THAT(r.problems[0], HasSubstr("train.py: SHA-256 "));
  EXPECT_THAT(r.problems[0], HasSubstr("the manifest says"));
}

TEST_F(InspectTest, ChangedSizeIsCaught) {
  InspectResult r = Inspect(Tampered("replace", "lib/util.py", "x"));
  ASSERT_EQ(r.problems.size(), 1u) << Joined(r.problems);
  EXPECT_THAT(r.problems[0], HasSubstr("lib/util.py: size 1 bytes, the manifest says 22"));
}

TEST_F(InspectTest, ExtraAndMissingEntriesAreCaught) {
  InspectResult extra = Inspect(Tampered("replace", "sneaky.py", "import os"));
  EXPECT_THAT(extra.problems, ElementsAre("sneaky.py: in the archive but not in the manifest"));
  InspectResult missing = Inspect(Tampered("drop", "lib/util.py"));
  EXPECT_THAT(missing.problems,
              ElementsAre("lib/util.py: in the manifest but missing from the archive"));
  InspectResult no_manifest = Inspect(Tampered("drop", ".starforge/manifest.json"));
  EXPECT_FALSE(no_manifest.ok());
  EXPECT_THAT(Joined(no_manifest.problems), HasSubstr(".starforge/manifest.json: missing"));
}

TEST_F(InspectTest, AForgedManifestIsCaught) {
  InspectResult r = Inspect(Tampered("replace", ".starforge/manifest.json", R"({"version":2})"));
  EXPECT_THAT(Joined(r.problems), HasSubstr("version: 2 is not supported"));
}

TEST_F(InspectTest, CorruptedBytesAreCaught) {
  // Flip a byte inside train.py's stored data: libzip's CRC check fails.
  std::string bytes = ReadFile(capsule_);
  const size_t at = bytes.find("print('train')");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 'P';
  const fs::path bad = t_ / "bad.zip";
  Write(bad, bytes);
  InspectResult r = Inspect(bad);
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(Joined(r.problems), HasSubstr("train.py: cannot be read: CRC error"));
}

TEST_F(InspectTest, DeflatedEntriesAreCheckedAgainstTheManifestToo) {
  // A file that deflates: read back from memory with libdeflate, not through libzip.
  std::string text;
  for (int i = 0; i < 1200; ++i)  // three times this must fit in one argument (128 KiB)
    text += "value_" + std::to_string(i % 97) + " = compute(" + std::to_string(i) + ")\n";
  Write(t_ / "code/big.py", text);
  BuildOptions opts;
  opts.output = capsule_;
  opts.runner = "runner";
  BuildResult built = Build(Collect(t_ / "code").files, testing::MiniSpec(), opts);
  ASSERT_TRUE(built.ok()) << Joined(built.errors);
  EXPECT_LT(built.size, text.size() / 2) << "big.py must be deflated for this test";
  InspectResult good = Inspect(capsule_);
  EXPECT_TRUE(good.ok()) << Joined(good.problems);
  EXPECT_EQ(good.verified, 6u);

  std::string changed = text;
  changed[text.size() / 2] = '#';
  InspectResult r = Inspect(Tampered("replace", "big.py", changed));
  ASSERT_EQ(r.problems.size(), 1u) << Joined(r.problems);
  EXPECT_THAT(r.problems[0], HasSubstr("big.py: SHA-256 "));

  // Inflating more than the manifest says stops one byte past it: never the whole entry.
  InspectResult bigger = Inspect(Tampered("replace", "big.py", text + text + text));
  ASSERT_EQ(bigger.problems.size(), 1u) << Joined(bigger.problems);
  EXPECT_THAT(bigger.problems[0],
              HasSubstr("big.py: size over " + std::to_string(text.size() + 1) +
                        " bytes, the manifest says " + std::to_string(text.size())));
}

TEST_F(InspectTest, NotAZip) {
  Write(t_ / "junk.zip", "not a zip at all");
  InspectResult r = Inspect(t_ / "junk.zip");
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(Joined(r.problems), HasSubstr("not a readable zip archive"));
  EXPECT_FALSE(Inspect(t_ / "absent.zip").ok());
}

// A capsule someone truncates while it is inspected: an error saying so, not SIGBUS (the
// archive is read, not mapped: a map's pages past the new end of the file would fault).
TEST_F(InspectTest, AFileTruncatedWhileItIsInspectedIsAnErrorNotACrash) {
  std::string noise(1 << 20, '\0');
  uint64_t x = 1;
  for (auto& c : noise) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    c = static_cast<char>(x >> 56);
  }
  Write(t_ / "code/data.bin", noise);
  CollectResult c = Collect(t_ / "code");
  BuildOptions opts;
  opts.output = t_ / "big.zip";
  opts.runner = "runner";
  ASSERT_TRUE(Build(c.files, testing::MiniSpec(), opts).ok());
  ASSERT_TRUE(Inspect(opts.output).ok());

  InspectOptions io;
  io.opened = [&] { fs::resize_file(opts.output, 4096); };
  InspectResult r = Inspect(opts.output, io);
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(Joined(r.problems), HasSubstr("changed while it was being inspected"));
}

TEST_F(InspectTest, ASingleTopLevelDirectoryIsReported) {
  const fs::path spec = t_ / "spec.json";
  Write(spec, R"([{"name": "only/a.py", "data": "x"}])");
  const fs::path zip = t_ / "one.zip";
  ASSERT_EQ(Shell(Python("make " + Quote(zip.string()) + " " + Quote(spec.string()))).code, 0);
  EXPECT_THAT(Joined(Inspect(zip).problems), HasSubstr("Ray would strip the top-level directory"));
}

}  // namespace
}  // namespace starforge::capsule
