// `forge capsule build` and `forge capsule inspect` as a user runs them: the real binary.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "capsule_test_support.h"

namespace starforge::capsule {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using testing::Quote;
using testing::ReadFile;
using testing::TempDir;
using testing::Write;
namespace fs = std::filesystem;

using Result = support::Captured;

// STARFORGE_TEST_FORGE_BIN overrides the binary under test (e.g. a build with extra commands).
std::string ForgeBin() {
  const char* override_bin = std::getenv("STARFORGE_TEST_FORGE_BIN");
  return override_bin ? override_bin : STARFORGE_FORGE_BIN;
}

Result Forge(const TempDir& t, const std::string& args, const std::string& env = "") {
  return support::Capture("env -i PATH=/usr/bin:/bin " + env + " " + Quote(ForgeBin()) + " " + args,
                          t.path());
}

class CapsuleCli : public ::testing::Test {
 protected:
  void SetUp() override {
    Write(t_ / "code/train.py", "print('hi')\n");
    Write(t_ / "code/run.sh", "#!/bin/sh\n", fs::perms(0755));
    Write(t_ / "code/data/big.bin", std::string(5000, 'z'));
    Write(t_ / "job.yaml",
          "name: cli-test\nimage: python:3.11\nentrypoint: python train.py\n"
          "pools: [{name: main}]\n");
    Result probe = Forge(t_, "capsule --help");
    ASSERT_THAT(probe.out, HasSubstr("Usage: forge capsule"))
        << "`forge capsule` is not registered: RegisterCapsuleCommands must be called in "
           "src/cli/forge.cc";
  }
  TempDir t_;
};

TEST_F(CapsuleCli, BuildPrintsDigestSizeAndFileCount) {
  Result r = Forge(t_, "capsule build code --job job.yaml -o c.zip");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, MatchesRegex("capsule  c.zip\n"
                                  "sha256   [0-9a-f]{64}\n"
                                  "size     [0-9]+ bytes \\([0-9.]+ KiB\\)\n"
                                  "files    6 \\(3 yours \\+ 3 StarForge's\\)\n"
                                  "key      capsules/sha256-[0-9a-f]{64}.zip\n"));
  const std::string digest = r.out.substr(r.out.find("sha256   ") + 9, 64);
  EXPECT_THAT(r.out, HasSubstr("size     " + std::to_string(fs::file_size(t_ / "c.zip"))));
  // Without -o the file is named after its digest, in the code directory's ignored .forge/;
  // building again does not pick it up.
  const fs::path in_tree = t_ / "code/.forge/capsules" / ("sha256-" + digest + ".zip");
  for (int i = 0; i < 2; ++i) {
    Result again = Forge(t_, "capsule build code --job job.yaml");
    ASSERT_EQ(again.code, 0) << again.err;
    EXPECT_EQ(again.err, "");
    EXPECT_THAT(again.out, HasSubstr("capsule  code/.forge/capsules/sha256-" + digest + ".zip\n"));
    EXPECT_EQ(ReadFile(in_tree), ReadFile(t_ / "c.zip"));
  }
  // An explicit -o inside the tree gets a warning.
  Result inside = Forge(t_, "capsule build code --job job.yaml -o code/c.zip");
  ASSERT_EQ(inside.code, 0) << inside.err;
  EXPECT_THAT(inside.err, HasSubstr("warning: code/c.zip is inside code; add it to .forgeignore"));
}

TEST_F(CapsuleCli, ListShowsWhatGoesInWithoutBuilding) {
  Write(t_ / "code/.forgeignore", "data/\n");
  Result r = Forge(t_, "capsule build code --list");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "       6 B     .forgeignore\n"
            "      10 B  x  run.sh\n"
            "      12 B     train.py\n"
            "     .starforge/runner.pyz, .starforge/manifest.json (StarForge's)\n"
            "3 files of yours, 28 B before compression\n");
  for (const auto& e : fs::directory_iterator(t_.path()))
    EXPECT_NE(e.path().extension(), ".zip");
}

TEST_F(CapsuleCli, InspectListsTheManifestAndVerifies) {
  ASSERT_EQ(Forge(t_, "capsule build code --job job.yaml -o c.zip").code, 0);
  Result r = Forge(t_, "capsule inspect c.zip");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("files    6 (manifest version 1)\n"));
  EXPECT_THAT(r.out, HasSubstr("      10 B  x  "));
  EXPECT_THAT(r.out, HasSubstr("  run.sh\n"));
  EXPECT_THAT(r.out, HasSubstr("  .starforge/jobspec.json\n"));
  EXPECT_THAT(r.out, HasSubstr("ok: 5 files verified against the manifest\n"));
}

TEST_F(CapsuleCli, InspectExitsNonZeroOnATamperedCapsule) {
  ASSERT_EQ(Forge(t_, "capsule build code --job job.yaml -o c.zip").code, 0);
  ASSERT_EQ(testing::Shell(testing::Python("replace " + Quote((t_ / "c.zip").string()) + " " +
                                           Quote((t_ / "bad.zip").string()) + " train.py evil"))
                .code,
            0);
  Result r = Forge(t_, "capsule inspect bad.zip");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("bad.zip: train.py: size 4 bytes, the manifest says 12"));
  EXPECT_THAT(r.err, HasSubstr("1 problem; do not run this capsule"));
  EXPECT_THAT(r.out, Not(HasSubstr("ok:")));
}

TEST_F(CapsuleCli, ErrorsAndUsage) {
  Result no_job = Forge(t_, "capsule build code");
  EXPECT_EQ(no_job.code, 2);
  EXPECT_THAT(no_job.err, HasSubstr("--job is required"));
  Result too_big = Forge(t_, "capsule build code --job job.yaml", "FORGE_CAPSULE_MAX_BYTES=1Ki");
  EXPECT_EQ(too_big.code, 1);
  EXPECT_THAT(too_big.err, HasSubstr("over the 1.0 KiB limit (FORGE_CAPSULE_MAX_BYTES"));
  EXPECT_THAT(too_big.err, HasSubstr("Largest files:\n     4.9 KiB  data/big.bin\n"));
  fs::create_symlink("/etc/hostname", t_ / "code/escape");
  Result escape = Forge(t_, "capsule build code --job job.yaml");
  EXPECT_EQ(escape.code, 1);
  EXPECT_THAT(escape.err, HasSubstr("forge: code: escape is a symlink to /etc/hostname, which is "
                                    "outside the code directory"));
  Result bare = Forge(t_, "capsule");
  EXPECT_EQ(bare.code, 2);
}

}  // namespace
}  // namespace starforge::capsule
