// .forgeignore: git's wildmatch and gitignore rule semantics.
#include "starforge/capsule/ignore.h"

#include <gtest/gtest.h>

namespace starforge::capsule {
namespace {

struct WildCase {
  const char* pattern;
  const char* text;
  bool match;
};

// Mostly from git's t/t3070-wildmatch.sh (the pathname-mode column).
TEST(WildMatch, GitCases) {
  const WildCase cases[] = {
      {"foo", "foo", true},
      {"bar", "foo", false},
      {"", "", true},
      {"???", "foo", true},
      {"??", "foo", false},
      {"*", "foo", true},
      {"f*", "foo", true},
      {"*f", "foo", false},
      {"*foo*", "foo", true},
      {"*ob*a*r*", "foobar", true},
      {"*ab", "aaaaaaabababab", true},
      {"foo\\*", "foo*", true},
      {"foo\\*bar", "foobar", false},
      {"f\\\\oo", "f\\oo", true},
      {"*[al]?", "ball", true},
      {"[ten]", "ten", false},
      {"**[!te]", "ten", true},
      {"**[!ten]", "ten", false},
      {"t[a-g]n", "ten", true},
      {"t[!a-g]n", "ten", false},
      {"t[!a-g]n", "ton", true},
      {"t[^a-g]n", "ton", true},
      {"a[]]b", "a]b", true},
      {"a[]-]b", "a-b", true},
      {"a[]-]b", "a]b", true},
      {"a[]-]b", "aab", false},
      {"a[]a-]b", "aab", true},
      {"]", "]", true},
      // '/' is never matched by *, ? or a class.
      {"foo*bar", "foo/baz/bar", false},
      {"foo**bar", "foo/baz/bar", false},
      {"foo?bar", "foo/bar", false},
      {"foo[/]bar", "foo/bar", false},
      {"foo[^a-z]bar", "foo/bar", false},
      {"f[^eiu][^eiu][^eiu][^eiu][^eiu]r", "foo/bar", false},
      {"f[^eiu][^eiu][^eiu][^eiu][^eiu]r", "foo-bar", true},
      // ** as a whole component spans directories, including none.
      {"**/foo", "foo", true},
      {"**/foo", "XXX/foo", true},
      {"**/foo", "bar/baz/foo", true},
      {"*/foo", "bar/baz/foo", false},
      {"**/bar*", "foo/bar/baz", false},
      {"**/bar/*", "deep/foo/bar/baz", true},
      {"**/bar/*", "deep/foo/bar/baz/", false},
      {"**/bar/**", "deep/foo/bar/baz/", true},
      {"**/bar/*", "deep/foo/bar", false},
      {"**/bar/**", "deep/foo/bar/", true},
      {"**/bar**", "foo/bar/baz", false},
      {"*/bar/**", "deep/foo/bar/baz/x", false},
      {"**/bar/*/*", "deep/foo/bar/baz/x", true},
      {"**/**/**", "foo/bar", true},
      {"a/**/b", "a/b", true},
      {"a/**/b", "a/x/y/b", true},
      {"a/**", "a", false},
      {"a/**", "a/x/y", true},
      {"XXX/*/*/*/*/*/*/12/*/*/*/m/*/*/*",
       "XXX/adobe/courier/bold/o/normal//12/120/75/75/m/70/iso8859/1", true},
      {"XXX/*/*/*/*/*/*/12/*/*/*/m/*/*/*",
       "XXX/adobe/courier/bold/o/normal//12/120/75/75/X/70/iso8859/1", false},
      {"**/*a*b*g*n*t", "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txt", true},
      {"**/*a*b*g*n*t", "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txtz", false},
      {"*/*/*", "foo/bb/aa/rr", false},
      {"**/*/*", "foo/bb/aa/rr", true},
      {"*X*i", "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txtz", false},
      // POSIX classes.
      {"[[:alpha:]][[:digit:]][[:upper:]]", "a1B", true},
      {"[[:digit:][:upper:][:space:]]", "a", false},
      {"[[:digit:][:upper:][:space:]]", "A", true},
      {"[[:digit:][:upper:][:space:]]", " ", true},
      {"[[:xdigit:]]", "f", true},
      {"[a-c[:digit:]x-z]", "5", true},
      {"[a-c[:digit:]x-z]", "y", true},
      {"[a-c[:digit:]x-z]", "q", false},
      {"[[:bogus:]]", "b", false},
      // Unterminated classes and trailing backslashes never match.
      {"[ab", "a", false},
      {"[!", "a", false},
      {"a\\", "a\\", false},
      {"*.pyc", "x.pyc", true},
      {"*.pyc", ".pyc", true},
      {"\\[ab]", "[ab]", true},
      {"[\\]]", "]", true},
      {"[\\-_]", "-", true},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(WildMatch(c.pattern, c.text), c.match)
        << "pattern '" << c.pattern << "' text '" << c.text << "'";
  }
}

TEST(WildMatch, PathologicalPatternsFinishQuickly) {
  // Backtracking without git's abort codes would take exponential time here.
  const std::string text(60, 'a');
  EXPECT_FALSE(WildMatch("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", text));
  EXPECT_FALSE(WildMatch("**/*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", "x/y/z/" + text));
}

IgnoreRules Rules(const char* text) {
  IgnoreRules r;
  r.AddText(text, ".forgeignore");
  return r;
}

TEST(IgnoreRules, PatternWithoutSlashMatchesAtAnyDepth) {
  IgnoreRules r = Rules("*.log\nbuild\n");
  EXPECT_TRUE(r.IsIgnored("a.log", false));
  EXPECT_TRUE(r.IsIgnored("x/y/a.log", false));
  EXPECT_TRUE(r.IsIgnored("build", true));
  EXPECT_TRUE(r.IsIgnored("src/build", false));
  EXPECT_FALSE(r.IsIgnored("a.log.txt", false));
  EXPECT_FALSE(r.IsIgnored("builds", true));
}

TEST(IgnoreRules, LeadingOrMiddleSlashAnchorsToTheRoot) {
  IgnoreRules r = Rules("/data\ndocs/*.md\n");
  EXPECT_TRUE(r.IsIgnored("data", true));
  EXPECT_FALSE(r.IsIgnored("src/data", true));
  EXPECT_TRUE(r.IsIgnored("docs/a.md", false));
  EXPECT_FALSE(r.IsIgnored("docs/sub/a.md", false));  // * does not cross '/'
  EXPECT_FALSE(r.IsIgnored("x/docs/a.md", false));
}

TEST(IgnoreRules, TrailingSlashMatchesDirectoriesOnly) {
  IgnoreRules r = Rules("out/\n");
  EXPECT_TRUE(r.IsIgnored("out", true));
  EXPECT_TRUE(r.IsIgnored("a/out", true));
  EXPECT_FALSE(r.IsIgnored("out", false));
}

TEST(IgnoreRules, LastMatchWinsAndNegationReincludes) {
  IgnoreRules r = Rules("*.bin\n!keep.bin\n");
  EXPECT_TRUE(r.IsIgnored("w.bin", false));
  EXPECT_FALSE(r.IsIgnored("keep.bin", false));
  EXPECT_FALSE(r.IsIgnored("sub/keep.bin", false));
  IgnoreRules r2 = Rules("!keep.bin\n*.bin\n");
  EXPECT_TRUE(r2.IsIgnored("keep.bin", false));
}

TEST(IgnoreRules, DoubleStarForms) {
  IgnoreRules r = Rules("**/logs\nckpt/**\na/**/z\n");
  EXPECT_TRUE(r.IsIgnored("logs", true));
  EXPECT_TRUE(r.IsIgnored("x/y/logs", true));
  EXPECT_FALSE(r.IsIgnored("ckpt", true));  // the contents, not the directory itself
  EXPECT_TRUE(r.IsIgnored("ckpt/x", false));
  EXPECT_TRUE(r.IsIgnored("ckpt/x/y", false));
  EXPECT_TRUE(r.IsIgnored("a/z", false));
  EXPECT_TRUE(r.IsIgnored("a/b/c/z", false));
}

TEST(IgnoreRules, CommentsBlanksEscapesAndSpaces) {
  IgnoreRules r = Rules("# comment\n\n\\#hash\n\\!bang\ntrail   \nspace\\ \r\n  lead\n");
  EXPECT_FALSE(r.IsIgnored("# comment", false));
  EXPECT_TRUE(r.IsIgnored("#hash", false));
  EXPECT_TRUE(r.IsIgnored("!bang", false));
  EXPECT_TRUE(r.IsIgnored("trail", false));  // unescaped trailing spaces dropped
  EXPECT_FALSE(r.IsIgnored("trail   ", false));
  EXPECT_TRUE(r.IsIgnored("space ", false));  // "\ " keeps one space (and CRLF is fine)
  EXPECT_FALSE(r.IsIgnored("space", false));
  EXPECT_TRUE(r.IsIgnored("  lead", false));  // leading spaces are part of the pattern
  EXPECT_FALSE(r.IsIgnored("lead", false));
}

TEST(IgnoreRules, CharacterClassesAndQuestionMark) {
  IgnoreRules r = Rules("run-[0-9][0-9]\nv?.txt\n");
  EXPECT_TRUE(r.IsIgnored("run-07", true));
  EXPECT_FALSE(r.IsIgnored("run-7a", true));
  EXPECT_TRUE(r.IsIgnored("v1.txt", false));
  EXPECT_FALSE(r.IsIgnored("v10.txt", false));
}

TEST(IgnoreRules, WarnsAboutPatternsThatNeverMatch) {
  IgnoreRules r = Rules("ok\nbad\\\n");
  ASSERT_EQ(r.warnings().size(), 1u);
  EXPECT_EQ(r.warnings()[0],
            ".forgeignore:2: pattern 'bad\\' ends with a lone backslash and never matches");
}

TEST(IgnoreRules, Defaults) {
  IgnoreRules r = IgnoreRules::Defaults();
  EXPECT_TRUE(r.IsIgnored(".git", true));
  EXPECT_TRUE(r.IsIgnored(".git", false));  // worktrees and submodules have a .git file
  EXPECT_TRUE(r.IsIgnored("sub/__pycache__", true));
  EXPECT_TRUE(r.IsIgnored("pkg/mod.pyc", false));
  EXPECT_TRUE(r.IsIgnored(".venv", true));
  EXPECT_TRUE(r.IsIgnored(".forge", true));
  EXPECT_FALSE(r.IsIgnored("train.py", false));
  EXPECT_FALSE(r.IsIgnored(".gitignore", false));
  EXPECT_FALSE(r.IsIgnored(".venv", false));  // a file named .venv is not a virtualenv
  // The user's rules come after the defaults, so they can bring a default back.
  r.Add("!.forge/");
  EXPECT_FALSE(r.IsIgnored(".forge", true));
}

TEST(IgnoreRules, EmptyRulesIgnoreNothing) {
  IgnoreRules r;
  EXPECT_FALSE(r.IsIgnored("anything", false));
  r.AddText("", "x");
  r.AddText("!\n/\n", "x");
  EXPECT_FALSE(r.IsIgnored("anything", true));
}

}  // namespace
}  // namespace starforge::capsule
