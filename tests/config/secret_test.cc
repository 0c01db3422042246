// A secret's value must not reach any output: errors, warnings, the dump, streams or fmt.
#include "starforge/common/secret.h"

#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "starforge/config/config.h"

namespace starforge::config {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Every piece of text Load and Dump produce for this environment.
std::string AllOutput(const std::map<std::string, std::string>& env) {
  const LoadResult result = Load(env);
  std::string out = JoinErrors(result.errors);
  for (const std::string& w : result.warnings)
    out += "\n" + w;
  out += "\n" + Dump(result.config).dump();
  return out;
}

TEST(Secret, StreamsFmtAndJsonShowTheMask) {
  const Secret secret("s3cr3t-VALUE");
  std::ostringstream stream;
  stream << secret;
  EXPECT_EQ(stream.str(), "***");
  EXPECT_EQ(fmt::format("{}", secret), "***");
  EXPECT_EQ(fmt::format("[{:>5}]", secret), "[  ***]");
  EXPECT_EQ(nlohmann::json(secret), "***");
  EXPECT_EQ(nlohmann::json(Secret()), "");
  EXPECT_EQ(secret.Reveal(), "s3cr3t-VALUE");
  EXPECT_FALSE(secret.empty());
  EXPECT_TRUE(Secret().empty());
}

TEST(Secret, ConfigSecretsAreMaskedInTheDumpAndWhenPrinted) {
  const LoadResult result = Load({{"FORGE_K8S_API_SERVER", "https://k8s:6443"},
                                  {"FORGE_K8S_TOKEN", "TOKEN-ca5e1d0e"},
                                  {"FORGE_S3_ENDPOINT", "https://s3:9000"},
                                  {"FORGE_S3_BUCKET", "starforge"},
                                  {"FORGE_S3_ACCESS_KEY", "ACCESS-ca5e1d0e"},
                                  {"FORGE_S3_SECRET_KEY", "SECRET-ca5e1d0e"}});
  ASSERT_TRUE(result.ok()) << JoinErrors(result.errors);
  const nlohmann::json dump = Dump(result.config);
  EXPECT_EQ(dump["FORGE_K8S_TOKEN"], "***");
  EXPECT_EQ(dump["FORGE_S3_ACCESS_KEY"], "***");
  EXPECT_EQ(dump["FORGE_S3_SECRET_KEY"], "***");
  EXPECT_THAT(dump.dump(), Not(HasSubstr("ca5e1d0e")));

  std::ostringstream stream;
  stream << result.config.k8s_token << result.config.s3_access_key << result.config.s3_secret_key;
  EXPECT_EQ(stream.str(), "*********");
  EXPECT_EQ(fmt::format("{} {} {}", result.config.k8s_token, result.config.s3_access_key,
                        result.config.s3_secret_key),
            "*** *** ***");
}

TEST(Secret, NoErrorWarningOrDumpEverContainsASecret) {
  const std::string kMark = "ca5e1d0e";
  const std::vector<std::map<std::string, std::string>> environments = {
      // Invalid-looking secrets: whitespace, a trailing newline, control characters.
      {{"FORGE_K8S_TOKEN", "tok " + kMark},
       {"FORGE_S3_ACCESS_KEY", "ak-" + kMark + "\n"},
       {"FORGE_S3_SECRET_KEY", "sk\t" + kMark + "\x01"}},
      // Valid secrets with cross-setting errors (token without server, endpoint without bucket).
      {{"FORGE_K8S_TOKEN", "tok-" + kMark},
       {"FORGE_S3_ENDPOINT", "https://s3:9000"},
       {"FORGE_S3_ACCESS_KEY", "ak-" + kMark},
       {"FORGE_S3_SECRET_KEY", "sk-" + kMark}},
      // Secrets without the endpoint they belong to (warning), token over plain http (warning).
      {{"FORGE_K8S_TOKEN", "tok-" + kMark},
       {"FORGE_K8S_API_SERVER", "http://127.0.0.1:8001"},
       {"FORGE_S3_ACCESS_KEY", "ak-" + kMark},
       {"FORGE_S3_SECRET_KEY", "sk-" + kMark}},
      // A secret under a misspelt name, and credentials inside URLs.
      {{"FORGE_S3_SECRET_KY", "sk-" + kMark},
       {"FORGE_K8S_TOKN", "tok-" + kMark},
       {"FORGE_S3_ENDPOINT", "https://ak:" + kMark + "@s3:9000"},
       {"FORGE_K8S_API_SERVER", "user:" + kMark + "@k8s:6443"}},
      // A secret pasted into the wrong, non-secret variable as well.
      {{"FORGE_K8S_API_SERVER", "https://k8s:6443"},
       {"FORGE_K8S_TOKEN", "Tok_" + kMark},
       {"FORGE_K8S_NAMESPACE", "Tok_" + kMark},
       {"FORGE_S3_BUCKET", "Tok_" + kMark}},
  };
  for (const auto& env : environments) {
    const std::string out = AllOutput(env);
    EXPECT_THAT(out, Not(HasSubstr(kMark))) << out;
  }
}

TEST(Secret, InvalidSecretsAreReportedWithoutTheirValue) {
  const LoadResult result =
      Load({{"FORGE_K8S_API_SERVER", "https://k8s:6443"}, {"FORGE_K8S_TOKEN", "abc def\n"}});
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].ToString(),
            "FORGE_K8S_TOKEN: must not contain whitespace or control characters (a trailing "
            "newline copied from a file?); the value is not shown because it is a secret");
}

TEST(Secret, MisspeltSecretNamesWarnWithoutTheValue) {
  const LoadResult result = Load({{"FORGE_S3_SECRET_KY", "sk-ca5e1d0e"}});
  ASSERT_EQ(result.warnings.size(), 1u);
  EXPECT_EQ(
      result.warnings[0],
      "FORGE_S3_SECRET_KY is not a StarForge setting (did you mean \"FORGE_S3_SECRET_KEY\"?)");
}

}  // namespace
}  // namespace starforge::config
