#include "starforge/jobspec/parse.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "jobspec_test_support.h"

namespace starforge::jobspec {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using testing::ReadTestdata;

// A minimal valid spec as JSON; tests change one thing and look at the result.
json Base() {
  return {{"name", "job"},
          {"image", "img:1"},
          {"entrypoint", "python train.py"},
          {"pools", {{{"name", "main"}}}}};
}

std::vector<std::string> Errors(const ParseResult& result) {
  std::vector<std::string> out;
  for (const auto& e : result.errors)
    out.push_back(e.ToString());
  return out;
}

std::vector<std::string> ErrorsOf(const json& doc, const Defaults& defaults = {}) {
  return Errors(FromJson(doc, defaults));
}

std::vector<std::string> ErrorsOfYaml(std::string_view yaml, const Defaults& defaults = {}) {
  return Errors(Parse(yaml, defaults));
}

JobSpec Valid(const json& doc, const Defaults& defaults = {}) {
  const ParseResult r = FromJson(doc, defaults);
  EXPECT_TRUE(r.ok()) << JoinErrors(r.errors);
  EXPECT_EQ(r.spec.has_value(), r.ok());
  return r.spec.value_or(JobSpec{});
}

json With(const json& patch) {
  json doc = Base();
  doc.merge_patch(patch);
  return doc;
}

json WithPool(const json& pool_fields) {
  json pool = {{"name", "main"}};
  pool.update(pool_fields);
  json doc = Base();
  doc["pools"] = json::array({pool});
  return doc;
}

TEST(ParseTest, MinimalSpecGetsEveryDefault) {
  Defaults defaults;
  defaults.fleet = "kuberay";
  defaults.pre_running_seconds = 900;
  const JobSpec s = Valid(Base(), defaults);
  EXPECT_EQ(s.name, "job");
  EXPECT_EQ(s.fleet, "kuberay");
  EXPECT_EQ(s.recipe, "none");
  EXPECT_EQ(s.image, "img:1");
  EXPECT_EQ(s.entrypoint, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_TRUE(s.env.empty());
  EXPECT_FALSE(s.code.has_value());
  ASSERT_EQ(s.pools.size(), 1u);
  EXPECT_EQ(s.pools[0], (Pool{"main", "", 1, 0, std::nullopt, std::nullopt}));
  EXPECT_EQ(s.pre_running_seconds, 900);
  EXPECT_EQ(s.running_seconds, 0);
  EXPECT_FALSE(s.corpus);
  EXPECT_FALSE(s.queue.has_value());
}

TEST(ParseTest, FullYamlFile) {
  const ParseResult r = Parse(ReadTestdata("full.yaml"), Defaults{});
  ASSERT_TRUE(r.ok()) << JoinErrors(r.errors);
  const JobSpec& s = *r.spec;
  EXPECT_EQ(s.fleet, "kuberay");
  EXPECT_EQ(s.recipe, "nemo-rl");
  EXPECT_EQ(s.image, "registry.example.com/nemo-rl:25.04");
  EXPECT_EQ(s.entrypoint, (std::vector<std::string>{"python", "-m", "nemo_rl.grpo", "--config",
                                                    "configs/grpo math.yaml", "lr=1e-4"}));
  EXPECT_EQ(s.env,
            (std::map<std::string, std::string>{{"NUM_WORKERS", "4"}, {"WANDB_PROJECT", "demo"}}));
  EXPECT_EQ(s.code, "./");
  ASSERT_EQ(s.pools.size(), 2u);
  EXPECT_EQ(s.pools[0], (Pool{"train", "h200", 2, 8, "32", "256Gi"}));
  EXPECT_EQ(s.pools[1], (Pool{"rollout", "l40s", 1, 4, "1500m", std::nullopt}));
  EXPECT_EQ(s.PrimaryPool().name, "train");
  EXPECT_EQ(s.TotalMachines(), 3);
  EXPECT_EQ(s.TotalGpus(), 20);
  EXPECT_EQ(s.pre_running_seconds, 600);
  EXPECT_EQ(s.running_seconds, 86400);
  EXPECT_TRUE(s.corpus);
  EXPECT_EQ(s.queue, "team-a");
}

TEST(ParseTest, JsonTextIsAccepted) {
  const ParseResult r = Parse(Base().dump(), Defaults{});
  ASSERT_TRUE(r.ok()) << JoinErrors(r.errors);
  EXPECT_EQ(r.spec->name, "job");
}

TEST(ParseTest, AllErrorsAreCollectedWithPaths) {
  std::vector<std::string> expected;
  std::istringstream lines(ReadTestdata("many_errors.errors"));
  for (std::string line; std::getline(lines, line);)
    expected.push_back(line);
  const ParseResult r = Parse(ReadTestdata("many_errors.yaml"), Defaults{});
  EXPECT_FALSE(r.spec.has_value());
  EXPECT_EQ(Errors(r), expected);
}

TEST(ParseTest, SyntaxErrorIsOneErrorWithoutPath) {
  const ParseResult r = Parse("name: x\npools: [\n", Defaults{});
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].path, "");
  EXPECT_THAT(r.errors[0].message,
              ::testing::MatchesRegex("syntax error: line [0-9]+, column [0-9]+: .+"));
  EXPECT_THAT(ErrorsOfYaml("name: a\nname: b\n"),
              ElementsAre("syntax error: line 2, column 1: duplicate key \"name\""));
}

TEST(ParseTest, TopLevelMustBeAMapping) {
  const std::string reason =
      "a JobSpec must be a mapping of fields (name, image, entrypoint, pools, ...), got ";
  EXPECT_THAT(ErrorsOfYaml(""), ElementsAre(reason + "null"));
  EXPECT_THAT(ErrorsOfYaml("- a\n"), ElementsAre(reason + "a list"));
  EXPECT_THAT(ErrorsOfYaml("hello"), ElementsAre(reason + "string \"hello\""));
}

TEST(ParseTest, UnknownFieldsAtEveryLevel) {
  EXPECT_THAT(ErrorsOf(With({{"nmae", "x"}})),
              ElementsAre("nmae: unknown field (did you mean \"name\"?)"));
  EXPECT_THAT(ErrorsOf(With({{"replicas", 3}})),
              ElementsAre("replicas: unknown field (known fields: \"name\", \"fleet\", "
                          "\"recipe\", \"image\", \"entrypoint\", \"env\", \"code\", \"pools\", "
                          "\"deadlines\", \"corpus\", \"queue\")"));
  EXPECT_THAT(
      ErrorsOf(WithPool({{"gpuPerMachine", 8}})),
      ElementsAre("pools[0].gpuPerMachine: unknown field (did you mean \"gpusPerMachine\"?)"));
  EXPECT_THAT(ErrorsOf(With({{"deadlines", {{"preRunningSecond", 5}}}})),
              ElementsAre("deadlines.preRunningSecond: unknown field (did you mean "
                          "\"preRunningSeconds\"?)"));
  EXPECT_THAT(ErrorsOf(With({{"weird key", 1}})),
              ElementsAre(::testing::StartsWith("[\"weird key\"]: unknown field")));
}

TEST(ParseTest, NullMeansAbsent) {
  EXPECT_THAT(ErrorsOf(With({{"queue", nullptr}})), ElementsAre());
  // merge_patch deletes on null, so build the document directly.
  json doc = Base();
  doc["name"] = nullptr;
  EXPECT_THAT(ErrorsOf(doc), ElementsAre("name: required"));
}

TEST(ParseTest, Name) {
  json doc = Base();
  doc.erase("name");
  EXPECT_THAT(ErrorsOf(doc), ElementsAre("name: required"));
  EXPECT_THAT(ErrorsOf(With({{"name", std::string(52, 'a')}})),
              ElementsAre("name: must be at most 40 characters, got 52"));
  EXPECT_EQ(Valid(With({{"name", std::string(40, 'a')}})).name, std::string(40, 'a'));
  EXPECT_THAT(ErrorsOf(With({{"name", "My_Job"}})),
              ElementsAre("name: must be a lower-case DNS label (a-z, 0-9 and '-', starting and "
                          "ending with a letter or digit), got \"My_Job\""));
  EXPECT_THAT(ErrorsOf(With({{"name", ""}})), ElementsAre("name: must not be empty"));
  EXPECT_THAT(ErrorsOf(With({{"name", 5}})), ElementsAre("name: must be a string, got number 5"));
}

TEST(ParseTest, FleetAndRecipe) {
  EXPECT_EQ(Valid(With({{"fleet", "local"}})).fleet, "local");
  EXPECT_THAT(ErrorsOf(With({{"fleet", "slurm"}})),
              ElementsAre("fleet: must be one of \"local\", \"kuberay\", got \"slurm\""));
  EXPECT_THAT(ErrorsOf(With({{"fleet", "Kuberay"}})),
              ElementsAre("fleet: must be one of \"local\", \"kuberay\", got \"Kuberay\" (did you "
                          "mean \"kuberay\"?)"));
  EXPECT_THAT(ErrorsOf(With({{"recipe", "nemorl"}})),
              ElementsAre("recipe: must be one of \"none\", \"nemo-rl\", got \"nemorl\" (did you "
                          "mean \"nemo-rl\"?)"));
  EXPECT_THAT(ErrorsOf(With({{"recipe", "pytorch"}})),
              ElementsAre("recipe: must be one of \"none\", \"nemo-rl\", got \"pytorch\""));
  EXPECT_THAT(ErrorsOf(With({{"recipe", true}})),
              ElementsAre("recipe: must be a string, got boolean true"));
}

TEST(ParseTest, ImageResolution) {
  json doc = With({{"recipe", "nemo-rl"}});
  doc.erase("image");
  Defaults defaults;
  EXPECT_THAT(ErrorsOf(doc, defaults),
              ElementsAre("image: required (no image given and recipe \"nemo-rl\" has none "
                          "because FORGE_IMAGE_NEMO_RL is not set)"));
  defaults.nemo_rl_image = "nvcr.io/nemo-rl:1";
  EXPECT_EQ(Valid(doc, defaults).image, "nvcr.io/nemo-rl:1");
  // An explicit image wins over the recipe's.
  EXPECT_EQ(Valid(With({{"recipe", "nemo-rl"}}), defaults).image, "img:1");

  json plain = Base();
  plain.erase("image");
  EXPECT_THAT(ErrorsOf(plain, defaults),
              ElementsAre("image: required (recipe \"none\" supplies no image)"));
  EXPECT_THAT(ErrorsOf(With({{"image", ""}})), ElementsAre("image: must not be empty"));
  EXPECT_THAT(ErrorsOf(With({{"image", "img :1"}})),
              ElementsAre("image: must not contain whitespace, got \"img :1\""));
}

TEST(ParseTest, EntrypointStringIsSplitIntoShellWords) {
  EXPECT_EQ(Valid(With({{"entrypoint", "bash -c 'echo $(date); ls | wc'"}})).entrypoint,
            (std::vector<std::string>{"bash", "-c", "echo $(date); ls | wc"}));
  EXPECT_EQ(Valid(With({{"entrypoint", "python a.py; rm -rf /"}})).entrypoint,
            (std::vector<std::string>{"python", "a.py;", "rm", "-rf", "/"}));
}

TEST(ParseTest, EntrypointErrors) {
  json doc = Base();
  doc.erase("entrypoint");
  EXPECT_THAT(ErrorsOf(doc), ElementsAre("entrypoint: required"));
  EXPECT_THAT(ErrorsOf(With({{"entrypoint", "python 'x"}})),
              ElementsAre("entrypoint: unterminated single quote"));
  EXPECT_THAT(ErrorsOf(With({{"entrypoint", "python \"x"}})),
              ElementsAre("entrypoint: unterminated double quote"));
  EXPECT_THAT(ErrorsOf(With({{"entrypoint", "  \n "}})),
              ElementsAre("entrypoint: must not be empty"));
  EXPECT_THAT(ErrorsOf(With({{"entrypoint", json::array()}})),
              ElementsAre("entrypoint: must not be empty"));
  EXPECT_THAT(ErrorsOf(With({{"entrypoint", "'' x"}})),
              ElementsAre("entrypoint: the first word (the program to run) must not be empty"));
  EXPECT_THAT(ErrorsOf(With({{"entrypoint", json::array({"python", 3, true})}})),
              ElementsAre("entrypoint[1]: must be a string, got number 3",
                          "entrypoint[2]: must be a string, got boolean true"));
  EXPECT_THAT(ErrorsOf(With({{"entrypoint", 7}})),
              ElementsAre("entrypoint: must be a string or a list of strings, got number 7"));
}

TEST(ParseTest, EntrypointListIsKeptVerbatim) {
  EXPECT_EQ(Valid(With({{"entrypoint", json::array({"python", "-c", "a = 'b'; print(a)", ""})}}))
                .entrypoint,
            (std::vector<std::string>{"python", "-c", "a = 'b'; print(a)", ""}));
}

TEST(ParseTest, NulIsRefusedWhereverItIsWithItsPath) {
  EXPECT_THAT(ErrorsOf(With({{"entrypoint", json::array({"python3", std::string("a\0b", 3)})}})),
              ElementsAre("entrypoint[1]: must not contain a NUL character (\\0)"));
  EXPECT_THAT(ErrorsOf(With({{"env", {{"X", std::string("1\0", 2)}}}})),
              ElementsAre("env.X: must not contain a NUL character (\\0)"));
  EXPECT_THAT(ErrorsOfYaml("name: job\nimage: img:1\nentrypoint: \"python3 \\0x\"\n"
                           "pools: [{name: main}]\n"),
              ElementsAre("entrypoint: must not contain a NUL character (\\0)"));
}

// A few hundred KB of aliases to a long string used to expand to gigabytes before it was
// refused: the expanded bytes are counted instead of the values.
TEST(ParseTest, AnAliasBombOfLongStringsIsRefusedCheaply) {
  std::string bomb = "name: job\nimage: img:1\nentrypoint: python3 x.py\npools: [{name: main}]\n";
  bomb += "env: {A: &a \"" + std::string(10'000, 'x') + "\"}\nx: [";
  for (int i = 0; i < 20'000; ++i)
    bomb += "*a, ";
  bomb += "*a]\n";
  const std::vector<std::string> errors = ErrorsOfYaml(bomb);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], ::testing::HasSubstr("bytes of keys and values once aliases"));
}

// Deep nesting is refused before yaml-cpp reads it (it held 135 MB for half a million '['), and
// a JobSpec of 50,000 unknown keys (under the byte limit) reports 50 of them, not 50,000
// "did you mean"s.
TEST(ParseTest, DeepNestingAndEndlessErrorsAreCheap) {
  const std::string deep = "x: " + std::string(500'000, '[') + std::string(500'000, ']') + "\n";
  std::vector<std::string> errors = ErrorsOfYaml(deep);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], ::testing::HasSubstr("nested more than 64 levels deep"));
  // Brackets inside quoted strings and comments are text, not nesting.
  const std::string quoted = "name: job\nimage: img:1\nentrypoint: [echo, \"" +
                             std::string(100, '[') + "\", '" + std::string(100, '{') +
                             "']\npools: [{name: main}]  # " + std::string(100, '[') + "\n";
  EXPECT_THAT(ErrorsOfYaml(quoted), ::testing::IsEmpty());

  std::string many = "name: job\nimage: img:1\nentrypoint: x\npools: [{name: main}]\n";
  for (int i = 0; i < 50'000; ++i)
    many += "k" + std::to_string(i) + ": 1\n";
  errors = ErrorsOfYaml(many);
  ASSERT_EQ(errors.size(), kMaxReportedErrors + 1);
  EXPECT_THAT(errors.back(), ::testing::HasSubstr("more problems, not listed"));
}

TEST(ParseTest, Env) {
  EXPECT_EQ(Valid(With({{"env", {{"A", "1"}, {"_b", ""}}}})).env,
            (std::map<std::string, std::string>{{"A", "1"}, {"_b", ""}}));
  EXPECT_THAT(ErrorsOf(With({{"env", {{"NUM_WORKERS", 4}}}})),
              ElementsAre("env.NUM_WORKERS: must be a string, got number 4 (quote it: \"4\")"));
  EXPECT_THAT(ErrorsOf(With({{"env", {{"DEBUG", true}}}})),
              ElementsAre("env.DEBUG: must be a string, got boolean true (quote it: \"true\")"));
  EXPECT_THAT(ErrorsOf(With({{"env", {{"X", json::array()}}}})),
              ElementsAre("env.X: must be a string, got a list"));
  EXPECT_THAT(ErrorsOfYaml("name: a\nimage: i\nentrypoint: x\npools: [{name: p}]\nenv:\n  E:\n"),
              ElementsAre("env.E: must be a string, got null (write \"\" for an empty value)"));
  EXPECT_THAT(
      ErrorsOf(With({{"env", {{"FORGE_JOB_ID", "x"}}}})),
      ElementsAre("env.FORGE_JOB_ID: names starting with FORGE_ are reserved for StarForge"));
  EXPECT_THAT(ErrorsOf(With({{"env", {{"MY-VAR", "x"}}}})),
              ElementsAre("env.MY-VAR: must be a valid environment variable name (letters, digits "
                          "and '_', not starting with a digit)"));
  EXPECT_THAT(ErrorsOf(With({{"env", {{"A B", "x"}}}})),
              ElementsAre(::testing::StartsWith("env[\"A B\"]: must be a valid environment")));
  EXPECT_THAT(ErrorsOf(With({{"env", {{"NUL", std::string("a\0b", 3)}}}})),
              ElementsAre("env.NUL: must not contain a NUL character (\\0)"));
  EXPECT_THAT(
      ErrorsOf(With({{"env", "A=1"}})),
      ElementsAre("env: must be a mapping of variable names to strings, got string \"A=1\""));
}

TEST(ParseTest, YamlEnvValuesThatLookLikeNumbersNeedQuotes) {
  EXPECT_THAT(
      ErrorsOfYaml(
          "name: a\nimage: i\nentrypoint: x\npools: [{name: p}]\nenv: {LR: 1e-4, ON: yes}\n"),
      ElementsAre("env.LR: must be a string, got number 0.0001 (quote it: \"0.0001\")"));
}

TEST(ParseTest, Code) {
  EXPECT_EQ(Valid(With({{"code", "./src"}})).code, "./src");
  EXPECT_THAT(ErrorsOf(With({{"code", ""}})), ElementsAre("code: must not be empty"));
  EXPECT_THAT(ErrorsOf(With({{"code", json::array()}})),
              ElementsAre("code: must be a string, got a list"));
}

TEST(ParseTest, PoolsStructure) {
  json doc = Base();
  doc.erase("pools");
  EXPECT_THAT(ErrorsOf(doc), ElementsAre("pools: at least one pool is required"));
  EXPECT_THAT(ErrorsOf(With({{"pools", json::array()}})),
              ElementsAre("pools: at least one pool is required"));
  EXPECT_THAT(ErrorsOf(With({{"pools", {{"name", "x"}}}})),
              ElementsAre("pools: must be a list of pools, got a mapping"));
  EXPECT_THAT(ErrorsOf(With({{"pools", json::array({"train"})}})),
              ElementsAre("pools[0]: must be a mapping, got string \"train\""));
  EXPECT_THAT(ErrorsOf(With({{"pools", json::array({{{"machines", 1}}})}})),
              ElementsAre("pools[0].name: required"));
}

TEST(ParseTest, PoolNames) {
  const json three = With(
      {{"pools", json::array({{{"name", "train"}}, {{"name", "roll"}}, {{"name", "train"}}})}});
  EXPECT_THAT(ErrorsOf(three),
              ElementsAre("pools[2].name: duplicate pool name \"train\" (also pools[0])"));
  EXPECT_THAT(ErrorsOf(WithPool({{"name", "a-very-long-pool-name"}})),
              ElementsAre("pools[0].name: must be at most 15 characters, got 21"));
  EXPECT_THAT(ErrorsOf(WithPool({{"name", "Train"}})),
              ElementsAre("pools[0].name: must be a lower-case DNS label (a-z, 0-9 and '-', "
                          "starting and ending with a letter or digit), got \"Train\""));
}

TEST(ParseTest, PoolIntegers) {
  EXPECT_THAT(ErrorsOf(WithPool({{"machines", "two"}})),
              ElementsAre("pools[0].machines: must be an integer, got string \"two\""));
  EXPECT_THAT(ErrorsOf(WithPool({{"machines", 2.0}})),
              ElementsAre("pools[0].machines: must be an integer, got 2.0"));
  EXPECT_THAT(ErrorsOf(WithPool({{"machines", 2.5}})),
              ElementsAre("pools[0].machines: must be an integer, got 2.5"));
  EXPECT_THAT(ErrorsOf(WithPool({{"machines", 0}})),
              ElementsAre("pools[0].machines: must be ≥ 1, got 0"));
  EXPECT_THAT(ErrorsOf(WithPool({{"machines", 10001}})),
              ElementsAre("pools[0].machines: must be ≤ 10000, got 10001"));
  EXPECT_EQ(Valid(WithPool({{"machines", 10000}})).pools[0].machines, 10000);
  EXPECT_THAT(ErrorsOf(WithPool({{"gpusPerMachine", -1}})),
              ElementsAre("pools[0].gpusPerMachine: must be ≥ 0, got -1"));
  EXPECT_THAT(ErrorsOf(WithPool({{"gpusPerMachine", 65}, {"gpuSeries", "h200"}})),
              ElementsAre("pools[0].gpusPerMachine: must be ≤ 64, got 65"));
  EXPECT_THAT(ErrorsOf(WithPool({{"machines", 18446744073709551615ull}})),
              ElementsAre("pools[0].machines: must be ≤ 10000, got 18446744073709551615"));
  EXPECT_THAT(ErrorsOf(WithPool({{"machines", true}})),
              ElementsAre("pools[0].machines: must be an integer, got boolean true"));
}

TEST(ParseTest, UnsignedJsonZeroIsStillRangeChecked) {
  // nlohmann::json::parse yields non-negative integers as unsigned.
  json doc = Base();
  doc["pools"] = json::parse(R"([{"name": "main", "machines": 0}])");
  ASSERT_TRUE(doc["pools"][0]["machines"].is_number_unsigned());
  EXPECT_THAT(ErrorsOf(doc), ElementsAre("pools[0].machines: must be ≥ 1, got 0"));
}

TEST(ParseTest, GpuSeries) {
  EXPECT_THAT(ErrorsOf(WithPool({{"gpusPerMachine", 8}})),
              ElementsAre("pools[0].gpuSeries: required when gpusPerMachine > 0 (the card series "
                          "of the nodes, e.g. \"h200\")"));
  EXPECT_THAT(ErrorsOf(WithPool({{"gpusPerMachine", 8}, {"gpuSeries", ""}})),
              ElementsAre(::testing::StartsWith("pools[0].gpuSeries: required when")));
  EXPECT_THAT(ErrorsOf(WithPool({{"gpuSeries", "h200/sxm"}})),
              ElementsAre("pools[0].gpuSeries: must be a valid label value (A-Z, a-z, 0-9, '-', "
                          "'_' and '.', starting and ending with a letter or digit), got "
                          "\"h200/sxm\""));
  EXPECT_THAT(ErrorsOf(WithPool({{"gpuSeries", 200}})),
              ElementsAre("pools[0].gpuSeries: must be a string, got number 200"));
  // A series without GPUs pins a CPU pool to those nodes: allowed.
  EXPECT_EQ(Valid(WithPool({{"gpuSeries", "H200"}})).pools[0].gpu_series, "H200");
}

TEST(ParseTest, Quantities) {
  const Pool p = Valid(WithPool({{"cpusPerMachine", 32}, {"memoryPerMachine", "256Gi"}})).pools[0];
  EXPECT_EQ(p.cpus_per_machine, "32");
  EXPECT_EQ(p.memory_per_machine, "256Gi");
  EXPECT_EQ(Valid(WithPool({{"cpusPerMachine", 0.5}})).pools[0].cpus_per_machine, "0.5");
  EXPECT_EQ(Valid(WithPool({{"cpusPerMachine", "500m"}})).pools[0].cpus_per_machine, "500m");
  EXPECT_THAT(ErrorsOf(WithPool({{"memoryPerMachine", "256GB"}})),
              ElementsAre("pools[0].memoryPerMachine: must be a Kubernetes quantity such as "
                          "\"32\", \"500m\" or \"256Gi\", got string \"256GB\""));
  EXPECT_THAT(ErrorsOf(WithPool({{"cpusPerMachine", 0}})),
              ElementsAre("pools[0].cpusPerMachine: must be > 0, got \"0\""));
  EXPECT_THAT(ErrorsOf(WithPool({{"cpusPerMachine", "-2"}})),
              ElementsAre("pools[0].cpusPerMachine: must be > 0, got \"-2\""));
  EXPECT_THAT(ErrorsOf(WithPool({{"cpusPerMachine", false}})),
              ElementsAre("pools[0].cpusPerMachine: must be a Kubernetes quantity such as \"32\", "
                          "\"500m\" or \"256Gi\", got boolean false"));
}

TEST(ParseTest, YamlQuantityNumbersBecomeStrings) {
  const ParseResult r = Parse(
      "name: a\nimage: i\nentrypoint: x\npools:\n- name: p\n  cpusPerMachine: 32\n"
      "  memoryPerMachine: 1e3\n",
      Defaults{});
  ASSERT_TRUE(r.ok()) << JoinErrors(r.errors);
  EXPECT_EQ(r.spec->pools[0].cpus_per_machine, "32");
  EXPECT_EQ(r.spec->pools[0].memory_per_machine, "1000.0");
}

TEST(ParseTest, Deadlines) {
  const JobSpec s =
      Valid(With({{"deadlines", {{"preRunningSeconds", 60}, {"runningSeconds", 3600}}}}));
  EXPECT_EQ(s.pre_running_seconds, 60);
  EXPECT_EQ(s.running_seconds, 3600);
  EXPECT_EQ(Valid(With({{"deadlines", json::object()}})).pre_running_seconds, 1800);
  EXPECT_THAT(ErrorsOf(With({{"deadlines", {{"preRunningSeconds", 0}}}})),
              ElementsAre("deadlines.preRunningSeconds: must be ≥ 1, got 0"));
  EXPECT_THAT(ErrorsOf(With({{"deadlines", {{"runningSeconds", -5}}}})),
              ElementsAre("deadlines.runningSeconds: must be ≥ 0, got -5"));
  EXPECT_THAT(ErrorsOf(With({{"deadlines", {{"preRunningSeconds", 2147483648LL}}}})),
              ElementsAre("deadlines.preRunningSeconds: must be ≤ 2147483647, got 2147483648"));
  EXPECT_EQ(Valid(With({{"deadlines", {{"queueSeconds", 7200}}}})).queue_seconds, 7200);
  EXPECT_EQ(Valid(With({{"deadlines", json::object()}})).queue_seconds, 0);
  EXPECT_THAT(ErrorsOf(With({{"deadlines", {{"queueSeconds", -1}}}})),
              ElementsAre("deadlines.queueSeconds: must be ≥ 0, got -1"));
  EXPECT_THAT(ErrorsOf(With({{"deadlines", {{"queueSecs", 60}}}})),
              ElementsAre(::testing::HasSubstr("\"queueSeconds\"?")));
  EXPECT_THAT(ErrorsOf(With({{"deadlines", "1h"}})),
              ElementsAre("deadlines: must be a mapping, got string \"1h\""));
}

TEST(ParseTest, DeadlineSumMustFitInt32) {
  EXPECT_THAT(
      ErrorsOf(
          With({{"deadlines", {{"preRunningSeconds", 1800}, {"runningSeconds", 2147483000}}}})),
      ElementsAre("deadlines.runningSeconds: preRunningSeconds + runningSeconds must be ≤ "
                  "2147483647 (their sum becomes activeDeadlineSeconds), got 1800 + 2147483000"));
  EXPECT_EQ(Valid(With({{"deadlines", {{"preRunningSeconds", 1}, {"runningSeconds", 2147483646}}}}))
                .running_seconds,
            2147483646);
  // The default pre-running deadline counts too.
  EXPECT_THAT(ErrorsOf(With({{"deadlines", {{"runningSeconds", 2147483647}}}})),
              ElementsAre(::testing::StartsWith("deadlines.runningSeconds: preRunningSeconds + ")));
}

TEST(ParseTest, Corpus) {
  EXPECT_TRUE(Valid(With({{"corpus", true}})).corpus);
  EXPECT_THAT(ErrorsOf(With({{"corpus", "true"}})),
              ElementsAre("corpus: must be true or false, got string \"true\""));
  EXPECT_THAT(ErrorsOfYaml("name: a\nimage: i\nentrypoint: x\npools: [{name: p}]\ncorpus: yes\n"),
              ElementsAre("corpus: must be true or false, got string \"yes\""));
}

TEST(ParseTest, Queue) {
  EXPECT_EQ(Valid(With({{"queue", "team-a.gpu"}})).queue, "team-a.gpu");
  EXPECT_THAT(
      ErrorsOf(With({{"queue", std::string(64, 'q')}})),
      ElementsAre("queue: must be at most 63 characters (it is also a label value), got 64"));
  EXPECT_THAT(ErrorsOf(With({{"queue", "team_a"}})),
              ElementsAre(::testing::StartsWith("queue: must be a lower-case DNS subdomain")));
  EXPECT_THAT(ErrorsOf(With({{"queue", ""}})), ElementsAre("queue: must not be empty"));
}

TEST(ParseTest, LongValuesAreShortenedInMessages) {
  const std::string long_name = "X" + std::string(100, 'a');
  EXPECT_THAT(ErrorsOf(With({{"fleet", long_name}})),
              ElementsAre("fleet: must be one of \"local\", \"kuberay\", got \"" +
                          long_name.substr(0, 64) + "...\""));
}

TEST(ParseTest, TotalsOverPools) {
  const JobSpec s = Valid(With(
      {{"pools",
        json::array(
            {{{"name", "a"}, {"machines", 3}},
             {{"name", "b"}, {"machines", 2}, {"gpusPerMachine", 8}, {"gpuSeries", "h200"}}})}}));
  EXPECT_EQ(s.TotalMachines(), 5);
  EXPECT_EQ(s.TotalGpus(), 16);
}

}  // namespace
}  // namespace starforge::jobspec
