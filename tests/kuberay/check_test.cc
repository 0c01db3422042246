// CheckRayJob reproduces the operator's own validation (docs/upstream-facts.md §1.2) with its
// wording.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "starforge/kuberay/render.h"

namespace starforge::kuberay {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json ValidRayJob() {
  json container = {{"name", "ray-head"},
                    {"image", "img"},
                    {"ports", {{{"name", "dashboard"}, {"containerPort", 8265}}}}};
  json worker = {{"name", "ray-worker"}, {"image", "img"}};
  return {{"apiVersion", "ray.io/v1"},
          {"kind", "RayJob"},
          {"metadata", {{"name", "sf-j-1"}}},
          {"spec",
           {{"entrypoint", "python3 x.py"},
            {"shutdownAfterJobFinishes", true},
            {"ttlSecondsAfterFinished", 600},
            {"backoffLimit", 0},
            {"runtimeEnvYAML", "working_dir: https://x/y.zip\n"},
            {"rayClusterSpec",
             {{"headGroupSpec",
               {{"rayStartParams", json::object()},
                {"template", {{"spec", {{"containers", {container}}}}}}}},
              {"workerGroupSpecs",
               {{{"groupName", "w"},
                 {"replicas", 1},
                 {"minReplicas", 1},
                 {"maxReplicas", 1},
                 {"rayStartParams", json::object()},
                 {"template", {{"spec", {{"containers", {worker}}}}}}}}}}}}}};
}

std::string Check(const json& rj, const json& runtime_env = {{"working_dir", "https://x/y.zip"}}) {
  return JoinErrors(CheckRayJob(rj, runtime_env));
}

TEST(CheckRayJob, AcceptsAValidRayJob) {
  EXPECT_EQ(Check(ValidRayJob()), "");
}

TEST(CheckRayJob, NameLengthAndSyntax) {
  json rj = ValidRayJob();
  rj["metadata"]["name"] = std::string(48, 'a');
  EXPECT_EQ(Check(rj),
            "metadata.name: The RayJob metadata is invalid: RayJob name should be no more than 47 "
            "characters");
  rj["metadata"]["name"] = "1abc";
  EXPECT_THAT(Check(rj), HasSubstr("RayJob name should be a valid DNS1035 label"));
}

TEST(CheckRayJob, TtlAndShutdownRules) {
  json rj = ValidRayJob();
  rj["spec"]["shutdownAfterJobFinishes"] = false;
  EXPECT_EQ(Check(rj),
            "spec.ttlSecondsAfterFinished: The RayJob spec is invalid: a RayJob with "
            "shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished");
  rj["spec"]["ttlSecondsAfterFinished"] = 0;
  rj["spec"]["suspend"] = true;
  EXPECT_THAT(Check(rj), HasSubstr("is not allowed to be suspended"));
  rj = ValidRayJob();
  rj["spec"]["ttlSecondsAfterFinished"] = -1;
  EXPECT_THAT(Check(rj), HasSubstr("TTLSecondsAfterFinished must be a non-negative integer"));
}

TEST(CheckRayJob, DeadlinesAndBackoff) {
  json rj = ValidRayJob();
  rj["spec"]["activeDeadlineSeconds"] = 0;
  rj["spec"]["backoffLimit"] = -1;
  EXPECT_EQ(Check(rj),
            "spec.activeDeadlineSeconds: The RayJob spec is invalid: activeDeadlineSeconds must "
            "be a positive integer\n"
            "spec.backoffLimit: The RayJob spec is invalid: backoffLimit must be a positive "
            "integer");
}

TEST(CheckRayJob, ClusterSpecRules) {
  json rj = ValidRayJob();
  rj["spec"].erase("rayClusterSpec");
  EXPECT_THAT(Check(rj), HasSubstr("one of RayClusterSpec or ClusterSelector must be set"));

  rj = ValidRayJob();
  rj["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"] = json::array();
  EXPECT_THAT(Check(rj), HasSubstr("headGroupSpec should have at least one container"));

  rj = ValidRayJob();
  auto& group = rj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0];
  group["minReplicas"] = 3;
  EXPECT_THAT(Check(rj), HasSubstr("minReplicas must not be greater than maxReplicas"));
  group.erase("maxReplicas");
  EXPECT_THAT(Check(rj), HasSubstr("minReplicas and maxReplicas are required"));

  rj = ValidRayJob();
  auto& g2 = rj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0];
  g2["resources"] = {{"GPU", "1"}};
  g2["rayStartParams"]["num-gpus"] = "1";
  EXPECT_THAT(Check(rj), HasSubstr("rayStartParams['num-gpus'] cannot be used together"));
}

// Checked on the value runtimeEnvYAML is emitted from, which the operator reads back as a map.
TEST(CheckRayJob, RuntimeEnvMustBeAMap) {
  EXPECT_THAT(Check(ValidRayJob(), json::array({"a", "b"})),
              HasSubstr("spec.runtimeEnvYAML: failed to unmarshal RuntimeEnvYAML"));
  EXPECT_THAT(Check(ValidRayJob(), "working_dir"), HasSubstr("failed to unmarshal RuntimeEnvYAML"));
}

TEST(CheckRayJob, HeadPortsWithoutDashboardWouldHangForever) {
  json rj = ValidRayJob();
  rj["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = {
      {{"name", "gcs"}, {"containerPort", 6379}}};
  EXPECT_THAT(Check(rj), HasSubstr("none is named \"dashboard\""));
}

TEST(CheckRayJob, UnknownSubmissionMode) {
  json rj = ValidRayJob();
  rj["spec"]["submissionMode"] = "K8sJob";
  EXPECT_THAT(Check(rj), HasSubstr("unknown submission mode \"K8sJob\""));
}

}  // namespace
}  // namespace starforge::kuberay
