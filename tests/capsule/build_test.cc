// Building capsules: layout, determinism, what Python's zipfile (Ray's unzip) sees, limits.
#include "starforge/capsule/capsule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "capsule_test_support.h"
#include "starforge/capsule/inspect.h"
#include "starforge/jobspec/parse.h"
#include "starforge/kuberay/constants.h"

namespace starforge::capsule {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Joined;
using testing::MiniSpec;
using ::testing::Not;
using testing::Python;
using testing::Quote;
using testing::ReadFile;
using testing::Shell;
using testing::TempDir;
using testing::Write;
namespace fs = std::filesystem;

constexpr std::string_view kRunner = "PK-fake-runner-bytes\n";

std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s)
    c = static_cast<char>(rng());
  return s;
}

// A small tree with a bit of everything: nested dirs, an executable, compressible text,
// incompressible bytes, an empty file, a UTF-8 name.
void MakeTree(const fs::path& root, fs::perms file_perms = fs::perms(0644)) {
  std::string text;
  for (int i = 0; i < 2000; ++i)
    text += "step " + std::to_string(i) + ": loss going down\n";
  Write(root / "train.py", "import sys\nprint('hi')\n", file_perms);
  Write(root / "run.sh", "#!/bin/sh\npython train.py\n", fs::perms(0755));
  Write(root / "configs/base.yaml", "lr: 0.001\n", file_perms);
  Write(root / "configs/big.txt", text, file_perms);
  Write(root / "data/noise.bin", RandomBytes(200000, 7), file_perms);
  Write(root / "empty", "", file_perms);
  Write(root / "pkg/sub/m\xc3\xa9t\xc3\xa9o.py", "x = 1\n", file_perms);
}

BuildResult BuildDir(const fs::path& code, const fs::path& out, BuildOptions opts = {}) {
  CollectResult c = Collect(code);
  EXPECT_TRUE(c.ok()) << Joined(c.errors);
  opts.output = out;
  if (!opts.runner) opts.runner = kRunner;
  return Build(c.files, MiniSpec(), opts);
}

void SetMtime(const fs::path& p, time_t when) {
  timeval tv[2] = {{when, 0}, {when, 0}};
  ::utimes(p.c_str(), tv);
}

nlohmann::json PythonExtract(const fs::path& zip, const fs::path& dest) {
  support::Output o = Shell(Python("extract " + Quote(zip.string()) + " " + Quote(dest.string())));
  EXPECT_EQ(o.code, 0) << o.out;
  return nlohmann::json::parse(o.out);
}

TEST(Build, WritesTheCapsuleAndReportsItsIdentity) {
  TempDir t;
  MakeTree(t / "code");
  BuildResult r = BuildDir(t / "code", t / "out.zip");
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  EXPECT_EQ(r.path, t / "out.zip");
  EXPECT_EQ(r.size, fs::file_size(t / "out.zip"));
  EXPECT_EQ(r.user_files, 7u);
  support::Output sha = Shell("sha256sum " + Quote((t / "out.zip").string()));
  EXPECT_EQ(sha.out.substr(0, 64), r.sha256);
  EXPECT_EQ(ObjectKey(r.sha256), "capsules/sha256-" + r.sha256 + ".zip");
  // Nothing else is left next to it (the temporary directory is gone).
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(t.path()))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_THAT(names, ElementsAre("code", "out.zip"));
}

TEST(Build, DefaultFileNameIsTheDigest) {
  TempDir t;
  MakeTree(t / "code");
  fs::create_directory(t / "out");
  CollectResult c = Collect(t / "code");
  BuildOptions opts;
  opts.output_dir = t / "out";
  opts.runner = kRunner;
  BuildResult r = Build(c.files, MiniSpec(), opts);
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  EXPECT_EQ(r.path, t / "out" / ("sha256-" + r.sha256 + ".zip"));
  EXPECT_TRUE(fs::exists(r.path));
}

TEST(Build, ManifestListsEveryFileButItself) {
  TempDir t;
  MakeTree(t / "code");
  BuildResult r = BuildDir(t / "code", t / "c.zip");
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  std::vector<std::string> paths;
  for (const auto& f : r.manifest.files)
    paths.push_back(f.path);
  EXPECT_THAT(paths, ElementsAre(".starforge/jobspec.json", ".starforge/runner.pyz",
                                 "configs/base.yaml", "configs/big.txt", "data/noise.bin", "empty",
                                 "pkg/sub/m\xc3\xa9t\xc3\xa9o.py", "run.sh", "train.py"));
  const ManifestEntry& run = r.manifest.files[7];
  EXPECT_TRUE(run.executable);
  EXPECT_FALSE(r.manifest.files[8].executable);
  EXPECT_EQ(r.manifest.files[5].size, 0u);
  EXPECT_EQ(r.manifest.files[5].sha256,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(r.manifest.files[1].size, kRunner.size());
  // Round trip through the exact text stored in the capsule.
  StatusOr<Manifest> parsed = ParseManifest(ToText(r.manifest));
  ASSERT_TRUE(parsed) << parsed.status().message();
  EXPECT_EQ(*parsed, r.manifest);
}

// The manifest's text is nlohmann's dump() of it, byte for byte, whatever the names: ToText
// writes the usual ones itself (faster) and leaves the rest to nlohmann.
TEST(Build, ManifestTextIsTheJsonDumpForAnyName) {
  for (const std::string name :
       {"a.py", "dir/with space/x.py", "quote\"d.py", "\xc3\xbc/\xe5\x90\x8d.py", "back\\slash",
        "tab\tand\x01control", "del\x7f", "{}[],:"}) {
    SCOPED_TRACE(name);
    Manifest m;
    m.files.push_back({".starforge/jobspec.json", 554, std::string(64, 'a'), false});
    m.files.push_back({name, 18446744073709551615ull, std::string(64, 'f'), true});
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : m.files)
      files.push_back(
          {{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}, {"executable", f.executable}});
    const nlohmann::json doc = {{"version", m.version}, {"files", files}};
    EXPECT_EQ(ToText(m), doc.dump() + "\n");
  }
  EXPECT_EQ(ToText(Manifest{}), "{\"files\":[],\"version\":1}\n");
}

TEST(Build, PythonZipfileExtractsExactlyTheManifest) {
  TempDir t;
  MakeTree(t / "code");
  BuildResult r = BuildDir(t / "code", t / "c.zip");
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  nlohmann::json info = PythonExtract(t / "c.zip", t / "x");
  EXPECT_TRUE(info["testzip"].is_null()) << info["testzip"];
  EXPECT_TRUE(info["ray_top_level_dir"].is_null())
      << "Ray would strip " << info["ray_top_level_dir"];

  // Every extracted file is in the manifest with its size and digest, and nothing else is.
  std::map<std::string, std::pair<uint64_t, std::string>> extracted;
  for (const auto& e : fs::recursive_directory_iterator(t / "x")) {
    ASSERT_FALSE(e.is_symlink());
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), t / "x").string();
    support::Output sha = Shell("sha256sum " + Quote(e.path().string()));
    extracted[rel] = {e.file_size(), sha.out.substr(0, 64)};
  }
  std::map<std::string, std::pair<uint64_t, std::string>> expected;
  for (const auto& f : r.manifest.files)
    expected[f.path] = {f.size, f.sha256};
  const std::string manifest_text = ReadFile(t / "x/.starforge/manifest.json");
  extracted.erase(".starforge/manifest.json");
  EXPECT_EQ(extracted, expected);
  EXPECT_EQ(manifest_text, ToText(r.manifest));
  EXPECT_EQ(ReadFile(t / "x/.starforge/jobspec.json"), jobspec::ToCanonicalText(MiniSpec()));
  EXPECT_EQ(ReadFile(t / "x/.starforge/runner.pyz"), kRunner);

  // Entry metadata: files only, sorted, fixed time, no extra fields, Unix modes.
  std::vector<std::string> names;
  for (const auto& zi : info["infos"]) {
    const std::string name = zi["name"];
    names.push_back(name);
    EXPECT_NE(name.back(), '/') << "directory entry " << name;
    EXPECT_EQ(zi["date_time"], nlohmann::json({1980, 1, 1, 0, 0, 0})) << name;
    EXPECT_EQ(zi["extra_central"], 0) << name;
    EXPECT_EQ(zi["extra_local"], 0) << name;
    EXPECT_EQ(zi["comment"], 0) << name;
    EXPECT_EQ(zi["create_system"], 3) << name;
    const uint32_t mode = zi["external_attr"].get<uint32_t>() >> 16;
    EXPECT_EQ(mode, name == "run.sh" ? 0100755u : 0100644u) << name;
    const int flags = zi["flag_bits"].get<int>();
    EXPECT_EQ(flags & 0x6, 0) << name << ": deflate level other than 6 (\"normal\")";
    EXPECT_EQ(flags & 0x8, 0) << name << ": data descriptor";
    const bool utf8_flag = (flags & 0x800) != 0;
    EXPECT_EQ(utf8_flag, name.find('\xc3') != std::string::npos) << name;
  }
  // The user's files by path, then StarForge's by path (format 3): a change to a user's file
  // leaves every byte before it as it was.
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end(), ArchiveOrder));
  ASSERT_EQ(names.size(), r.manifest.files.size() + 1);
  EXPECT_EQ(std::vector<std::string>(names.end() - 3, names.end()),
            (std::vector<std::string>{".starforge/jobspec.json", ".starforge/manifest.json",
                                      ".starforge/runner.pyz"}));
  EXPECT_EQ(info["comment"], 0);
}

TEST(Build, CompressionIsDecidedByContent) {
  TempDir t;
  MakeTree(t / "code");
  BuildResult r = BuildDir(t / "code", t / "c.zip");
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  nlohmann::json info = PythonExtract(t / "c.zip", t / "x");
  std::map<std::string, int> method;
  for (const auto& zi : info["infos"])
    method[zi["name"]] = zi["compress_type"];
  EXPECT_EQ(method["configs/big.txt"], 8);  // deflate
  EXPECT_EQ(method["data/noise.bin"], 0);   // stored: random bytes do not compress
  EXPECT_EQ(method["empty"], 0);
  EXPECT_LT(r.size, 200000u + 20000u);  // the text compressed well
}

TEST(Build, SameTreeTwiceIsByteIdenticalWhateverTheThreadCount) {
  TempDir t;
  MakeTree(t / "code");
  for (int i = 0; i < 20; ++i)
    Write(t / "code/more" / (std::to_string(i) + ".txt"), std::string(1000 * i, 'a' + i));
  BuildResult a = BuildDir(t / "code", t / "a.zip");
  BuildOptions opts;
  opts.threads = 5;
  BuildResult b = BuildDir(t / "code", t / "b.zip", opts);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.sha256, b.sha256);
  EXPECT_EQ(ReadFile(t / "a.zip"), ReadFile(t / "b.zip"));
}

// What `forge submit` uploads while the capsule is written (BuildOptions::written) is read back
// from the file up to where the build says it has written: those bytes are the archive's,
// including a big stored file streamed by the writer, and the count only grows, to the size.
TEST(Build, WrittenReportsTheArchiveAsItGrows) {
  TempDir t;
  MakeTree(t / "code");
  Write(t / "code/data/big.bin", RandomBytes(5u << 20, 9));
  int fd = -1;
  uint64_t last = 0, calls = 0;
  bool grew = true;
  std::string read_back;  // read as a concurrent reader would, at each call
  BuildOptions opts;
  opts.written = [&](int file, uint64_t bytes) {
    if (fd < 0) fd = ::fcntl(file, F_DUPFD_CLOEXEC, 0);
    grew = grew && bytes > last;
    last = bytes;
    ++calls;
    std::string more(bytes - read_back.size(), '\0');
    ASSERT_EQ(::pread(fd, more.data(), more.size(), static_cast<off_t>(read_back.size())),
              static_cast<ssize_t>(more.size()));
    read_back += more;
  };
  BuildResult r = BuildDir(t / "code", t / "a.zip", opts);
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_TRUE(grew);
  EXPECT_GT(calls, 5u);  // the 5 MiB file alone is several writes
  EXPECT_EQ(last, r.size);
  EXPECT_TRUE(read_back == ReadFile(t / "a.zip"));
  EXPECT_EQ(r.sha256, BuildDir(t / "code", t / "b.zip").sha256);
}

TEST(Build, AFileChangedWhileBuildingIsAnError) {
  TempDir t;
  MakeTree(t / "code");
  CollectResult c = Collect(t / "code");
  BuildOptions opts;
  opts.output = t / "c.zip";
  opts.runner = kRunner;
  bool touched = false;
  // data/noise.bin is stored, so it is read again when the capsule is written, after this.
  opts.progress = [&](const BuildProgress& p) {
    if (p.phase != BuildProgress::Phase::kWriting || touched) return;
    touched = true;
    SetMtime(t / "code/data/noise.bin", 1000000000);
  };
  BuildResult r = Build(c.files, MiniSpec(), opts);
  ASSERT_TRUE(touched);
  EXPECT_THAT(r.errors, ElementsAre("data/noise.bin: changed while the capsule was being built; "
                                    "build again"));
  EXPECT_FALSE(fs::exists(t / "c.zip"));
}

TEST(Build, CopiesElsewhereWithOtherTimesPermissionsUmaskAndTimezoneAreByteIdentical) {
  TempDir one, two;
  MakeTree(one / "code");
  // The second copy: deeper path, other file permissions (same x bits), other mtimes,
  // created under another umask, built in another timezone with another thread count.
  const mode_t old_umask = ::umask(077);
  MakeTree(two / "some/deeper/place", fs::perms(0600));
  ::umask(old_umask);
  for (const auto& e : fs::recursive_directory_iterator(two / "some"))
    SetMtime(e.path(), 1234567890);
  SetMtime(two / "some/deeper/place/train.py", 2000000000);

  BuildResult a = BuildDir(one / "code", one / "a.zip");
  const char* old_tz = std::getenv("TZ");
  const std::string saved_tz = old_tz ? old_tz : "";
  ::setenv("TZ", "Pacific/Kiritimati", 1);
  ::tzset();
  BuildOptions opts;
  opts.threads = 1;
  BuildResult b = BuildDir(two / "some/deeper/place", two / "b.zip", opts);
  if (old_tz)
    ::setenv("TZ", saved_tz.c_str(), 1);
  else
    ::unsetenv("TZ");
  ::tzset();
  ASSERT_TRUE(a.ok()) << Joined(a.errors);
  ASSERT_TRUE(b.ok()) << Joined(b.errors);
  EXPECT_EQ(a.sha256, b.sha256);
  EXPECT_EQ(ReadFile(one / "a.zip"), ReadFile(two / "b.zip"));
}

TEST(Build, ContentJobSpecRunnerAndExecutableBitsChangeTheIdentity) {
  TempDir t;
  MakeTree(t / "code");
  const std::string base = BuildDir(t / "code", t / "0.zip").sha256;
  Write(t / "code/train.py", "import sys\nprint('hj')\n");
  const std::string content = BuildDir(t / "code", t / "1.zip").sha256;
  fs::permissions(t / "code/train.py", fs::perms(0755));
  const std::string exec = BuildDir(t / "code", t / "2.zip").sha256;
  BuildOptions other_runner;
  other_runner.runner = "another runner";
  const std::string runner = BuildDir(t / "code", t / "3.zip", other_runner).sha256;
  CollectResult c = Collect(t / "code");
  BuildOptions opts;
  opts.output = t / "4.zip";
  opts.runner = kRunner;
  const std::string spec = Build(c.files, MiniSpec("other-name"), opts).sha256;
  const std::set<std::string> all = {base, content, exec, runner, spec};
  EXPECT_EQ(all.size(), 5u);
}

// Pins the exact bytes: a change here means capsules built by different StarForge versions of
// the same tree no longer deduplicate. Update only for an intended format change (the last:
// format 3, StarForge's files after the user's; before it format 2, libdeflate level 1 in a
// container written by zip_writer.cc; docs/capsule.md).
TEST(Build, GoldenDigest) {
  TempDir t;
  Write(t / "code/train.py", "print('hello')\n");
  std::string text;
  for (int i = 0; i < 100; ++i)
    text += "line " + std::to_string(i % 7) + "\n";
  Write(t / "code/notes.txt", text);
  Write(t / "code/bin/run", "#!/bin/sh\n", fs::perms(0755));
  BuildResult r = BuildDir(t / "code", t / "g.zip");
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  EXPECT_EQ(r.sha256, "ca25d209cced60e24979b1a54423deabfada4c7d8dcb5bdf385e27bcf70dbbc4")
      << "size " << r.size;
}

TEST(Build, ACodeDirectoryHoldingOneDirectoryKeepsTwoTopLevelEntries) {
  TempDir t;
  Write(t / "code/mypkg/__init__.py", "");
  Write(t / "code/mypkg/train.py", "x");
  BuildResult r = BuildDir(t / "code", t / "c.zip");
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  nlohmann::json info = PythonExtract(t / "c.zip", t / "x");
  EXPECT_TRUE(info["ray_top_level_dir"].is_null())
      << "Ray would strip " << info["ray_top_level_dir"];
  std::set<std::string> top;
  for (const auto& zi : info["infos"]) {
    const std::string name = zi["name"];
    top.insert(name.substr(0, name.find('/')));
  }
  EXPECT_EQ(top, (std::set<std::string>{".starforge", "mypkg"}));
  EXPECT_TRUE(fs::exists(t / "x/mypkg/train.py"));
  EXPECT_TRUE(fs::exists(t / "x/.starforge/runner.pyz"));
}

TEST(Build, AnEmptyTreeIsRefused) {
  TempDir t;
  fs::create_directories(t / "code/.git");
  Write(t / "code/.git/HEAD", "x");
  BuildResult r = BuildDir(t / "code", t / "c.zip");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_THAT(r.errors[0], HasSubstr("nothing to package"));
  EXPECT_THAT(r.errors[0], HasSubstr("Ray would strip"));
  EXPECT_FALSE(fs::exists(t / "c.zip"));
}

TEST(Build, HostileFileListsAreRefused) {
  TempDir t;
  Write(t / "f", "x");
  auto errors_for = [&](std::vector<InputFile> files) {
    BuildOptions opts;
    opts.output = t / "c.zip";
    opts.runner = kRunner;
    BuildResult r = Build(files, MiniSpec(), opts);
    EXPECT_FALSE(fs::exists(t / "c.zip"));
    return Joined(r.errors);
  };
  const fs::path f = t / "f";
  EXPECT_THAT(errors_for({{"/etc/passwd", f, 1, false}}),
              HasSubstr("/etc/passwd: the path is absolute"));
  EXPECT_THAT(errors_for({{"../x", f, 1, false}}), HasSubstr("../x: the path contains '..'"));
  EXPECT_THAT(errors_for({{"a/../../x", f, 1, false}}), HasSubstr("contains '..'"));
  EXPECT_THAT(errors_for({{"a//b", f, 1, false}}), HasSubstr("empty component"));
  EXPECT_THAT(errors_for({{"./a", f, 1, false}}), HasSubstr("contains '.'"));
  EXPECT_THAT(errors_for({{"a/", f, 1, false}}), HasSubstr("empty component"));
  EXPECT_THAT(errors_for({{"", f, 1, false}}), HasSubstr("the path is empty"));
  EXPECT_THAT(errors_for({{"a\\b", f, 1, false}}), HasSubstr("backslash"));
  EXPECT_THAT(errors_for({{std::string("\xff"), f, 1, false}}), HasSubstr("not valid UTF-8"));
  EXPECT_THAT(errors_for({{".starforge/runner.pyz", f, 1, false}}), HasSubstr("reserved"));
  EXPECT_THAT(errors_for({{"a", f, 1, false}, {"a", f, 1, false}}), HasSubstr("a: listed twice"));
  EXPECT_THAT(errors_for({{"a", f, 1, false}, {"a/b", f, 1, false}}),
              HasSubstr("a: is a file, but a/b needs it to be a directory"));
  EXPECT_THAT(errors_for({{"gone", t / "missing", 1, false}}),
              HasSubstr("gone: cannot read: No such file or directory"));
  EXPECT_THAT(errors_for({{"dir", t.path(), 1, false}}), HasSubstr("dir: not a regular file"));
}

// Deterministic incompressible data of `n` bytes in `dir/name`.
void WriteNoise(const fs::path& p, size_t n, unsigned seed) {
  Write(p, RandomBytes(n, seed));
}

TEST(Build, OverTheLimitListsTheTenLargestFiles) {
  TempDir t;
  Write(t / "code/train.py", "x");
  for (int i = 0; i < 12; ++i)
    WriteNoise(t / "code/shards" / ("s" + std::to_string(i) + ".bin"), 20000 + 1000 * i, i);
  BuildOptions opts;
  opts.max_bytes = 100000;
  BuildResult r = BuildDir(t / "code", t / "c.zip", opts);
  ASSERT_EQ(r.errors.size(), 1u) << Joined(r.errors);
  const std::string& msg = r.errors[0];
  EXPECT_THAT(msg, HasSubstr("over the 97.7 KiB limit (FORGE_CAPSULE_MAX_BYTES"));
  EXPECT_THAT(msg, HasSubstr("Largest files:\n    30.3 KiB  shards/s11.bin\n"));
  EXPECT_THAT(msg, HasSubstr("shards/s2.bin\nLeave out what the job does not need with a "
                             ".forgeignore file"));
  EXPECT_THAT(msg, Not(HasSubstr("shards/s1.bin")));  // only ten
  EXPECT_THAT(msg, Not(HasSubstr("train.py")));
  EXPECT_FALSE(fs::exists(t / "c.zip"));
  // No temporary files are left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(t.path()), fs::directory_iterator()), 1);
}

TEST(Build, OverTheLimitWithCompressibleFilesIsCaughtWhileWriting) {
  TempDir t;
  std::string text;
  for (int i = 0; i < 400000; ++i)
    text += std::to_string(static_cast<int64_t>(i) * 7919 % 100003) +
            "\n";  // ~2.6 MB that deflates to ~1 MB
  for (int i = 0; i < 4; ++i)
    Write(t / "code" / ("part" + std::to_string(i) + ".txt"), text + std::to_string(i));
  BuildOptions opts;
  opts.max_bytes = 1 << 20;
  BuildResult r = BuildDir(t / "code", t / "c.zip", opts);
  ASSERT_EQ(r.errors.size(), 1u) << Joined(r.errors);
  // Stopped part-way: the output passed the limit before the last files were compressed.
  EXPECT_THAT(r.errors[0], HasSubstr("the capsule would be over the 1.0 MiB limit"));
  EXPECT_THAT(r.errors[0], HasSubstr("part0.txt"));
  EXPECT_FALSE(fs::exists(t / "c.zip"));
  EXPECT_EQ(std::distance(fs::directory_iterator(t.path()), fs::directory_iterator()), 1);
  // One byte under the real size it fails once written; at the real size it succeeds.
  opts.max_bytes = 100 << 20;
  BuildResult ok = BuildDir(t / "code", t / "c.zip", opts);
  ASSERT_TRUE(ok.ok()) << Joined(ok.errors);
  fs::remove(t / "c.zip");
  opts.max_bytes = static_cast<int64_t>(ok.size) - 1;
  EXPECT_THAT(Joined(BuildDir(t / "code", t / "c.zip", opts).errors),
              HasSubstr("the capsule is " + FormatBytes(ok.size) + ", over the"));
  opts.max_bytes = static_cast<int64_t>(ok.size);
  EXPECT_TRUE(BuildDir(t / "code", t / "c.zip", opts).ok());
}

TEST(Build, InspectAcceptsWhatBuildWrites) {
  TempDir t;
  MakeTree(t / "code");
  BuildResult r = BuildDir(t / "code", t / "c.zip");
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  InspectResult i = Inspect(t / "c.zip");
  EXPECT_TRUE(i.ok()) << Joined(i.problems);
  EXPECT_EQ(i.sha256, r.sha256);
  EXPECT_EQ(i.size, r.size);
  ASSERT_TRUE(i.manifest);
  EXPECT_EQ(*i.manifest, r.manifest);
  EXPECT_EQ(i.verified, r.manifest.files.size());
}

TEST(Build, RealRunnerIsUsedByDefault) {
  TempDir t;
  Write(t / "code/a.py", "x");
  CollectResult c = Collect(t / "code");
  BuildOptions opts;
  opts.output = t / "c.zip";
  BuildResult r = Build(c.files, MiniSpec(), opts);
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  const auto it = std::find_if(r.manifest.files.begin(), r.manifest.files.end(),
                               [](const ManifestEntry& e) { return e.path == kRunnerPath; });
  ASSERT_NE(it, r.manifest.files.end());
}

TEST(Build, PathsAgreeWithWhatTheRayJobStarts) {
  EXPECT_STREQ(kRunnerPath, kuberay::kRunnerPath);
  EXPECT_STREQ(kJobSpecPath, kuberay::kCapsuleJobSpecPath);
}

TEST(Format, Bytes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.0 KiB");
  EXPECT_EQ(FormatBytes(512ULL << 20), "512.0 MiB");
  EXPECT_EQ(FormatBytes(3ULL << 30), "3.0 GiB");
}

TEST(Format, ObjectKeyAndFileName) {
  EXPECT_EQ(ObjectKey("ab12"), "capsules/sha256-ab12.zip");
  EXPECT_EQ(FileName("ab12"), "sha256-ab12.zip");
}

TEST(LooksIncompressible, RandomAndTextAndSmall) {
  EXPECT_TRUE(LooksIncompressible(RandomBytes(65536, 1)));
  EXPECT_FALSE(LooksIncompressible(std::string(65536, 'a')));
  std::string text;
  while (text.size() < 65536)
    text += "the quick brown fox jumps over the lazy dog\n";
  EXPECT_FALSE(LooksIncompressible(text));
  EXPECT_FALSE(LooksIncompressible(RandomBytes(100, 1)));  // too small to judge
}

// The decision picks stored or deflate, so it is part of every digest: the four-histogram
// version must decide exactly as the plain one did, at any length (not only multiples of four)
// and right at the threshold.
TEST(LooksIncompressible, DecidesAsTheOneHistogramVersion) {
  auto reference = [](std::string_view head) {
    const uint64_t n = head.size();
    if (n < 512) return false;
    std::array<uint64_t, 256> counts{};
    for (unsigned char c : head)
      ++counts[c];
    uint64_t sum_sq = 0;
    for (uint64_t c : counts)
      sum_sq += c * c;
    return sum_sq * 256 * 10 <= (256 * n + n * n) * 11;
  };
  std::mt19937 rng(17);
  int stored = 0, deflated = 0;
  for (int i = 0; i < 400; ++i) {
    const size_t n = 500 + rng() % 70000;
    // Random bytes over an alphabet of 140..256 symbols: around the threshold, both ways.
    const unsigned alphabet = 140 + rng() % 117;
    std::string head(n, '\0');
    for (auto& c : head)
      c = static_cast<char>(rng() % alphabet);
    const bool want = reference(head);
    (want ? stored : deflated)++;
    ASSERT_EQ(LooksIncompressible(head), want) << "length " << n << ", alphabet " << alphabet;
  }
  EXPECT_GT(stored, 20);
  EXPECT_GT(deflated, 20);
}

}  // namespace
}  // namespace starforge::capsule
