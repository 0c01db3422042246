// Client-built capsules on the server (capsule/accept.h): checked, and given the server's own
// JobSpec and runner when they differ — the very capsule the server would have built.
#include "starforge/capsule/accept.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zip.h>

#include <algorithm>

#include "../../src/capsule/zip_writer.h"
#include "capsule_test_support.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/inspect.h"
#include "starforge/common/sha256.h"

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

// Writes `from`'s entries to `to` in plain path order — format 2's, where .starforge/ sorts
// among the user's files — each with its compressed bytes as they are: the capsule StarForge
// before format 3 built from the same files.
void WriteInPathOrder(const fs::path& from, const fs::path& to) {
  int err = 0;
  std::unique_ptr<zip_t, decltype(&zip_discard)> za(zip_open(from.c_str(), ZIP_RDONLY, &err),
                                                    &zip_discard);
  ASSERT_NE(za, nullptr);
  std::vector<std::pair<std::string, zip_uint64_t>> names;
  for (zip_int64_t i = 0; i < zip_get_num_entries(za.get(), 0); ++i)
    names.emplace_back(zip_get_name(za.get(), static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW),
                       static_cast<zip_uint64_t>(i));
  std::sort(names.begin(), names.end());
  internal::Fd fd(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  ASSERT_GE(fd.get(), 0);
  internal::ZipWriter zip(fd.get());
  for (const auto& [name, i] : names) {
    zip_stat_t st;
    ASSERT_EQ(zip_stat_index(za.get(), i, 0, &st), 0);
    zip_uint8_t opsys = 0;
    zip_uint32_t attr = 0;
    ASSERT_EQ(zip_file_get_external_attributes(za.get(), i, 0, &opsys, &attr), 0);
    internal::ZipEntryInfo info;
    info.name = name;
    info.method = static_cast<uint16_t>(st.comp_method);
    info.crc32 = st.crc;
    info.size = st.size;
    info.comp_size = st.comp_size;
    info.executable = ((attr >> 16) & 0100) != 0;
    zip.Begin(info);
    std::unique_ptr<zip_file_t, decltype(&zip_fclose)> f(
        zip_fopen_index(za.get(), i, ZIP_FL_COMPRESSED), &zip_fclose);
    ASSERT_NE(f, nullptr);
    std::vector<char> data(st.comp_size);
    ASSERT_EQ(zip_fread(f.get(), data.data(), data.size()), static_cast<zip_int64_t>(data.size()));
    zip.Data(data.data(), data.size());
  }
  ASSERT_TRUE(zip.Finish());
}

// Capsules of format 2 stay valid: one whose JobSpec and runner are the server's is stored as it
// is (its own digest); one whose JobSpec the server replaces is written again in format 3 —
// byte for byte the capsule the server would build itself.
TEST(Accept, ACapsuleOfFormat2IsStoredAsItIsOrRewrittenInFormat3) {
  TempDir t;
  MakeTree(t / "code");
  fs::create_directories(t / "scratch");
  AcceptOptions opts;
  opts.runner = "server runner";
  opts.scratch_dir = t / "scratch";
  const BuildResult same = BuildWith(t / "code", t / "same.zip", MiniSpec("a"), "server runner");
  WriteInPathOrder(t / "same.zip", t / "old.zip");
  const std::string old = ReadFile(t / "old.zip");
  ASSERT_EQ(old.size(), ReadFile(t / "same.zip").size());
  ASSERT_LT(old.find(".starforge/manifest.json"), old.find("train.py"));  // format 2's order

  AcceptResult r = AcceptCapsule(t / "old.zip", MiniSpec("a"), opts);
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  EXPECT_FALSE(r.rebuilt);
  EXPECT_EQ(r.sha256, Sha256Hex(old));
  EXPECT_NE(r.sha256, same.sha256);

  BuildWith(t / "code", t / "client.zip", MiniSpec("b"), "client runner");
  WriteInPathOrder(t / "client.zip", t / "old-client.zip");
  r = AcceptCapsule(t / "old-client.zip", MiniSpec("a"), opts);
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  EXPECT_TRUE(r.rebuilt);
  EXPECT_EQ(r.sha256, same.sha256);
  EXPECT_EQ(ReadFile(r.path), ReadFile(t / "same.zip"));
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
