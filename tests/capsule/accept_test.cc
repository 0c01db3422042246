// Client-built capsules on the server (capsule/accept.h): checked, and given the server's own
// JobSpec and runner when they differ — the very capsule the server would have built.
#include "starforge/capsule/accept.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "capsule_test_support.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/inspect.h"

namespace starforge::capsule {
namespace {

using ::testing::HasSubstr;
using testing::Joined;
using testing::MiniSpec;
using testing::Python;
using testing::Quote;
using testing::ReadFile;
using testing::Shell;
using testing::TempDir;
using testing::Write;
namespace fs = std::filesystem;

BuildResult BuildWith(const fs::path& code, const fs::path& out, const jobspec::JobSpec& spec,
                      std::string_view runner) {
  CollectResult c = Collect(code);
  EXPECT_TRUE(c.ok()) << Joined(c.errors);
  BuildOptions opts;
  opts.output = out;
  opts.runner = runner;
  BuildResult r = Build(c.files, spec, opts);
  EXPECT_TRUE(r.ok()) << Joined(r.errors);
  return r;
}

void MakeTree(const fs::path& root) {
  std::string text;
  for (int i = 0; i < 3000; ++i)
    text += "loss = " + std::to_string(i % 17) + "\n";
  Write(root / "train.py", "print('hi')\n");
  Write(root / "lib/big.py", text);
  Write(root / "run.sh", "#!/bin/sh\n", fs::perms(0755));
}

TEST(Accept, TheServersJobSpecAndRunnerGiveTheCapsuleTheServerWouldHaveBuilt) {
  TempDir t;
  MakeTree(t / "code");
  fs::create_directories(t / "scratch");
  AcceptOptions opts;
  opts.runner = "server runner";
  opts.scratch_dir = t / "scratch";

  // Same JobSpec and runner: accepted as it is.
  const BuildResult same = BuildWith(t / "code", t / "same.zip", MiniSpec("a"), "server runner");
  AcceptResult r = AcceptCapsule(t / "same.zip", MiniSpec("a"), opts);
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  EXPECT_FALSE(r.rebuilt);
  EXPECT_EQ(r.sha256, same.sha256);
  EXPECT_EQ(r.path, t / "same.zip");
  EXPECT_EQ(r.user_files, 3u);

  // Another reading of the JobSpec and another runner: replaced, byte for byte what the server
  // builds from the same files.
  BuildWith(t / "code", t / "client.zip", MiniSpec("b"), "client runner");
  r = AcceptCapsule(t / "client.zip", MiniSpec("a"), opts);
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  EXPECT_TRUE(r.rebuilt);
  EXPECT_EQ(r.sha256, same.sha256);
  EXPECT_EQ(ReadFile(r.path), ReadFile(t / "same.zip"));
  EXPECT_EQ(r.path.parent_path(), t / "scratch");
  EXPECT_TRUE(Inspect(r.path).ok());
}

TEST(Accept, LiesAndBombsAreRefusedBeforeInflating) {
  TempDir t;
  MakeTree(t / "code");
  fs::create_directories(t / "scratch");
  const BuildResult built = BuildWith(t / "code", t / "c.zip", MiniSpec(), "r");
  AcceptOptions opts;
  opts.runner = "r";
  opts.scratch_dir = t / "scratch";
  // The files add up to more than the limit: refused from the manifest alone.
  opts.max_bytes = built.size + 10;  // the archive fits, its files unpacked do not
  AcceptResult r = AcceptCapsule(t / "c.zip", MiniSpec(), opts);
  EXPECT_THAT(Joined(r.errors), HasSubstr("files add up to"));
  opts.max_bytes = built.size - 1;
  EXPECT_THAT(Joined(AcceptCapsule(t / "c.zip", MiniSpec(), opts).errors), HasSubstr("over the"));
  opts.max_bytes = 1 << 30;

  // A .starforge/ file of the user's, listed in a manifest that matches it.
  auto add = [&](const std::string& name, const std::string& out) {
    support::Output o = Shell(
        "python3 -c 'import sys, json, hashlib, zipfile\n"
        "src = zipfile.ZipFile(sys.argv[1]); dst = zipfile.ZipFile(sys.argv[2], \"w\")\n"
        "m = json.loads(src.read(\".starforge/manifest.json\"))\n"
        "m[\"files\"].append({\"executable\": False, \"path\": sys.argv[3], \"size\": 1,\n"
        "  \"sha256\": hashlib.sha256(b\"x\").hexdigest()})\n"
        "m[\"files\"].sort(key=lambda f: f[\"path\"].encode())\n"
        "for i in src.infolist():\n"
        "    if i.filename != \".starforge/manifest.json\": dst.writestr(i, src.read(i))\n"
        "dst.writestr(sys.argv[3], b\"x\")\n"
        "dst.writestr(\".starforge/manifest.json\", json.dumps(m, sort_keys=True) + \"\\n\")\n"
        "dst.close()' " +
        Quote((t / "c.zip").string()) + " " + Quote((t / out).string()) + " " + Quote(name));
    EXPECT_EQ(o.code, 0);
    return t / out;
  };
  EXPECT_THAT(Joined(AcceptCapsule(add(".starforge/evil.py", "evil.zip"), MiniSpec(), opts).errors),
              HasSubstr(".starforge/evil.py: .starforge/ is reserved"));
  EXPECT_THAT(Joined(AcceptCapsule(add("train.py/x", "dir.zip"), MiniSpec(), opts).errors),
              HasSubstr("train.py: is a file, but train.py/x needs it to be a directory"));
  EXPECT_THAT(Joined(AcceptCapsule(t / "missing.zip", MiniSpec(), opts).errors),
              HasSubstr("missing.zip"));
  EXPECT_TRUE(fs::is_empty(t / "scratch"));
}

}  // namespace
}  // namespace starforge::capsule
