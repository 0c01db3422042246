// StreamCheck: a capsule checked while it is written (the server's upload) gets Inspect's
// verdict, and an archive that disagrees with itself or is cut short is refused.
#include "starforge/capsule/stream_check.h"

#include <fcntl.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "capsule_test_support.h"
#include "starforge/capsule/capsule.h"

namespace starforge::capsule {
namespace {

using ::testing::HasSubstr;
using testing::Joined;
using testing::Python;
using testing::Quote;
using testing::ReadFile;
using testing::Shell;
using testing::TempDir;
using testing::Write;
namespace fs = std::filesystem;

// Writes `bytes` to `path` in uneven pieces (some of one byte, some of hundreds of KiB), telling
// a StreamCheck after each, as the server does while an upload arrives; then Finish. Only the
// first `written` bytes (default: all) are written.
std::optional<InspectResult> Streamed(const fs::path& path, const std::string& bytes,
                                      const InspectOptions& options = {},
                                      size_t written = std::string::npos) {
  written = std::min(written, bytes.size());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0);
  StreamCheck check(fd, options);
  ::close(fd);  // the check keeps its own
  const int out = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  uint64_t x = 7;
  for (size_t at = 0; at < written;) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const size_t sizes[] = {1, 30, 4096, 65536, 300000};
    const size_t n = std::min(written - at, sizes[(x >> 33) % 5] + (x >> 50) % 17);
    EXPECT_EQ(::write(out, bytes.data() + at, n), static_cast<ssize_t>(n));
    check.Written(n);
    at += n;
  }
  ::close(out);
  return check.Finish();
}

class StreamCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string text;
    for (int i = 0; i < 1200; ++i)
      text += "value_" + std::to_string(i % 97) + " = compute(" + std::to_string(i) + ")\n";
    std::string noise(5 << 20, '\0');  // stored, and longer than one piece of the check
    uint64_t x = 1;
    for (auto& c : noise) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      c = static_cast<char>(x >> 56);
    }
    Write(t_ / "code/train.py", "print('train')\n");
    Write(t_ / "code/lib/util.py", "def f():\n    return 1\n");
    Write(t_ / "code/lib/big.py", text);
    Write(t_ / "code/data.bin", noise);
    Write(t_ / "code/empty.txt", "");
    Write(t_ / "code/run.sh", "#!/bin/sh\n", fs::perms(0755));
    BuildOptions opts;
    opts.output = capsule_;
    opts.runner = "runner";
    BuildResult r = Build(Collect(t_ / "code").files, testing::MiniSpec(), opts);
    ASSERT_TRUE(r.ok()) << Joined(r.errors);
    sha256_ = r.sha256;
  }

  // Python rewrites the archive (a valid zip, consistent CRCs): only the manifest can tell.
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

  // The stream's verdict on `zip` must be Inspect's, problem for problem.
  void ExpectSameAsInspect(const fs::path& zip, const InspectOptions& options = {}) {
    SCOPED_TRACE(zip.filename().string());
    const std::optional<InspectResult> streamed =
        Streamed(t_ / "upload.zip", ReadFile(zip), options);
    ASSERT_TRUE(streamed) << "an archive Python's zipfile writes is checked as it arrives";
    const InspectResult inspected = Inspect(zip, options);
    EXPECT_EQ(streamed->problems, inspected.problems);
    EXPECT_EQ(streamed->ok(), inspected.ok());
    EXPECT_EQ(streamed->verified, inspected.verified);
    if (inspected.ok()) {
      EXPECT_EQ(streamed->sha256, inspected.sha256);
      EXPECT_EQ(streamed->size, inspected.size);
    }
  }

  TempDir t_;
  fs::path capsule_ = t_ / "c.zip";
  std::string sha256_;
};

TEST_F(StreamCheckTest, AGoodCapsuleVerifiesAsItArrives) {
  const std::optional<InspectResult> r = Streamed(t_ / "upload.zip", ReadFile(capsule_));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->ok()) << Joined(r->problems);
  EXPECT_EQ(r->sha256, sha256_);
  EXPECT_EQ(r->verified, 8u);  // 6 files, the JobSpec and the runner
  ASSERT_TRUE(r->manifest);
  EXPECT_EQ(r->manifest->files.size(), 8u);
  ExpectSameAsInspect(capsule_);
}

TEST_F(StreamCheckTest, TamperedArchivesGetInspectsVerdict) {
  ExpectSameAsInspect(Tampered("replace", "train.py", "print('evil!')\n"));  // another SHA-256
  ExpectSameAsInspect(Tampered("replace", "lib/util.py", "x"));              // another size
  ExpectSameAsInspect(Tampered("replace", "sneaky.py", "import os"));        // not listed
  ExpectSameAsInspect(Tampered("drop", "lib/util.py"));                      // missing
  ExpectSameAsInspect(Tampered("drop", ".starforge/manifest.json"));
  ExpectSameAsInspect(Tampered("replace", ".starforge/manifest.json", R"({"version":2})"));
  ExpectSameAsInspect(Tampered("replace", "../escape.py", "x"));  // an unsafe name
  ExpectSameAsInspect(Tampered("replace", "lib/", ""));           // a directory entry
  // Bigger than the manifest says: Inspect stops inflating one byte past the manifest's size,
  // the stream check (which inflates before it has read the manifest) at the header's.
  std::string text = ReadFile(t_ / "code/lib/big.py");
  const fs::path bigger = Tampered("replace", "lib/big.py", text + text);
  const std::optional<InspectResult> streamed = Streamed(t_ / "upload.zip", ReadFile(bigger));
  ASSERT_TRUE(streamed);
  EXPECT_THAT(streamed->problems,
              ::testing::ElementsAre("lib/big.py: size over " + std::to_string(2 * text.size()) +
                                     " bytes, the manifest says " + std::to_string(text.size())));
  EXPECT_FALSE(Inspect(bigger).ok());
  // Limits before anything is inflated: the files add up to more than allowed.
  InspectOptions small;
  small.max_total_bytes = 1 << 20;
  const std::optional<InspectResult> r = Streamed(t_ / "upload.zip", ReadFile(capsule_), small);
  EXPECT_FALSE(r && r->ok()) << "over the limit";
  small.max_entries = 3;
  small.max_total_bytes = UINT64_MAX;
  ExpectSameAsInspect(capsule_, small);
}

TEST_F(StreamCheckTest, CorruptedBytesAreCaught) {
  std::string bytes = ReadFile(capsule_);
  const size_t at = bytes.find("print('train')");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 'P';
  Write(t_ / "bad.zip", bytes);
  ExpectSameAsInspect(t_ / "bad.zip");
  EXPECT_THAT(Joined(Streamed(t_ / "upload.zip", bytes)->problems),
              HasSubstr("train.py: cannot be read: CRC error"));
}

// Readers go by the central directory, the check by the local headers it read: an archive whose
// central directory says anything else about an entry is refused, whatever Inspect would say.
TEST_F(StreamCheckTest, ACentralDirectoryThatDisagreesWithTheLocalHeadersIsRefused) {
  const std::string good = ReadFile(capsule_);
  // The central directory's record for train.py.
  const std::string record = std::string("PK\x01\x02", 4);
  size_t cd = std::string::npos;
  for (size_t at = good.find(record); at != std::string::npos; at = good.find(record, at + 1)) {
    if (good.compare(at + 46, 8, "train.py") == 0) cd = at;
  }
  ASSERT_NE(cd, std::string::npos);
  auto refused = [&](std::string bytes, const std::string& message) {
    const std::optional<InspectResult> r = Streamed(t_ / "upload.zip", bytes);
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->ok());
    EXPECT_THAT(Joined(r->problems), HasSubstr(message));
    Write(t_ / "doctored.zip", bytes);
    EXPECT_FALSE(Inspect(t_ / "doctored.zip").ok());
  };
  std::string bytes = good;
  bytes[cd + 16] ^= 1;  // its CRC-32
  refused(bytes, "train.py: the central directory says CRC-32 ");
  bytes = good;
  bytes[cd + 46] = 'T';  // its name
  refused(bytes, "names the entry at byte ");
  bytes = good;
  bytes[cd + 42] ^= 1;  // its local header's offset
  refused(bytes, "where no entry starts");
  bytes = good;
  bytes[cd + 24] ^= 1;  // its size
  refused(bytes, "train.py: the central directory says size ");
  EXPECT_THAT(Joined(Streamed(t_ / "upload.zip", bytes)->problems),
              HasSubstr("the archive disagrees with itself"));
}

TEST_F(StreamCheckTest, AnArchiveCutShortIsRefused) {
  const std::string good = ReadFile(capsule_);
  for (const size_t n : {size_t{0}, size_t{10}, good.size() / 2, good.size() - 30}) {
    SCOPED_TRACE(n);
    const std::optional<InspectResult> r = Streamed(t_ / "upload.zip", good, {}, n);
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->ok());
    EXPECT_THAT(Joined(r->problems), HasSubstr("the upload was cut short"));
    EXPECT_THAT(Joined(r->problems), HasSubstr("ends at byte " + std::to_string(n)));
  }
}

// Archives laid out otherwise are left to Inspect, which reads any zip libzip reads.
TEST_F(StreamCheckTest, OtherLayoutsAreLeftToInspect) {
  auto python = [&](const std::string& name, const std::string& code) {
    const fs::path out = t_ / name;
    support::Output o = Shell("python3 -c " + Quote("import sys, zipfile\n" + code) + " " +
                              Quote(capsule_.string()) + " " + Quote(out.string()));
    EXPECT_EQ(o.code, 0) << o.out;
    return ReadFile(out);
  };
  // A comment after the end record.
  EXPECT_FALSE(Streamed(t_ / "upload.zip",
                        python("comment.zip",
                               "import shutil; shutil.copy(sys.argv[1], sys.argv[2])\n"
                               "z = zipfile.ZipFile(sys.argv[2], 'a'); z.comment = b'hi'; "
                               "z.close()")));
  // Data descriptors (zipfile writing to a stream it cannot seek).
  EXPECT_FALSE(Streamed(t_ / "upload.zip",
                        python("descriptors.zip",
                               "src = zipfile.ZipFile(sys.argv[1])\n"
                               "class S:\n"
                               "  def __init__(s, f): s.f = f\n"
                               "  def write(s, b): return s.f.write(b)\n"
                               "  def flush(s): s.f.flush()\n"
                               "with open(sys.argv[2], 'wb') as f:\n"
                               "  z = zipfile.ZipFile(S(f), 'w')\n"
                               "  for i in src.infolist():\n"
                               "    with z.open(i.filename, 'w') as w: w.write(src.read(i))\n"
                               "  z.close()\n")));
  // Bytes before the archive.
  EXPECT_FALSE(Streamed(t_ / "upload.zip", "#!/bin/sh\n" + ReadFile(capsule_)));
}

// Not the upload's fault: Inspect, reading the file again, says what is wrong.
TEST_F(StreamCheckTest, AFileItCannotReadIsLeftToInspect) {
  const std::string good = ReadFile(capsule_);
  const int fd = ::open((t_ / "upload.zip").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  StreamCheck check(fd, {});
  ASSERT_EQ(::write(fd, good.data(), good.size()), static_cast<ssize_t>(good.size()));
  check.Written(good.size());
  ::close(fd);
  EXPECT_FALSE(check.Finish());
}

TEST_F(StreamCheckTest, AnUploadThatStopsMidwayStopsTheCheck) {
  const std::string good = ReadFile(capsule_);
  const int fd = ::open((t_ / "upload.zip").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  {
    StreamCheck check(fd, {});
    ASSERT_EQ(::write(fd, good.data(), 1000), 1000);
    check.Written(1000);
  }  // no Finish: the destructor stops the thread waiting for more
  ::close(fd);
}

}  // namespace
}  // namespace starforge::capsule
