// What goes into a capsule: ignore rules on a real tree, and hostile or surprising trees.
#include "starforge/capsule/collect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule_test_support.h"

namespace starforge::capsule {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::TempDir;
using testing::Write;
namespace fs = std::filesystem;

std::vector<std::string> Paths(const CollectResult& r) {
  std::vector<std::string> out;
  for (const auto& f : r.files)
    out.push_back(f.path);
  return out;
}

std::string AllErrors(const CollectResult& r) {
  std::string s;
  for (const auto& e : r.errors)
    s += e + "\n";
  return s;
}

std::string AllWarnings(const CollectResult& r) {
  std::string s;
  for (const auto& e : r.warnings)
    s += e + "\n";
  return s;
}

TEST(Collect, DefaultIgnoresAndForgeignore) {
  TempDir t;
  Write(t / "train.py", "print(1)\n");
  Write(t / ".git/HEAD", "ref\n");
  Write(t / "pkg/__pycache__/m.cpython-311.pyc", "x");
  Write(t / "pkg/m.py", "x");
  Write(t / "pkg/old.pyc", "x");
  Write(t / ".venv/bin/python", "x");
  Write(t / ".forge/state", "x");
  Write(t / "data/big.bin", "x");
  Write(t / "data/keep.txt", "x");
  Write(t / "logs/run1/out.log", "x");
  Write(t / "notes.log", "x");
  Write(t / "important.log", "x");
  Write(t / "ckpt/step1/w.pt", "x");
  Write(t / "ckpt/README", "x");
  Write(t / ".forgeignore",
        "# data files stay out\n/data/*.bin\n*.log\n!important.log\nlogs/\nckpt/**/*.pt\n");
  CollectResult r = Collect(t.path());
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_THAT(r.warnings, IsEmpty());
  EXPECT_THAT(Paths(r), ElementsAre(".forgeignore", "ckpt/README", "data/keep.txt", "important.log",
                                    "pkg/m.py", "train.py"));
}

TEST(Collect, NegationCannotReincludeUnderAnIgnoredDirectory) {
  TempDir t;
  Write(t / "a.py", "x");
  Write(t / "build/keep.txt", "x");
  Write(t / ".forgeignore", "build/\n!build/keep.txt\n");
  CollectResult r = Collect(t.path());
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_THAT(Paths(r), ElementsAre(".forgeignore", "a.py"));
}

TEST(Collect, SortedByBytesWithSizesAndExecutableBits) {
  TempDir t;
  Write(t / "a-b", "12345");
  Write(t / "a/b", "1");
  Write(t / "B", "1");
  Write(t / "run.sh", "#!/bin/sh\n", fs::perms(0755));
  Write(t / "ro.txt", "r", fs::perms(0444));
  CollectResult r = Collect(t.path());
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_THAT(Paths(r), ElementsAre("B", "a-b", "a/b", "ro.txt", "run.sh"));
  EXPECT_EQ(r.files[1].size, 5u);
  EXPECT_TRUE(r.files[4].executable);
  EXPECT_FALSE(r.files[3].executable);
  EXPECT_EQ(r.TotalBytes(), 5u + 1 + 1 + 10 + 1);
}

TEST(Collect, InTreeSymlinksAreStoredAsWhatTheyPointTo) {
  TempDir t;
  Write(t / "real/config.yaml", "lr: 1\n");
  Write(t / "real/sub/x.py", "x");
  fs::create_symlink("real/config.yaml", t / "config.yaml");
  fs::create_directory_symlink("real", t / "alias");
  CollectResult r = Collect(t.path());
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_THAT(Paths(r), ElementsAre("alias/config.yaml", "alias/sub/x.py", "config.yaml",
                                    "real/config.yaml", "real/sub/x.py"));
  EXPECT_EQ(r.files[2].source, fs::canonical(t / "real/config.yaml"));
  EXPECT_EQ(r.files[2].size, 6u);
}

TEST(Collect, IgnoreRulesApplyToTheLinkPath) {
  TempDir t;
  Write(t / "a.py", "x");
  fs::create_symlink("/etc/passwd", t / "outside-but-ignored");
  Write(t / ".forgeignore", "outside-but-ignored\n");
  CollectResult r = Collect(t.path());
  EXPECT_TRUE(r.ok()) << AllErrors(r);
}

TEST(Collect, SymlinkLeavingTheTreeIsAnErrorNamingLinkAndTarget) {
  TempDir outside;
  Write(outside / "secret.txt", "s");
  TempDir t;
  Write(t / "a.py", "x");
  fs::create_symlink(outside / "secret.txt", t / "creds");
  fs::create_directory(t / "sub");
  fs::create_symlink("../../", t / "sub/up");
  CollectResult r = Collect(t.path());
  ASSERT_EQ(r.errors.size(), 2u) << AllErrors(r);
  EXPECT_THAT(r.errors[0], HasSubstr("creds is a symlink to " + (outside / "secret.txt").string() +
                                     ", which is outside the code directory"));
  EXPECT_THAT(r.errors[0], HasSubstr(".forgeignore"));
  EXPECT_THAT(r.errors[1], HasSubstr("sub/up is a symlink to ../../, which is outside"));
}

TEST(Collect, SymlinkCycleIsAnError) {
  TempDir t;
  Write(t / "a/x.py", "x");
  fs::create_directory_symlink("..", t / "a/loop");
  CollectResult r = Collect(t.path());
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_THAT(r.errors[0], HasSubstr("a/loop is a symlink to .., a directory that contains it"));
  TempDir self;
  Write(self / "x.py", "x");
  fs::create_directory_symlink(".", self / "me");
  EXPECT_THAT(AllErrors(Collect(self.path())), HasSubstr("me is a symlink to ."));
}

TEST(Collect, SymlinkLoopBetweenLinksIsAnError) {
  TempDir t;
  Write(t / "x.py", "x");
  fs::create_symlink("b", t / "a");
  fs::create_symlink("a", t / "b");
  CollectResult r = Collect(t.path());
  ASSERT_EQ(r.errors.size(), 2u) << AllErrors(r);
  EXPECT_THAT(r.errors[0], HasSubstr("a: symlink loop"));
}

TEST(Collect, DanglingSymlinkIsSkippedWithAWarning) {
  TempDir t;
  Write(t / "x.py", "x");
  fs::create_symlink("user@host.1234", t / ".#x.py");  // an editor's lock file
  CollectResult r = Collect(t.path());
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_THAT(Paths(r), ElementsAre("x.py"));
  EXPECT_THAT(AllWarnings(r), HasSubstr("skipping .#x.py: dangling symlink to user@host.1234"));
}

TEST(Collect, SpecialFilesAreSkippedWithAWarning) {
  TempDir t;
  Write(t / "x.py", "x");
  ASSERT_EQ(::mkfifo((t / "fifo").c_str(), 0644), 0);
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = (t / "sock").string();
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::copy(sock.begin(), sock.end(), addr.sun_path);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  fs::create_symlink("fifo", t / "link-to-fifo");
  CollectResult r = Collect(t.path());
  ::close(s);
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_THAT(Paths(r), ElementsAre("x.py"));
  EXPECT_THAT(r.warnings, ElementsAre("skipping fifo: a FIFO", "skipping link-to-fifo: a FIFO",
                                      "skipping sock: a socket"));
}

TEST(Collect, NamesThatAreNotValidUtf8AreErrors) {
  TempDir t;
  Write(t / "ok.py", "x");
  Write(t / std::string("caf\xe9.py"), "x");  // Latin-1, not UTF-8
  Write(t / std::string("d\xff/x.py"), "x");
  Write(t / "new\nline", "x");
  Write(t / "back\\slash", "x");
  Write(t / std::string("\xc3\xa9t\xc3\xa9.py"), "x");  // UTF-8 is fine
  CollectResult r = Collect(t.path());
  ASSERT_EQ(r.errors.size(), 4u) << AllErrors(r);
  EXPECT_THAT(r.errors[0], HasSubstr("back\\x5cslash: the name contains a backslash"));
  EXPECT_THAT(r.errors[1], HasSubstr("caf\\xe9.py: the name is not valid UTF-8"));
  EXPECT_THAT(r.errors[2], HasSubstr("d\\xff: the name is not valid UTF-8"));
  EXPECT_THAT(r.errors[3], HasSubstr("new\\x0aline: the name contains a control character"));
  // Ignored names are not an error.
  Write(t / ".forgeignore", "caf*\nd?\nnew*\nback*\n");
  EXPECT_TRUE(Collect(t.path()).ok()) << AllErrors(Collect(t.path()));
}

TEST(Collect, ReservedStarforgeDirectoryIsSkippedWithAWarning) {
  TempDir t;
  Write(t / "x.py", "x");
  Write(t / ".starforge/manifest.json", "{}");
  Write(t / "sub/.starforge/ok", "x");  // only the top level is reserved
  CollectResult r = Collect(t.path());
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_THAT(Paths(r), ElementsAre("sub/.starforge/ok", "x.py"));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("skipping ./.starforge: the name is reserved"));
  Write(t / ".forgeignore", "/.starforge/\n");
  EXPECT_THAT(Collect(t.path()).warnings, IsEmpty());
}

TEST(Collect, MissingOrNonDirectoryRoot) {
  TempDir t;
  EXPECT_THAT(AllErrors(Collect(t / "nope")), HasSubstr("No such file or directory"));
  Write(t / "f", "x");
  EXPECT_THAT(AllErrors(Collect(t / "f")), HasSubstr("not a directory"));
}

// Runs Collect as an unprivileged user when the tests run as root (root reads everything).
CollectResult CollectAsUser(const fs::path& dir) {
  if (::geteuid() != 0) return Collect(dir);
  int fds[2];
  if (::pipe(fds) != 0) std::abort();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    CollectResult r = Collect(dir);
    std::string text;
    for (const auto& e : r.errors)
      text += "E" + e + '\0';
    for (const auto& f : r.files)
      text += "F" + f.path + '\0';
    if (::write(fds[1], text.data(), text.size()) != static_cast<ssize_t>(text.size())) ::_exit(4);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0)
    text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CollectResult r;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\0', start);
    const std::string item = text.substr(start + 1, end - start - 1);
    if (text[start] == 'E')
      r.errors.push_back(item);
    else
      r.files.push_back(InputFile{item, {}, 0, false});
    start = end + 1;
  }
  return r;
}

TEST(Collect, UnreadableFilesAndDirectoriesAreErrorsNamingThem) {
  TempDir t;
  fs::permissions(t.path(), fs::perms(0755));
  Write(t / "ok.py", "x");
  Write(t / "secret.py", "x", fs::perms(0200));
  Write(t / "locked/inside.py", "x");
  fs::permissions(t / "locked", fs::perms(0300));
  CollectResult r = CollectAsUser(t.path());
  ASSERT_EQ(r.errors.size(), 2u) << AllErrors(r);
  EXPECT_THAT(r.errors[0], HasSubstr("locked: cannot read directory: Permission denied"));
  EXPECT_THAT(r.errors[1], HasSubstr("secret.py: cannot read: Permission denied"));
}

}  // namespace
}  // namespace starforge::capsule
