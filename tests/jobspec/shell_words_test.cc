#include <gtest/gtest.h>

#include "starforge/jobspec/parse.h"

namespace starforge::jobspec {
namespace {

using Words = std::vector<std::string>;

Words Split(std::string_view line) {
  const StatusOr<Words> words = SplitShellWords(line);
  EXPECT_TRUE(words.ok()) << line << ": " << words.status().message();
  return words.ok() ? *words : Words{"<error>"};
}

std::string ErrorOf(std::string_view line) {
  const StatusOr<Words> words = SplitShellWords(line);
  EXPECT_FALSE(words.ok()) << line;
  EXPECT_EQ(words.status().code(), Code::kInvalidArgument) << line;
  return words.status().message();
}

TEST(ShellWordsTest, Whitespace) {
  EXPECT_EQ(Split(""), Words{});
  EXPECT_EQ(Split(" \t\n "), Words{});
  EXPECT_EQ(Split("python train.py --lr 1e-4"), (Words{"python", "train.py", "--lr", "1e-4"}));
  EXPECT_EQ(Split("  a\t\tb\nc  "), (Words{"a", "b", "c"}));
}

TEST(ShellWordsTest, SingleQuotesAreLiteral) {
  EXPECT_EQ(Split("echo 'a b'"), (Words{"echo", "a b"}));
  EXPECT_EQ(Split(R"('a\b "c" $x')"), Words{R"(a\b "c" $x)"});
  EXPECT_EQ(Split("''"), Words{""});
  EXPECT_EQ(Split("a'b'c"), Words{"abc"});
  EXPECT_EQ(Split("'multi\nline'"), Words{"multi\nline"});
}

TEST(ShellWordsTest, DoubleQuotesEscapeOnlyFourCharacters) {
  EXPECT_EQ(Split(R"("a b")"), Words{"a b"});
  EXPECT_EQ(Split(R"("\"q\" \\ \$ \`")"), Words{R"("q" \ $ `)"});
  EXPECT_EQ(Split(R"("\n\t\a")"), Words{R"(\n\t\a)"});
  EXPECT_EQ(Split(R"("")"), Words{""});
  EXPECT_EQ(Split("\"it's\""), Words{"it's"});
  EXPECT_EQ(Split("\"a\\\nb\""), Words{"ab"});  // backslash-newline vanishes in double quotes
  EXPECT_EQ(Split(R"(x="a b"c)"), Words{"x=a bc"});
}

TEST(ShellWordsTest, BackslashOutsideQuotes) {
  EXPECT_EQ(Split(R"(a\ b)"), Words{"a b"});
  EXPECT_EQ(Split(R"(\'x\")"), Words{"'x\""});
  EXPECT_EQ(Split(R"(\\)"), Words{"\\"});
  EXPECT_EQ(Split("a \\\n b"), (Words{"a", "b"}));  // line continuation
  EXPECT_EQ(Split("a\\\nb"), Words{"ab"});
}

TEST(ShellWordsTest, NoExpansionAndNoOperators) {
  EXPECT_EQ(Split("echo $(whoami); rm -rf / | tee x && y > z"),
            (Words{"echo", "$(whoami);", "rm", "-rf", "/", "|", "tee", "x", "&&", "y", ">", "z"}));
  EXPECT_EQ(Split("$HOME ~ *.py `date` # not a comment"),
            (Words{"$HOME", "~", "*.py", "`date`", "#", "not", "a", "comment"}));
}

TEST(ShellWordsTest, Unicode) {
  EXPECT_EQ(Split("echo 'héllo wörld' 日本"), (Words{"echo", "héllo wörld", "日本"}));
}

TEST(ShellWordsTest, Errors) {
  EXPECT_EQ(ErrorOf("python 'x"), "unterminated single quote");
  EXPECT_EQ(ErrorOf("python \"x"), "unterminated double quote");
  EXPECT_EQ(ErrorOf("python \"x\\\""), "unterminated double quote");
  EXPECT_EQ(ErrorOf("python x\\"), "trailing backslash (nothing left to escape)");
  EXPECT_EQ(ErrorOf("'"), "unterminated single quote");
}

}  // namespace
}  // namespace starforge::jobspec
