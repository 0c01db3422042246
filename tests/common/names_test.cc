#include "starforge/common/names.h"

#include <gtest/gtest.h>

#include <string>

namespace starforge {
namespace {

const std::string kDnsLabelReason =
    "must be a lower-case DNS label (a-z, 0-9 and '-', starting and ending with a letter or "
    "digit)";

TEST(NamesTest, Dns1123Label) {
  for (const char* ok : {"a", "grpo-math", "0abc", "a-b-c", "x9"}) {
    EXPECT_EQ(CheckDns1123Label(ok), "") << ok;
  }
  for (const char* bad : {"-a", "a-", "A", "a_b", "a.b", "a b", "é"}) {
    EXPECT_EQ(CheckDns1123Label(bad), kDnsLabelReason) << bad;
  }
  EXPECT_EQ(CheckDns1123Label(""), "must not be empty");
  EXPECT_EQ(CheckDns1123Label(std::string(63, 'a')), "");
  EXPECT_EQ(CheckDns1123Label(std::string(64, 'a')), "must be at most 63 characters, got 64");
  EXPECT_EQ(CheckDns1123Label(std::string(16, 'a'), 15), "must be at most 15 characters, got 16");
}

TEST(NamesTest, Dns1035Label) {
  EXPECT_EQ(CheckDns1035Label("abc-1"), "");
  EXPECT_EQ(CheckDns1035Label("1abc"),
            "must be a lower-case DNS label starting with a letter (a-z, 0-9 and '-', ending "
            "with a letter or digit)");
  EXPECT_EQ(CheckDns1035Label("Abc"), kDnsLabelReason);
  EXPECT_EQ(CheckDns1035Label(std::string(10, 'a'), 9), "must be at most 9 characters, got 10");
}

TEST(NamesTest, Dns1123Subdomain) {
  for (const char* ok : {"a", "team-a", "a.b.c", "example.com", "0.0"}) {
    EXPECT_EQ(CheckDns1123Subdomain(ok), "") << ok;
  }
  for (const char* bad : {".a", "a.", "a..b", "A.b", "a_b", "-a.b", "a-.b"}) {
    EXPECT_NE(CheckDns1123Subdomain(bad), "") << bad;
  }
  EXPECT_EQ(CheckDns1123Subdomain(""), "must not be empty");
  EXPECT_EQ(CheckDns1123Subdomain(std::string(253, 'a')), "");
  EXPECT_EQ(CheckDns1123Subdomain(std::string(254, 'a')),
            "must be at most 253 characters, got 254");
}

TEST(NamesTest, LabelValue) {
  for (const char* ok : {"", "h200", "H200", "a.b_c-d", "9"}) {
    EXPECT_EQ(CheckLabelValue(ok), "") << ok;
  }
  for (const char* bad : {"-a", "a-", "_a", "a/b", "a b", ".a", "a:b"}) {
    EXPECT_EQ(CheckLabelValue(bad),
              "must be a valid label value (A-Z, a-z, 0-9, '-', '_' and '.', starting and "
              "ending with a letter or digit)")
        << bad;
  }
  EXPECT_EQ(CheckLabelValue(std::string(64, 'a')), "must be at most 63 characters, got 64");
}

TEST(NamesTest, LabelKey) {
  for (const char* ok : {"app", "starforge/job-id", "app.kubernetes.io/managed-by", "A_b.c"}) {
    EXPECT_EQ(CheckLabelKey(ok), "") << ok;
  }
  EXPECT_EQ(CheckLabelKey(""), "must not be empty");
  EXPECT_EQ(CheckLabelKey("a/b/c"),
            "must be a label key (an optional DNS subdomain prefix and '/', then a name): it "
            "has more than one '/'");
  EXPECT_EQ(CheckLabelKey("/x"),
            "must have a lower-case DNS subdomain (at most 253 characters) before '/'");
  EXPECT_EQ(CheckLabelKey("Example.com/x"),
            "must have a lower-case DNS subdomain (at most 253 characters) before '/'");
  EXPECT_EQ(CheckLabelKey("starforge/"), "must have a name after '/'");
  EXPECT_EQ(CheckLabelKey("starforge/-x"),
            "must have a name of A-Z, a-z, 0-9, '-', '_' and '.', starting and ending with a "
            "letter or digit");
  EXPECT_EQ(CheckLabelKey("p/" + std::string(64, 'a')),
            "must have a name of at most 63 characters (after any '/'), got 64");
}

TEST(NamesTest, EnvVarName) {
  for (const char* ok : {"A", "_", "WANDB_PROJECT", "lower_case", "A1"}) {
    EXPECT_EQ(CheckEnvVarName(ok), "") << ok;
  }
  for (const char* bad : {"1A", "A-B", "A.B", "A B", "A=B", "É"}) {
    EXPECT_EQ(CheckEnvVarName(bad),
              "must be a valid environment variable name (letters, digits and '_', not "
              "starting with a digit)")
        << bad;
  }
  EXPECT_EQ(CheckEnvVarName(""), "must not be empty");
}

}  // namespace
}  // namespace starforge
