// The `forge` command as a user runs it: the real binary, real files, exit codes and streams.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "apiserver/crd_schema.h"
#include "support/files.h"
#include "support/forge.h"

namespace {

namespace fs = std::filesystem;
namespace support = starforge::support;
using ::testing::HasSubstr;
using ::testing::Not;

using Result = support::Captured;
using support::ReadFile;
using support::RunForge;

const std::string kExamples = std::string(STARFORGE_SOURCE_DIR) + "/examples";

TEST(ForgeCli, ValidatePrintsOk) {
  Result r = RunForge("validate " + kExamples + "/grpo-two-pool.yaml");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "ok\n");
}

TEST(ForgeCli, ValidatePrintsEveryErrorWithItsPathAndExitsOne) {
  const fs::path job = fs::temp_directory_path() / "forge-bad-job.yaml";
  std::ofstream(job) << "name: Bad_Name\nimage: x\nentrypoint: [python]\npools:\n"
                        "  - {name: a, gpusPerMachine: -1}\n  - {name: a, machnes: 2}\n";
  Result r = RunForge("validate " + job.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr(job.string() + ": name: "));
  EXPECT_THAT(r.err, HasSubstr("pools[0].gpusPerMachine: must be ≥ 0, got -1"));
  EXPECT_THAT(r.err, HasSubstr("pools[1].machnes: unknown field (did you mean \"machines\"?)"));
  EXPECT_THAT(r.err, HasSubstr("pools[1].name: duplicate"));
  fs::remove(job);
}

TEST(ForgeCli, ValidateCanonicalIsStable) {
  Result a = RunForge("validate --canonical " + kExamples + "/grpo-two-pool.yaml");
  Result b = RunForge("validate --canonical " + kExamples + "/grpo-two-pool.yaml");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_THAT(a.out, HasSubstr("\"entrypoint\":[\"python\",\"train.py\""));
}

TEST(ForgeCli, MissingFileIsAClearError) {
  Result r = RunForge("validate /nonexistent/job.yaml");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot read /nonexistent/job.yaml: No such file or directory"));
}

TEST(ForgeCli, BadConfigurationStopsWithExitTwoAndNamesTheSetting) {
  Result r = RunForge("validate " + kExamples + "/hello-cpu.yaml",
                      "FORGE_KUBERAY_TTL_SECONDS=ten FORGE_K8S_TOKEN=supersecret");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err,
              HasSubstr("FORGE_KUBERAY_TTL_SECONDS: expected a non-negative integer, got \"ten\""));
  EXPECT_THAT(r.err, Not(HasSubstr("supersecret")));
}

TEST(ForgeCli, ConfigMasksSecrets) {
  Result r =
      RunForge("config -o json", "FORGE_K8S_API_SERVER=https://k:6443 FORGE_K8S_TOKEN=supersecret");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("***"));
  EXPECT_THAT(r.out, Not(HasSubstr("supersecret")));
}

TEST(ForgeCli, RenderTwoPoolExample) {
  const std::string sha(64, 'c');
  Result r = RunForge("render " + kExamples +
                      "/grpo-two-pool.yaml --job-id j-1 --capsule-url "
                      "https://s3.example.com/b/" +
                      sha + ".zip --capsule-sha256 " + sha + " -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json rayjob = nlohmann::json::parse(r.out);
  EXPECT_EQ(rayjob["kind"], "RayJob");
  // The acceptance check: the example's RayJob is valid for the oldest and newest operator.
  for (const char* version : {"v1.4.0", "v1.7.0"}) {
    auto validator = kubesim::CrdValidator::FromFile(
        std::string(STARFORGE_CRD_DIR) + "/" + version + "/ray.io_rayjobs.yaml", "v1");
    EXPECT_EQ(starforge::JoinErrors(validator->Validate(rayjob)), "") << version;
  }
}

TEST(ForgeCli, UsageErrorsExitTwo) {
  Result r = RunForge("render " + kExamples + "/hello-cpu.yaml");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--job-id is required"));
  EXPECT_EQ(RunForge("frobnicate").code, 2);
  EXPECT_EQ(RunForge("--help").code, 0);
}

}  // namespace
