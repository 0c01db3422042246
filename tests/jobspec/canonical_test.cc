#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "jobspec_test_support.h"
#include "starforge/common/yaml_json.h"
#include "starforge/jobspec/parse.h"

namespace starforge::jobspec {
namespace {

using nlohmann::json;
using testing::ReadTestdata;

JobSpec MustParse(std::string_view text, const Defaults& defaults = {}) {
  const ParseResult r = Parse(text, defaults);
  EXPECT_TRUE(r.ok()) << JoinErrors(r.errors);
  return r.spec.value_or(JobSpec{});
}

TEST(CanonicalTest, GoldenFiles) {
  for (const std::string name : {"full", "minimal"}) {
    const JobSpec spec = MustParse(ReadTestdata(name + ".yaml"));
    EXPECT_EQ(ToCanonicalText(spec), ReadTestdata(name + ".canonical.json")) << name;
  }
}

TEST(CanonicalTest, CodeIsNotPartOfTheCanonicalForm) {
  const JobSpec spec = MustParse(ReadTestdata("full.yaml"));
  ASSERT_TRUE(spec.code.has_value());
  EXPECT_FALSE(ToCanonicalJson(spec).contains("code"));
  JobSpec without_code = spec;
  without_code.code.reset();
  EXPECT_EQ(ToCanonicalText(spec), ToCanonicalText(without_code));
}

TEST(CanonicalTest, RoundTripIgnoresDefaults) {
  for (const std::string name : {"full", "minimal"}) {
    JobSpec spec = MustParse(ReadTestdata(name + ".yaml"));
    spec.code.reset();
    Defaults other;
    other.fleet = "kuberay";
    other.nemo_rl_image = "other:1";
    other.pre_running_seconds = 5;
    const ParseResult back = FromJson(ToCanonicalJson(spec), other);
    ASSERT_TRUE(back.ok()) << JoinErrors(back.errors);
    EXPECT_EQ(*back.spec, spec) << name;
    EXPECT_EQ(ToCanonicalText(*back.spec), ToCanonicalText(spec));
  }
}

TEST(CanonicalTest, RoundTripThroughTextAndYaml) {
  const JobSpec spec = [] {
    JobSpec s = MustParse(ReadTestdata("full.yaml"));
    s.code.reset();
    return s;
  }();
  const std::string text = ToCanonicalText(spec);
  EXPECT_EQ(MustParse(text), spec);
  EXPECT_EQ(MustParse(EmitYaml(ToCanonicalJson(spec))), spec);
}

TEST(CanonicalTest, ByteStableForEqualSpecs) {
  const std::string a =
      "name: x\nimage: i\nentrypoint: run\npools: [{name: p, machines: 1}]\n"
      "env: {B: '2', A: '1'}\n";
  const std::string b = R"({"env": {"A": "1", "B": "2"}, "pools": [{"name": "p"}],
                            "entrypoint": ["run"], "image": "i", "name": "x", "recipe": "none"})";
  EXPECT_EQ(ToCanonicalText(MustParse(a)), ToCanonicalText(MustParse(b)));
  EXPECT_EQ(ToCanonicalText(MustParse(a)).back(), '\n');
  EXPECT_EQ(ToCanonicalText(MustParse(a)).find('\n'), ToCanonicalText(MustParse(a)).size() - 1);
}

TEST(CanonicalTest, OptionalFieldsAreOmittedWhenAbsent) {
  const json j =
      ToCanonicalJson(MustParse("name: x\nimage: i\nentrypoint: run\npools: [{name: p}]\n"));
  EXPECT_FALSE(j.contains("queue"));
  EXPECT_FALSE(j["deadlines"].contains("queueSeconds"));  // older specs keep their digest
  EXPECT_FALSE(j["pools"][0].contains("gpuSeries"));
  EXPECT_FALSE(j["pools"][0].contains("cpusPerMachine"));
  EXPECT_FALSE(j["pools"][0].contains("memoryPerMachine"));
  EXPECT_TRUE(j["env"].is_object());
  EXPECT_TRUE(j["entrypoint"].is_array());
}

TEST(CanonicalTest, AQueueDeadlineRoundTrips) {
  const JobSpec spec = MustParse(
      "name: x\nimage: i\nentrypoint: run\npools: [{name: p}]\nqueue: team-a\n"
      "deadlines: {queueSeconds: 600}\n");
  EXPECT_EQ(ToCanonicalJson(spec)["deadlines"]["queueSeconds"], 600);
  EXPECT_EQ(MustParse(ToCanonicalText(spec)), spec);
}

TEST(CanonicalTest, NemoRlImageIsResolvedIntoTheCanonicalForm) {
  Defaults defaults;
  defaults.nemo_rl_image = "nvcr.io/nemo-rl:25.04";
  const JobSpec spec =
      MustParse("name: x\nrecipe: nemo-rl\nentrypoint: run\npools: [{name: p}]\n", defaults);
  EXPECT_EQ(ToCanonicalJson(spec)["image"], "nvcr.io/nemo-rl:25.04");
  // Later, with the setting changed, the stored canonical form still names the same image.
  const ParseResult back = FromJson(ToCanonicalJson(spec), Defaults{});
  ASSERT_TRUE(back.ok()) << JoinErrors(back.errors);
  EXPECT_EQ(back.spec->image, "nvcr.io/nemo-rl:25.04");
}

}  // namespace
}  // namespace starforge::jobspec
