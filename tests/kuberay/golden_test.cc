// Golden render tests: each directory under golden/ holds a JobSpec (job.yaml), the render
// arguments (args), the FORGE_* environment (env), and the exact expected output of
// `forge render` (expected.yaml) or its exact error output (expected.err).
// `STARFORGE_UPDATE_GOLDEN=1 ctest -R golden` rewrites the expectations; review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "apiserver/crd_schema.h"
#include "starforge/cli/forge.h"
#include "starforge/common/yaml_json.h"
#include "test_support.h"

namespace starforge {
namespace {

namespace fs = std::filesystem;
using testing::ReadEnvFile;
using testing::ReadFile;

const fs::path kGoldenDir = fs::path(STARFORGE_SOURCE_DIR) / "tests/kuberay/golden";

// Every case, or only those that render a RayJob (expected.yaml).
std::vector<std::string> Cases(bool rendered_only = false) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kGoldenDir)) {
    if (!entry.is_directory()) continue;
    if (rendered_only && !fs::exists(entry.path() / "expected.yaml")) continue;
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct Output {
  int code;
  std::string out;
  std::string err;
};

Output RenderCase(const fs::path& dir) {
  std::vector<std::string> args = {"render", (dir / "job.yaml").string()};
  std::istringstream words(ReadFile(dir / "args"));
  for (std::string w; words >> w;)
    args.push_back(w);
  std::map<std::string, std::string> env;
  if (fs::exists(dir / "env")) env = ReadEnvFile(dir / "env");
  std::istringstream in;
  std::ostringstream out;
  std::ostringstream err;
  const int code = cli::Run(args, env, in, out, err);
  std::string err_text = err.str();
  // Error lines start with the job file's absolute path; make them location-independent.
  for (size_t pos; (pos = err_text.find(dir.string() + "/")) != std::string::npos;) {
    err_text.erase(pos, dir.string().size() + 1);
  }
  return {code, out.str(), err_text};
}

class GoldenRender : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenRender, MatchesExpectation) {
  const fs::path dir = kGoldenDir / GetParam();
  const Output got = RenderCase(dir);
  const bool update = std::getenv("STARFORGE_UPDATE_GOLDEN") != nullptr;
  const bool refused = fs::exists(dir / "expected.err") ||
                       (update && got.code != 0 && !fs::exists(dir / "expected.yaml"));
  if (update) {
    testing::WriteFile(dir / (refused ? "expected.err" : "expected.yaml"),
                       refused ? got.err : got.out);
  }
  if (refused) {
    EXPECT_EQ(got.code, cli::kExitInvalid);
    EXPECT_EQ(got.out, "");
    EXPECT_EQ(got.err, ReadFile(dir / "expected.err"));
  } else {
    ASSERT_EQ(got.code, 0) << got.err;
    EXPECT_EQ(got.out, ReadFile(dir / "expected.yaml"));
    // Byte-identical on a second run: rendering is pure.
    EXPECT_EQ(RenderCase(dir).out, got.out);
  }
}

// Every rendered RayJob must be accepted by the oldest and the newest supported operator's CRD.
class GoldenRayJob : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenRayJob, ValidatesAgainstKubeRayCrds) {
  const fs::path dir = kGoldenDir / GetParam();
  const nlohmann::json rayjob = ParseYaml(ReadFile(dir / "expected.yaml")).value();
  for (const char* version : {"v1.4.0", "v1.7.0"}) {
    static std::map<std::string, std::unique_ptr<kubesim::CrdValidator>> validators;
    auto& v = validators[version];
    if (!v) {
      v = kubesim::CrdValidator::FromFile(
          std::string(STARFORGE_CRD_DIR) + "/" + version + "/ray.io_rayjobs.yaml", "v1");
    }
    EXPECT_EQ(JoinErrors(v->Validate(rayjob)), "") << "against KubeRay " << version;
  }
}

std::string CaseName(const ::testing::TestParamInfo<std::string>& param_info) {
  std::string name = param_info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Cases, GoldenRender, ::testing::ValuesIn(Cases()), CaseName);
INSTANTIATE_TEST_SUITE_P(Cases, GoldenRayJob, ::testing::ValuesIn(Cases(true)), CaseName);

}  // namespace
}  // namespace starforge
