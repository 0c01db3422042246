#include "apiserver/crd_schema.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "starforge/common/field_error.h"
#include "starforge/common/yaml_json.h"

namespace starforge::kube {
namespace {

using json = nlohmann::json;
using kubesim::CrdValidator;  // tools/kubesim/apiserver/crd_schema.h
using kubesim::TranslateOpenApiV3;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string CrdPath(const std::string& release, const std::string& file) {
  return std::string(STARFORGE_CRD_DIR) + "/" + release + "/" + file;
}

std::string TestdataPath(const std::string& name) {
  return std::string(STARFORGE_SOURCE_DIR) + "/tests/kube/testdata/" + name;
}

// The samples hold a RayJob and a ConfigMap separated by "---"; ParseYaml takes one document.
json LoadRayJob(const std::string& name) {
  const std::string text = ReadFile(TestdataPath(name));
  std::vector<std::string> docs(1);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("---", 0) == 0 && line.find_first_not_of("- \t\r") == std::string::npos) {
      docs.emplace_back();
    } else {
      docs.back() += line + "\n";
    }
  }
  for (const auto& doc : docs) {
    json value = ParseYaml(doc).value();
    if (value.is_object() && value.value("kind", "") == "RayJob") return value;
  }
  throw std::runtime_error(name + " holds no RayJob");
}

// Loading a 1.3 MB CRD costs real time (about 0.1 s optimised, 0.6 s with sanitizers), so each
// one is loaded once per test binary, and only when a test needs it.
const CrdValidator& RayJobs(const std::string& release) {
  if (release == "v1.4.0") {
    static const auto v14 = CrdValidator::FromFile(CrdPath("v1.4.0", "ray.io_rayjobs.yaml"), "v1");
    return *v14;
  }
  static const auto v17 = CrdValidator::FromFile(CrdPath("v1.7.0", "ray.io_rayjobs.yaml"), "v1");
  return *v17;
}

const std::vector<std::string>& Samples() {
  static const std::vector<std::string> names = {
      "kuberay-ray-job.batch-inference.yaml",  "kuberay-ray-job.custom-head-svc.yaml",
      "kuberay-ray-job.deletion-rules.yaml",   "kuberay-ray-job.interactive-mode.yaml",
      "kuberay-ray-job.kueue-toy-sample.yaml", "kuberay-ray-job.light-weight-submitter.yaml",
      "kuberay-ray-job.resources.yaml",        "kuberay-ray-job.sample.yaml",
      "kuberay-ray-job.shutdown.yaml",         "kuberay-ray-job.sidecar-mode.yaml",
  };
  return names;
}

// A CRD around a hand-written schema, for checking single rules end to end.
json MakeCrd(const json& spec_schema) {
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", "widgets.example.com"}}},
          {"spec",
           {{"group", "example.com"},
            {"names", {{"kind", "Widget"}, {"plural", "widgets"}}},
            {"versions", json::array({{{"name", "v1"},
                                       {"served", true},
                                       {"storage", true},
                                       {"schema",
                                        {{"openAPIV3Schema",
                                          {{"type", "object"},
                                           {"properties",
                                            {{"apiVersion", {{"type", "string"}}},
                                             {"kind", {{"type", "string"}}},
                                             {"metadata", {{"type", "object"}}},
                                             {"spec", spec_schema}}}}}}}}})}}}};
}

json Widget(const json& spec) {
  return {{"apiVersion", "example.com/v1"},
          {"kind", "Widget"},
          {"metadata", {{"name", "w"}}},
          {"spec", spec}};
}

std::string Check(const json& spec_schema, const json& spec) {
  return JoinErrors(CrdValidator::FromCrd(MakeCrd(spec_schema), "v1")->Validate(Widget(spec)));
}

// Paths into the sample RayJob (kuberay-ray-job.sample.yaml).
const json::json_pointer kHeadContainer(
    "/spec/rayClusterSpec/headGroupSpec/template/spec/containers/0");
const json::json_pointer kWorkerGroup("/spec/rayClusterSpec/workerGroupSpecs/0");
const json::json_pointer kWorkerLimits(
    "/spec/rayClusterSpec/workerGroupSpecs/0/template/spec/containers/0/resources/limits");
constexpr const char* kWorkerLimitsPath =
    "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0].resources.limits";

// ---------------------------------------------------------------------------------------------
// TranslateOpenApiV3 on small schemas: one test per rule.

TEST(TranslateOpenApiV3, NullableAddsNullToTheType) {
  EXPECT_EQ(TranslateOpenApiV3({{"type", "string"}, {"nullable", true}}),
            json({{"type", json::array({"string", "null"})}}));
  EXPECT_EQ(TranslateOpenApiV3({{"type", "string"}, {"nullable", false}}),
            json({{"type", "string"}}));
}

TEST(TranslateOpenApiV3, IntOrStringBecomesAnyOfIntegerString) {
  const json in = {{"anyOf", json::array({{{"type", "integer"}}, {{"type", "string"}}})},
                   {"x-kubernetes-int-or-string", true},
                   {"pattern", "^[0-9]+m?$"}};
  EXPECT_EQ(TranslateOpenApiV3(in),
            json({{"anyOf", json::array({{{"type", "integer"}}, {{"type", "string"}}})},
                  {"pattern", "^[0-9]+m?$"}}));
  // Without controller-gen's anyOf, and nullable.
  EXPECT_EQ(
      TranslateOpenApiV3({{"x-kubernetes-int-or-string", true}, {"nullable", true}}),
      json({{"anyOf",
             json::array({{{"type", "integer"}}, {{"type", "string"}}, {{"type", "null"}}})}}));
}

TEST(TranslateOpenApiV3, ObjectsRejectUndeclaredFields) {
  json out =
      TranslateOpenApiV3({{"type", "object"}, {"properties", {{"a", {{"type", "object"}}}}}});
  EXPECT_EQ(out["additionalProperties"], false);
  // A bare object is pruned empty by the server, so it too accepts no fields.
  EXPECT_EQ(out["properties"]["a"], json({{"type", "object"}, {"additionalProperties", false}}));
}

TEST(TranslateOpenApiV3, PreserveUnknownFieldsKeepsTheObjectOpen) {
  json out = TranslateOpenApiV3({{"type", "object"},
                                 {"x-kubernetes-preserve-unknown-fields", true},
                                 {"properties", {{"a", {{"type", "string"}}}}}});
  EXPECT_FALSE(out.contains("additionalProperties"));
  EXPECT_FALSE(out.contains("x-kubernetes-preserve-unknown-fields"));
}

TEST(TranslateOpenApiV3, AdditionalPropertiesSchemaIsTranslated) {
  json out = TranslateOpenApiV3(
      {{"type", "object"},
       {"additionalProperties", {{"type", "string"}, {"nullable", true}, {"default", "x"}}}});
  EXPECT_EQ(out, json({{"type", "object"},
                       {"additionalProperties", {{"type", json::array({"string", "null"})}}}}));
}

TEST(TranslateOpenApiV3, RootMetadataStaysPermissive) {
  json out =
      TranslateOpenApiV3({{"type", "object"},
                          {"properties",
                           {{"metadata",
                             {{"type", "object"},
                              {"properties", {{"name", {{"type", "string"}, {"maxLength", 40}}}}}}},
                            {"spec", {{"type", "object"}}}}}});
  EXPECT_FALSE(out["properties"]["metadata"].contains("additionalProperties"));
  EXPECT_EQ(out["properties"]["metadata"]["properties"]["name"]["maxLength"], 40);
  EXPECT_EQ(out["properties"]["spec"]["additionalProperties"], false);
}

TEST(TranslateOpenApiV3, EmbeddedResourceGetsItsImplicitFields) {
  json out = TranslateOpenApiV3({{"type", "object"},
                                 {"x-kubernetes-embedded-resource", true},
                                 {"properties", {{"spec", {{"type", "object"}}}}}});
  EXPECT_EQ(out["properties"]["apiVersion"], json({{"type", "string"}}));
  EXPECT_EQ(out["properties"]["kind"], json({{"type", "string"}}));
  EXPECT_EQ(out["properties"]["metadata"], json({{"type", "object"}}));
  EXPECT_EQ(out["additionalProperties"], false);
}

TEST(TranslateOpenApiV3, IntegerFormatsBecomeRanges) {
  EXPECT_EQ(TranslateOpenApiV3({{"type", "integer"}, {"format", "int32"}}),
            json({{"type", "integer"},
                  {"minimum", std::numeric_limits<int32_t>::min()},
                  {"maximum", std::numeric_limits<int32_t>::max()}}));
  EXPECT_EQ(TranslateOpenApiV3({{"type", "integer"}, {"format", "int64"}}),
            json({{"type", "integer"},
                  {"minimum", std::numeric_limits<int64_t>::min()},
                  {"maximum", std::numeric_limits<int64_t>::max()}}));
  // A tighter bound from the schema wins over the format's.
  EXPECT_EQ(
      TranslateOpenApiV3({{"type", "integer"}, {"format", "int32"}, {"minimum", 1}}),
      json(
          {{"type", "integer"}, {"minimum", 1}, {"maximum", std::numeric_limits<int32_t>::max()}}));
  // int32 on a number (a float32 in Go) is not an integer range.
  EXPECT_EQ(TranslateOpenApiV3({{"type", "number"}, {"format", "float"}}),
            json({{"type", "number"}}));
}

TEST(TranslateOpenApiV3, DateTimeBecomesAPatternAndOtherFormatsAreDropped) {
  json dt = TranslateOpenApiV3({{"type", "string"}, {"format", "date-time"}});
  EXPECT_FALSE(dt.contains("format"));
  ASSERT_TRUE(dt.contains("pattern"));
  EXPECT_EQ(TranslateOpenApiV3({{"type", "string"}, {"format", "uuid"}}),
            json({{"type", "string"}}));
  // Both a format and a pattern: the second pattern goes through allOf.
  json both = TranslateOpenApiV3({{"type", "string"}, {"format", "date-time"}, {"pattern", "^2"}});
  EXPECT_EQ(both["pattern"], "^2");
  EXPECT_EQ(both["allOf"][0]["pattern"], dt["pattern"]);
}

TEST(TranslateOpenApiV3, DropsExtensionsDefaultsAndProse) {
  const json in = {
      {"type", "array"},
      {"description", "d"},
      {"x-kubernetes-list-type", "atomic"},
      {"x-kubernetes-validations", json::array({{{"rule", "size(self) > 0"}}})},
      {"default", json::array()},
      {"example", json::array({1})},
      {"items", {{"type", "string"}, {"x-kubernetes-map-type", "atomic"}}},
  };
  EXPECT_EQ(TranslateOpenApiV3(in), json({{"type", "array"}, {"items", {{"type", "string"}}}}));
}

TEST(TranslateOpenApiV3, RequiredFieldsWithADefaultAreNotRequired) {
  json out = TranslateOpenApiV3(
      {{"type", "object"},
       {"required", json::array({"a", "b"})},
       {"properties",
        {{"a", {{"type", "integer"}, {"default", 0}}}, {"b", {{"type", "string"}}}}}});
  EXPECT_EQ(out["required"], json::array({"b"}));
  const json none =
      TranslateOpenApiV3({{"type", "object"},
                          {"required", json::array({"a"})},
                          {"properties", {{"a", {{"type", "integer"}, {"default", 2}}}}}});
  EXPECT_FALSE(none.contains("required"));
}

TEST(TranslateOpenApiV3, SetListsHaveUniqueItems) {
  EXPECT_EQ(
      TranslateOpenApiV3(
          {{"type", "array"}, {"x-kubernetes-list-type", "set"}, {"items", {{"type", "integer"}}}}),
      json({{"type", "array"}, {"uniqueItems", true}, {"items", {{"type", "integer"}}}}));
}

TEST(TranslateOpenApiV3, ValueKeywordsAreKept) {
  const json in = {{"type", "string"},
                   {"enum", json::array({"a", "b"})},
                   {"minLength", 1},
                   {"maxLength", 9},
                   {"pattern", "^[a-z]+$"}};
  EXPECT_EQ(TranslateOpenApiV3(in), in);
  const json numbers = {{"type", "number"},
                        {"minimum", 0},
                        {"exclusiveMinimum", true},
                        {"maximum", 1},
                        {"multipleOf", 0.5}};
  EXPECT_EQ(TranslateOpenApiV3(numbers), numbers);
  const json lists = {{"type", "array"}, {"minItems", 1}, {"maxItems", 3}};
  EXPECT_EQ(TranslateOpenApiV3(lists), lists);
  const json maps = {{"type", "object"},
                     {"minProperties", 1},
                     {"maxProperties", 2},
                     {"additionalProperties", {{"type", "string"}}}};
  EXPECT_EQ(TranslateOpenApiV3(maps), maps);
}

TEST(TranslateOpenApiV3, JunctorBranchesDoNotCloseObjects) {
  json out = TranslateOpenApiV3(
      {{"type", "object"},
       {"properties", {{"a", {{"type", "string"}}}, {"b", {{"type", "string"}}}}},
       {"anyOf", json::array({{{"required", json::array({"a"})}},
                              {{"properties", {{"b", {{"minLength", 2}}}}}}})}});
  EXPECT_EQ(out["anyOf"][0], json({{"required", json::array({"a"})}}));
  EXPECT_EQ(out["anyOf"][1], json({{"properties", {{"b", {{"minLength", 2}}}}}}));
}

TEST(TranslateOpenApiV3, PatternsStdRegexCannotCompileAreDropped) {
  // RE2's inline flags are not ECMAScript; valijson would throw on them mid-validation.
  EXPECT_EQ(TranslateOpenApiV3({{"type", "string"}, {"pattern", "(?i)^abc$"}}),
            json({{"type", "string"}}));
}

TEST(TranslateOpenApiV3, MalformedKeywordsAreDroppedNotPassedToValijson) {
  EXPECT_EQ(TranslateOpenApiV3({{"type", "string"}, {"minLength", -1}, {"enum", "x"}}),
            json({{"type", "string"}}));
  EXPECT_EQ(TranslateOpenApiV3("not a schema"), json::object());
}

// ---------------------------------------------------------------------------------------------
// CrdValidator on hand-written CRDs: the behaviour around valijson.

TEST(CrdValidatorSmall, UnknownKeywordsAndFormatsDoNotBreakLoading) {
  const json schema = {{"type", "object"},
                       {"x-something-new", {{"nested", true}}},
                       {"externalDocs", {{"url", "https://example.com"}}},
                       {"properties",
                        {{"id", {{"type", "string"}, {"format", "uuid"}}},
                         {"ip", {{"type", "string"}, {"format", "ipv4"}}}}}};
  EXPECT_EQ(Check(schema, {{"id", "not-a-uuid"}, {"ip", "x"}}), "");
}

TEST(CrdValidatorSmall, NullableDateTimeAcceptsNull) {
  // valijson's own date-time format would reject null here (it formats null as "").
  const json schema = {
      {"type", "object"},
      {"properties", {{"t", {{"type", "string"}, {"format", "date-time"}, {"nullable", true}}}}}};
  EXPECT_EQ(Check(schema, {{"t", nullptr}}), "");
  EXPECT_EQ(Check(schema, {{"t", "2024-05-01T12:00:00Z"}}), "");
  EXPECT_EQ(Check(schema, {{"t", "2024-05-01T12:00:00.5+02:00"}}), "");
  EXPECT_EQ(Check(schema, {{"t", "2024-05-01 12:00"}}),
            "spec.t: \"2024-05-01 12:00\" is not an RFC 3339 date-time (e.g. "
            "\"2024-05-01T12:00:00Z\")");
  EXPECT_EQ(Check(schema, {{"t", {{"a", 1}}}}), "spec.t: expected string or null, got object");
}

TEST(CrdValidatorSmall, NullInANonNullableFieldIsPrunedLikeTheApiServer) {
  const json schema = {
      {"type", "object"},
      {"required", json::array({"name"})},
      {"properties", {{"name", {{"type", "string"}}}, {"n", {{"type", "integer"}}}}}};
  EXPECT_EQ(Check(schema, {{"name", "x"}, {"n", nullptr}}), "");
  EXPECT_EQ(Check(schema, {{"name", nullptr}}), "spec.name: missing required field \"name\"");
  // Array items are not pruned: a null item is a type error.
  const json list = {{"type", "object"},
                     {"properties", {{"l", {{"type", "array"}, {"items", {{"type", "string"}}}}}}}};
  EXPECT_EQ(Check(list, {{"l", json::array({"a", nullptr})}}),
            "spec.l[1]: expected string, got null");
}

TEST(CrdValidatorSmall, WholeFloatsCountAsIntegers) {
  const json schema = {{"type", "object"}, {"properties", {{"n", {{"type", "integer"}}}}}};
  EXPECT_EQ(Check(schema, {{"n", 3.0}}), "");
  EXPECT_EQ(Check(schema, {{"n", 3.5}}), "spec.n: expected integer, got number 3.5");
  // Beyond int64: valijson alone would wrap it to -1.
  EXPECT_EQ(Check(schema, {{"n", std::numeric_limits<uint64_t>::max()}}),
            "spec.n: expected integer, got number 1.8446744073709552e+19 (too large for a 64-bit "
            "integer)");
}

TEST(CrdValidatorSmall, MapEntriesUseBrackets) {
  const json schema = {
      {"type", "object"},
      {"properties",
       {{"labels", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}}}}};
  EXPECT_EQ(Check(schema, {{"labels", {{"app.kubernetes.io/name", 5}}}}),
            "spec.labels[app.kubernetes.io/name]: expected string, got integer 5");
}

TEST(CrdValidatorSmall, ValueOnlyAnyOfGivesOneMessage) {
  const json schema = {{"type", "object"},
                       {"properties", {{"a", {{"type", "string"}}}, {"b", {{"type", "string"}}}}},
                       {"anyOf", json::array({{{"required", json::array({"a"})}},
                                              {{"required", json::array({"b"})}}})}};
  EXPECT_EQ(Check(schema, {{"a", "x"}}), "");
  EXPECT_EQ(Check(schema, json::object()),
            "spec: does not match any of the allowed alternatives (anyOf)");
}

TEST(CrdValidatorSmall, StringAndCollectionLimits) {
  const json schema = {
      {"type", "object"},
      {"properties",
       {{"s", {{"type", "string"}, {"maxLength", 3}, {"pattern", "^[a-z]+$"}}},
        {"l", {{"type", "array"}, {"maxItems", 1}, {"items", {{"type", "integer"}}}}},
        {"set",
         {{"type", "array"}, {"x-kubernetes-list-type", "set"}, {"items", {{"type", "integer"}}}}},
        {"m",
         {{"type", "object"},
          {"maxProperties", 1},
          {"additionalProperties", {{"type", "string"}}}}}}}};
  EXPECT_EQ(Check(schema, {{"s", "abcd"}}), "spec.s: must be at most 3 characters long, got 4");
  EXPECT_EQ(Check(schema, {{"s", "AB"}}),
            "spec.s: \"AB\" does not match the regular expression \"^[a-z]+$\"");
  EXPECT_EQ(Check(schema, {{"l", json::array({1, 2})}}), "spec.l: must have at most 1 item, got 2");
  EXPECT_EQ(Check(schema, {{"set", json::array({1, 2, 1})}}),
            "spec.set[2]: duplicate value 1 (already at index 0)");
  EXPECT_EQ(Check(schema, {{"m", {{"a", "1"}, {"b", "2"}}}}),
            "spec.m: must have at most 1 field, got 2");
}

TEST(CrdValidatorSmall, ErrorsComeInDocumentOrderWithoutDuplicates) {
  const json schema = {
      {"type", "object"},
      {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "boolean"}}}}}};
  EXPECT_EQ(Check(schema, {{"z", 1}, {"b", "no"}, {"a", "x"}}),
            "spec.a: expected integer, got string \"x\"\n"
            "spec.b: expected boolean, got string \"no\"\n"
            "spec.z: unknown field \"z\"");
}

TEST(CrdValidatorSmall, TheObjectMustBeOfTheCrdsKind) {
  const auto v = CrdValidator::FromCrd(MakeCrd({{"type", "object"}}), "v1");
  EXPECT_EQ(v->Kind(), "Widget");
  json obj = Widget(json::object());
  obj["apiVersion"] = "example.com/v2";
  EXPECT_EQ(JoinErrors(v->Validate(obj)),
            "apiVersion: expected \"example.com/v1\", got string \"example.com/v2\"");
  obj.erase("apiVersion");
  obj.erase("kind");
  EXPECT_EQ(JoinErrors(v->Validate(obj)),
            "apiVersion: missing required field \"apiVersion\" (expected \"example.com/v1\")\n"
            "kind: missing required field \"kind\" (expected \"Widget\")");
  EXPECT_EQ(JoinErrors(v->Validate(json::array())), "expected a Widget object, got array");
}

TEST(CrdValidatorSmall, MetadataIsLeftToTheApiServer) {
  const auto v = CrdValidator::FromCrd(MakeCrd({{"type", "object"}}), "v1");
  json obj = Widget(json::object());
  obj["metadata"] = {{"name", "w"}, {"labels", {{"a", "b"}}}, {"creationTimestamp", nullptr}};
  EXPECT_EQ(JoinErrors(v->Validate(obj)), "");
}

TEST(CrdValidatorSmall, FromCrdExplainsWhatIsMissing) {
  try {
    CrdValidator::FromCrd(MakeCrd({{"type", "object"}}), "v2");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "CRD widgets.example.com has no version \"v2\" (available: v1)");
  }
  EXPECT_THROW(CrdValidator::FromCrd({{"kind", "ConfigMap"}}, "v1"), std::runtime_error);
  EXPECT_THROW(CrdValidator::FromCrd(json::array(), "v1"), std::runtime_error);
  json no_schema = MakeCrd({{"type", "object"}});
  no_schema["spec"]["versions"][0].erase("schema");
  EXPECT_THROW(CrdValidator::FromCrd(no_schema, "v1"), std::runtime_error);
}

TEST(CrdValidatorSmall, FromFileNamesTheFile) {
  const std::string missing = TestdataPath("no-such-crd.yaml");
  try {
    CrdValidator::FromFile(missing, "v1");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  // A readable YAML file that is not a CRD.
  const std::string sample = TestdataPath("kuberay-ray-job.interactive-mode.yaml");
  try {
    CrdValidator::FromFile(sample, "v1");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              sample + ": not a CustomResourceDefinition (kind: \"RayJob\")");
  }
}

// ---------------------------------------------------------------------------------------------
// The real KubeRay CRDs and samples.

TEST(KubeRayCrd, KindsAndVersions) {
  EXPECT_EQ(RayJobs("v1.7.0").Kind(), "RayJob");
  const auto clusters = CrdValidator::FromFile(CrdPath("v1.7.0", "ray.io_rayclusters.yaml"), "v1");
  EXPECT_EQ(clusters->Kind(), "RayCluster");
  // A RayJob is not a RayCluster: one identity error, not hundreds of unknown fields.
  EXPECT_EQ(JoinErrors(clusters->Validate(LoadRayJob("kuberay-ray-job.sample.yaml"))),
            "kind: expected \"RayCluster\", got string \"RayJob\"");
  const auto alpha = CrdValidator::FromFile(CrdPath("v1.7.0", "ray.io_rayjobs.yaml"), "v1alpha1");
  EXPECT_EQ(JoinErrors(alpha->Validate(LoadRayJob("kuberay-ray-job.sample.yaml"))),
            "apiVersion: expected \"ray.io/v1alpha1\", got string \"ray.io/v1\"");
}

class SampleTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SampleTest, ValidatesAgainstV17) {
  EXPECT_EQ(JoinErrors(RayJobs("v1.7.0").Validate(LoadRayJob(GetParam()))), "");
}

TEST_P(SampleTest, V14AcceptsAllButTheV16DeletionRules) {
  const std::string errors = JoinErrors(RayJobs("v1.4.0").Validate(LoadRayJob(GetParam())));
  if (GetParam() == "kuberay-ray-job.deletion-rules.yaml") {
    // deletionStrategy arrived after v1.4.0 (which had deletionPolicy).
    EXPECT_EQ(errors, "spec.deletionStrategy: unknown field \"deletionStrategy\"");
  } else {
    EXPECT_EQ(errors, "");
  }
}

// "kuberay-ray-job.batch-inference.yaml" → "batch_inference".
std::string SampleName(const ::testing::TestParamInfo<std::string>& param) {
  std::string name = param.param.substr(std::string("kuberay-ray-job.").size());
  name = name.substr(0, name.size() - std::string(".yaml").size());
  for (char& c : name) {
    if (c == '-' || c == '.') c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(KubeRaySamples, SampleTest, ::testing::ValuesIn(Samples()), SampleName);

class BrokenRayJob : public ::testing::Test {
 protected:
  json job_ = LoadRayJob("kuberay-ray-job.sample.yaml");
  std::string V17() const { return JoinErrors(RayJobs("v1.7.0").Validate(job_)); }
  std::string V14() const { return JoinErrors(RayJobs("v1.4.0").Validate(job_)); }
};

TEST_F(BrokenRayJob, WrongType) {
  job_["spec"]["backoffLimit"] = "zero";
  EXPECT_EQ(V17(), "spec.backoffLimit: expected integer, got string \"zero\"");
}

TEST_F(BrokenRayJob, UnknownTopLevelSpecField) {
  job_["spec"]["foo"] = "bar";
  EXPECT_EQ(V17(), "spec.foo: unknown field \"foo\"");
}

TEST_F(BrokenRayJob, UnknownFieldInsideAContainer) {
  job_[kHeadContainer]["imagePullPolicyy"] = "Always";
  EXPECT_EQ(V17(),
            "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].imagePullPolicyy: "
            "unknown field \"imagePullPolicyy\" (did you mean \"imagePullPolicy\"?)");
}

TEST_F(BrokenRayJob, WorkerGroupWithoutGroupName) {
  job_[kWorkerGroup].erase("groupName");
  EXPECT_EQ(V17(),
            "spec.rayClusterSpec.workerGroupSpecs[0].groupName: missing required field "
            "\"groupName\"");
  EXPECT_EQ(V14(), V17());
}

TEST_F(BrokenRayJob, DefaultedRequiredFieldsMayBeOmitted) {
  // minReplicas/maxReplicas are required but defaulted: the server fills them in first.
  job_[kWorkerGroup].erase("minReplicas");
  job_[kWorkerGroup].erase("maxReplicas");
  EXPECT_EQ(V17(), "");
}

TEST_F(BrokenRayJob, IntOrStringQuantities) {
  job_[kWorkerLimits]["cpu"] = 1;
  EXPECT_EQ(V17(), "");
  job_[kWorkerLimits]["cpu"] = "1";
  EXPECT_EQ(V17(), "");
  job_[kWorkerLimits]["cpu"] = "500m";
  EXPECT_EQ(V17(), "");
  job_[kWorkerLimits]["cpu"] = 0.5;
  EXPECT_EQ(V17(), std::string(kWorkerLimitsPath) +
                       "[cpu]: expected integer or string, got number 0.5; quote it: \"0.5\"");
  job_[kWorkerLimits]["cpu"] = true;
  EXPECT_EQ(V17(),
            std::string(kWorkerLimitsPath) + "[cpu]: expected integer or string, got boolean true");
  job_[kWorkerLimits]["cpu"] = "one";
  EXPECT_EQ(V17(), std::string(kWorkerLimitsPath) +
                       "[cpu]: \"one\" is not a quantity (e.g. \"2\", \"500m\", \"4Gi\")");
}

TEST_F(BrokenRayJob, Int32Overflow) {
  job_[kWorkerGroup]["replicas"] = int64_t{3'000'000'000};
  EXPECT_EQ(V17(),
            "spec.rayClusterSpec.workerGroupSpecs[0].replicas: must be at most 2147483647 "
            "(int32), got 3000000000");
  job_[kWorkerGroup]["replicas"] = std::numeric_limits<int32_t>::max();
  job_[kWorkerGroup]["maxReplicas"] = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(V17(), "");
}

TEST_F(BrokenRayJob, Nullable) {
  // status.rayClusterStatus.lastUpdateTime is the CRD's one nullable field (a date-time).
  job_["status"]["rayClusterStatus"]["lastUpdateTime"] = nullptr;
  EXPECT_EQ(V17(), "");
  job_["status"]["rayClusterStatus"]["lastUpdateTime"] = "2025-01-02T03:04:05Z";
  EXPECT_EQ(V17(), "");
  job_["status"]["rayClusterStatus"]["lastUpdateTime"] = 5;
  EXPECT_EQ(V17(),
            "status.rayClusterStatus.lastUpdateTime: expected string or null, got integer 5");
  job_["status"]["rayClusterStatus"]["lastUpdateTime"] = "yesterday";
  EXPECT_EQ(V17(),
            "status.rayClusterStatus.lastUpdateTime: \"yesterday\" is not an RFC 3339 "
            "date-time (e.g. \"2024-05-01T12:00:00Z\")");
  // Not nullable: the API server drops the null (and defaults backoffLimit to 0).
  job_["status"].erase("rayClusterStatus");
  job_["spec"]["backoffLimit"] = nullptr;
  EXPECT_EQ(V17(), "");
}

TEST_F(BrokenRayJob, EnumViolation) {
  job_["spec"]["shutdownAfterJobFinishes"] = false;
  job_["spec"]["deletionStrategy"] = {
      {"deletionRules",
       json::array({{{"condition", {{"jobStatus", "FAILED"}}}, {"policy", "DeleteEverything"}}})}};
  EXPECT_EQ(V17(),
            "spec.deletionStrategy.deletionRules[0].policy: unsupported value "
            "\"DeleteEverything\": must be one of \"DeleteCluster\", \"DeleteWorkers\", "
            "\"DeleteSelf\", \"DeleteNone\"");
  job_["spec"]["deletionStrategy"]["deletionRules"][0]["policy"] = "DeleteCluster";
  EXPECT_EQ(V17(), "");
  job_["spec"]["deletionStrategy"]["deletionRules"] = json::array();
  EXPECT_EQ(V17(), "spec.deletionStrategy.deletionRules: must have at least 1 item, got 0");
}

TEST_F(BrokenRayJob, V16FieldsAreUnknownToV14) {
  job_["spec"]["preRunningDeadlineSeconds"] = 600;
  EXPECT_EQ(V17(), "");
  EXPECT_EQ(V14(), "spec.preRunningDeadlineSeconds: unknown field \"preRunningDeadlineSeconds\"");
  job_["spec"]["preRunningDeadlineSeconds"] = 0;
  EXPECT_EQ(V17(), "spec.preRunningDeadlineSeconds: must be at least 1, got 0");
}

TEST_F(BrokenRayJob, DuplicateListMapKeys) {
  json& containers =
      job_["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"];
  containers.push_back(containers[0]);
  EXPECT_EQ(V17(),
            "spec.rayClusterSpec.headGroupSpec.template.spec.containers[1]: duplicate entry "
            "name=\"ray-head\" (same as index 0); entries must be unique by name");
  containers.erase(1);
  // protocol defaults to TCP, so these two ports are the same key.
  containers[0]["ports"].push_back({{"containerPort", 6379}, {"protocol", "TCP"}});
  EXPECT_EQ(V17(),
            "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].ports[3]: duplicate "
            "entry containerPort=6379, protocol=\"TCP\" (same as index 0); entries must be unique "
            "by the combination of containerPort and protocol");
  containers[0]["ports"][3]["protocol"] = "UDP";
  EXPECT_EQ(V17(), "");
}

TEST_F(BrokenRayJob, OneMistakeOneErrorEvenDeepDown) {
  job_[kHeadContainer]["resources"] = "lots";
  EXPECT_EQ(V17(),
            "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].resources: "
            "expected object, got string \"lots\"");
  job_ = LoadRayJob("kuberay-ray-job.sample.yaml");
  job_["spec"]["rayClusterSpec"]["workerGroupSpecs"] = {{"groupName", "g"}};
  EXPECT_EQ(V17(), "spec.rayClusterSpec.workerGroupSpecs: expected array, got object");
}

TEST_F(BrokenRayJob, SeveralMistakesAreAllReported) {
  job_["spec"]["suspend"] = "yes";
  job_["spec"]["foo"] = 1;
  job_[kWorkerGroup].erase("groupName");
  EXPECT_EQ(V17(),
            "spec.foo: unknown field \"foo\"\n"
            "spec.rayClusterSpec.workerGroupSpecs[0].groupName: missing required field "
            "\"groupName\"\n"
            "spec.suspend: expected boolean, got string \"yes\"");
}

}  // namespace
}  // namespace starforge::kube
