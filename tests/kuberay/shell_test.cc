// ShellQuote: whatever the word, bash and POSIX sh read it back byte for byte.
#include "starforge/kuberay/shell.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <memory>

namespace starforge::kuberay {
namespace {

// Runs `<shell> -c "printf %s <quoted>"` and returns what it printed.
std::string RoundTrip(const char* shell, const std::string& word) {
  const std::string script = "printf %s " + ShellQuote(word);
  const std::string cmd = std::string(shell) + " -c " + ShellQuote(script);
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  char buf[256];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe.get())) > 0;)
    out.append(buf, n);
  return out;
}

TEST(ShellQuote, AlwaysSingleQuotes) {
  EXPECT_EQ(ShellQuote("train.py"), "'train.py'");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("it's"), "'it'\"'\"'s'");
  EXPECT_EQ(ShellJoin({"python", "a b", ""}), "'python' 'a b' ''");
}

TEST(ShellQuote, EveryByteSurvivesBashAndSh) {
  const std::vector<std::string> words = {"plain",
                                          "a b",
                                          "$(touch /tmp/starforge-pwned)",
                                          "`id`",
                                          "a;b",
                                          "'",
                                          "''",
                                          "\"",
                                          "\\",
                                          "\\n",
                                          "multi\nline\n",
                                          "tab\t",
                                          "*",
                                          "?",
                                          "[a]",
                                          "~",
                                          "!x",
                                          "#c",
                                          "${HOME}",
                                          "%s",
                                          "ünïcödé ✓",
                                          std::string("\x01\x7f", 2)};
  for (const char* shell : {"/bin/bash", "/bin/sh"}) {
    for (const auto& w : words)
      EXPECT_EQ(RoundTrip(shell, w), w) << shell << " " << w;
  }
}

}  // namespace
}  // namespace starforge::kuberay
