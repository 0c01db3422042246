// Unpacking uploaded archives: a capsule round-trips, hostile archives leave nothing behind.
#include "starforge/capsule/extract.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "capsule_test_support.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/inspect.h"

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

// A zip made by Python from entries {"name", "data", "attr"?, "method"?, "repeat"?}.
fs::path MakeZip(const TempDir& t, const nlohmann::json& entries) {
  const fs::path spec = t / "spec.json";
  Write(spec, entries.dump());
  const fs::path zip = t / "in.zip";
  fs::remove(zip);
  support::Output o = Shell(Python("make " + Quote(zip.string()) + " " + Quote(spec.string())));
  EXPECT_EQ(o.code, 0) << o.out;
  return zip;
}

TEST(ExtractZip, ACapsuleRoundTrips) {
  TempDir t;
  Write(t / "code/train.py", "print(1)\n");
  Write(t / "code/bin/run.sh", "#!/bin/sh\n", fs::perms(0755));
  BuildOptions opts;
  opts.output = t / "c.zip";
  opts.runner = "r";
  BuildResult b = Build(Collect(t / "code").files, testing::MiniSpec(), opts);
  ASSERT_TRUE(b.ok()) << Joined(b.errors);
  ExtractResult r = ExtractZip(t / "c.zip", t / "out");
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  EXPECT_EQ(r.files, 5u);
  EXPECT_EQ(ReadFile(t / "out/train.py"), "print(1)\n");
  EXPECT_EQ(ReadFile(t / "out/.starforge/manifest.json"), ToText(b.manifest));
  EXPECT_EQ(fs::status(t / "out/bin/run.sh").permissions() & fs::perms::owner_exec,
            fs::perms::owner_exec);
  EXPECT_EQ(fs::status(t / "out/train.py").permissions() & fs::perms::owner_exec, fs::perms::none);
}

TEST(ExtractZip, DirectoryEntriesAndDeflate) {
  TempDir t;
  fs::path zip = MakeZip(
      t, {{{"name", "a/"}},
          {{"name", "a/b.txt"}, {"data", "hello "}, {"repeat", 1000}, {"method", "deflate"}},
          {{"name", "empty/"}}});
  ExtractResult r = ExtractZip(zip, t / "out");
  ASSERT_TRUE(r.ok()) << Joined(r.errors);
  EXPECT_EQ(r.bytes, 6000u);
  EXPECT_TRUE(fs::is_directory(t / "out/empty"));
  EXPECT_EQ(fs::file_size(t / "out/a/b.txt"), 6000u);
}

struct HostileCase {
  const char* what;
  nlohmann::json entries;
  const char* error;
};

TEST(ExtractZip, HostileArchivesAreRefusedAndLeaveNothing) {
  const HostileCase cases[] = {
      {"parent",
       {{{"name", "../evil"}, {"data", "x"}}},
       "../evil: unsafe entry name: it contains '..'"},
      {"nested parent",
       {{{"name", "a/../../evil"}, {"data", "x"}}},
       "unsafe entry name: it contains '..'"},
      {"absolute",
       {{{"name", "/etc/evil"}, {"data", "x"}}},
       "/etc/evil: unsafe entry name: it is absolute"},
      {"backslash", {{{"name", "..\\evil"}, {"data", "x"}}}, "backslash"},
      {"symlink",
       {{{"name", "link"}, {"data", "/etc/passwd"}, {"attr", 0120777}}},
       "link: symlinks are not accepted"},
      {"device", {{{"name", "dev"}, {"data", ""}, {"attr", 020644}}}, "dev: special files"},
      {"duplicate",
       {{{"name", "a"}, {"data", "x"}}, {{"name", "a"}, {"data", "y"}}},
       "a: two entries with the same name"},
      {"file then dir",
       {{{"name", "a"}, {"data", "x"}}, {{"name", "a/b"}, {"data", "y"}}},
       "a: is a file, but a/b needs it to be a directory"},
  };
  for (const auto& c : cases) {
    TempDir t;
    ExtractResult r = ExtractZip(MakeZip(t, c.entries), t / "out");
    EXPECT_FALSE(r.ok()) << c.what;
    EXPECT_THAT(Joined(r.errors), HasSubstr(c.error)) << c.what;
    EXPECT_FALSE(fs::exists(t / "out")) << c.what;
    EXPECT_FALSE(fs::exists(t.path().parent_path() / "evil")) << c.what;
  }
}

TEST(ExtractZip, LimitsOnEntriesAndSize) {
  TempDir t;
  nlohmann::json many = nlohmann::json::array();
  for (int i = 0; i < 11; ++i)
    many.push_back({{"name", "f" + std::to_string(i)}, {"data", "x"}});
  ExtractLimits limits;
  limits.max_entries = 10;
  ExtractResult r = ExtractZip(MakeZip(t, many), t / "out", limits);
  EXPECT_THAT(Joined(r.errors), HasSubstr("11 entries, more than the 10 allowed"));
  EXPECT_FALSE(fs::exists(t / "out"));

  // A small zip that inflates to 10 MB: refused from its declared sizes.
  nlohmann::json bomb = {
      {{"name", "bomb"}, {"data", "0000000000"}, {"repeat", 1000000}, {"method", "deflate"}}};
  limits = {};
  limits.max_total_bytes = 1 << 20;
  fs::path zip = MakeZip(t, bomb);
  EXPECT_LT(fs::file_size(zip), 50000u);
  r = ExtractZip(zip, t / "out", limits);
  EXPECT_THAT(Joined(r.errors), HasSubstr("unpacks to 9.5 MiB, more than the 1.0 MiB allowed"));
  EXPECT_FALSE(fs::exists(t / "out"));
}

TEST(ExtractZip, LyingSizeHeadersAreCaughtWhileInflating) {
  TempDir t;
  fs::path zip =
      MakeZip(t, {{{"name", "small"}, {"data", "A"}, {"repeat", 100000}, {"method", "deflate"}}});
  // Rewrite the declared uncompressed size (local header and central directory) to 1000.
  std::string bytes = ReadFile(zip);
  auto patch = [&](size_t at) {
    const uint32_t v = 1000;
    for (int i = 0; i < 4; ++i)
      bytes[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  ASSERT_EQ(bytes.compare(0, 4, "PK\x03\x04"), 0);
  patch(22);  // local header: uncompressed size
  const size_t central = bytes.find("PK\x01\x02");
  ASSERT_NE(central, std::string::npos);
  patch(central + 24);  // central directory: uncompressed size
  Write(zip, bytes);
  ExtractResult r = ExtractZip(zip, t / "out");
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(Joined(r.errors), HasSubstr("small: inflates to more than the 1000 bytes"));
  EXPECT_FALSE(fs::exists(t / "out"));
}

// libzip refuses an archive whose central directory lists a name twice without saying which;
// the refusal names it (the API's 422 for an upload's code, `forge capsule inspect`), printable.
TEST(CheckZip, ADuplicateEntryIsNamed) {
  TempDir t;
  fs::path zip = MakeZip(t, {{{"name", "train.py"}, {"data", "print(1)"}},
                             {{"name", "data/x.bin"}, {"data", "1"}},
                             {{"name", "lib/util.py"}, {"data", "2"}},
                             {{"name", "data/x.bin"}, {"data", "3"}, {"method", "deflate"}}});
  ExtractResult r = CheckZip(zip);
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.errors, ElementsAre("data/x.bin: two entries with the same name"));
  r = ExtractZip(zip, t / "out");
  EXPECT_THAT(r.errors, ElementsAre("data/x.bin: two entries with the same name"));
  EXPECT_FALSE(fs::exists(t / "out"));
  InspectResult inspected = Inspect(zip);
  EXPECT_FALSE(inspected.ok());
  EXPECT_THAT(Joined(inspected.problems),
              HasSubstr("in.zip: data/x.bin: two entries with the same name"));

  // A name with a control character is shown escaped, never raw.
  const std::string bell = std::string("bell") + '\x07';
  zip = MakeZip(t, {{{"name", bell}, {"data", "1"}}, {{"name", bell}, {"data", "2"}}});
  r = CheckZip(zip);
  EXPECT_THAT(r.errors, ElementsAre("bell\\x07: two entries with the same name"));

  // An archive comment after the central directory does not hide the name.
  zip = MakeZip(t, {{{"name", "a"}, {"data", "1"}}, {{"name", "a"}, {"data", "2"}}});
  std::string bytes = ReadFile(zip);
  const std::string comment = "a comment PK\x05\x06 that looks like a record";
  const size_t eocd = bytes.rfind("PK\x05\x06");
  ASSERT_NE(eocd, std::string::npos);
  bytes[eocd + 20] = static_cast<char>(comment.size());
  bytes[eocd + 21] = 0;
  Write(zip, bytes + comment);
  r = CheckZip(zip);
  EXPECT_THAT(r.errors, ElementsAre("a: two entries with the same name"));
}

// CheckZip (the API's check of an upload): ExtractZip's refusals, counting, and a bomb's or a lying
// header's bytes, without writing a single file.
TEST(CheckZip, RefusesWhatExtractZipRefusesAndWritesNothing) {
  TempDir t;
  const auto files_under = [](const fs::path& dir) {
    size_t n = 0;
    for (auto it = fs::recursive_directory_iterator(dir); it != fs::end(it); ++it)
      n += it->is_regular_file() ? 1 : 0;
    return n;
  };
  fs::path zip = MakeZip(t, {{{"name", "a/b.py"}, {"data", "print(1)"}},
                             {{"name", "c"}, {"data", "xyz"}, {"method", "deflate"}}});
  const size_t before = files_under(t.path());
  ExtractResult r = CheckZip(zip);
  EXPECT_TRUE(r.ok()) << Joined(r.errors);
  EXPECT_EQ(r.files, 2u);
  EXPECT_EQ(r.bytes, 11u);
  EXPECT_FALSE(r.reserved);
  EXPECT_EQ(files_under(t.path()), before);

  r = CheckZip(MakeZip(t, {{{"name", "../evil"}, {"data", "x"}}}));
  EXPECT_THAT(Joined(r.errors), HasSubstr("../evil: unsafe entry name"));
  r = CheckZip(MakeZip(t, {{{"name", ".starforge/runner.pyz"}, {"data", "x"}}}));
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.reserved);

  ExtractLimits limits;
  limits.max_total_bytes = 1 << 20;
  r = CheckZip(
      MakeZip(
          t,
          {{{"name", "bomb"}, {"data", "0000000000"}, {"repeat", 1000000}, {"method", "deflate"}}}),
      limits);
  EXPECT_THAT(Joined(r.errors), HasSubstr("more than the 1.0 MiB allowed"));

  // Headers that lie are caught by inflating: every byte is counted, none is written.
  zip = MakeZip(t, {{{"name", "small"}, {"data", "A"}, {"repeat", 100000}, {"method", "deflate"}}});
  std::string bytes = ReadFile(zip);
  for (size_t at : {size_t{22}, bytes.find("PK\x01\x02") + 24})
    for (int i = 0; i < 4; ++i)
      bytes[at + i] = static_cast<char>((1000u >> (8 * i)) & 0xff);
  Write(zip, bytes);
  r = CheckZip(zip);
  EXPECT_THAT(Joined(r.errors), HasSubstr("small: inflates to more than the 1000 bytes"));
  EXPECT_EQ(r.local_errno, 0);
}

TEST(ExtractZip, DestinationMustNotExist) {
  TempDir t;
  fs::create_directory(t / "out");
  Write(t / "out/keep", "mine");
  ExtractResult r = ExtractZip(MakeZip(t, {{{"name", "a"}, {"data", "x"}}}), t / "out");
  EXPECT_THAT(Joined(r.errors), HasSubstr("File exists"));
  EXPECT_EQ(ReadFile(t / "out/keep"), "mine");
}

}  // namespace
}  // namespace starforge::capsule
