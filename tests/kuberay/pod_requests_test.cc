// fleet::KubeRayPodRequests, what a kuberay job's page shows it asks for (GET /api/v1/jobs/{id},
// resources.pods), is the RayJob's own shape: the same groups, replicas and container requests
// as kuberay::Render puts in the RayJob it creates.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "starforge/fleet/job_resources.h"
#include "starforge/kuberay/constants.h"
#include "starforge/kuberay/render.h"
#include "test_support.h"

namespace starforge::kuberay {
namespace {

using nlohmann::json;
using testing::ConfigFrom;
using testing::JobFrom;

const char* kTwoPool = R"(
name: grpo
image: img:1
entrypoint: python train.py
pools:
  - {name: train, gpuSeries: h200, machines: 3, gpusPerMachine: 8, cpusPerMachine: 32, memoryPerMachine: 256Gi}
  - {name: rollout, gpuSeries: h100, machines: 4, gpusPerMachine: 2}
)";

// {group, pods, requests} of each pod group of a rendered RayJob, in PodRequests' terms.
json GroupsOf(const json& rayjob) {
  json out = json::array();
  auto add = [&](const std::string& group, int64_t pods, const json& tmpl) {
    json requests = {{"gpus", 0}};
    const json& c = tmpl["spec"]["containers"][0];
    if (c.contains("resources")) {
      for (const auto& [k, v] : c["resources"]["requests"].items()) {
        if (k == kGpuResource)
          requests["gpus"] = std::stoi(v.get<std::string>());
        else
          requests[k] = v;
      }
      EXPECT_EQ(c["resources"]["requests"], c["resources"]["limits"]);
    }
    out.push_back({{"group", group}, {"pods", pods}, {"requests", requests}});
  };
  const json& cluster = rayjob["spec"]["rayClusterSpec"];
  add("head", 1, cluster["headGroupSpec"]["template"]);
  for (const auto& g : cluster.value("workerGroupSpecs", json::array()))
    add(g["groupName"], g["replicas"], g["template"]);
  return out;
}

json WithoutPool(json groups) {
  for (auto& g : groups)
    g.erase("pool");
  return groups;
}

TEST(PodRequests, AreTheRenderedRayJobsGroupsReplicasAndRequests) {
  const config::Config cfg = ConfigFrom({});
  const jobspec::JobSpec spec = JobFrom(kTwoPool, cfg);
  const json pods = fleet::KubeRayPodRequests(spec, cfg);
  EXPECT_EQ(pods, json::parse(R"([
    {"group": "head", "pool": "train", "pods": 1, "requests": {"cpu": "32", "memory": "256Gi", "gpus": 8}},
    {"group": "train", "pool": "train", "pods": 2, "requests": {"cpu": "32", "memory": "256Gi", "gpus": 8}},
    {"group": "rollout", "pool": "rollout", "pods": 4, "requests": {"gpus": 2}}
  ])"));
  const RenderResult r =
      Render(spec, "j-1", {"https://s3.example.com/b/c.zip", std::string(64, 'a')}, cfg);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(WithoutPool(pods), GroupsOf(r.rayjob));
}

TEST(PodRequests, WithoutGpuPassthroughThePodsAskForNoGpus) {
  const config::Config cfg = ConfigFrom({{"FORGE_K8S_GPU_PASSTHROUGH", "false"}});
  const jobspec::JobSpec spec = JobFrom(kTwoPool, cfg);
  const json pods = fleet::KubeRayPodRequests(spec, cfg);
  ASSERT_EQ(pods.size(), 3u);
  for (const json& g : pods)
    EXPECT_EQ(g["requests"]["gpus"], 0) << g.dump();
  const RenderResult r =
      Render(spec, "j-1", {"https://s3.example.com/b/c.zip", std::string(64, 'a')}, cfg);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(WithoutPool(pods), GroupsOf(r.rayjob));
}

TEST(PodRequests, OneMachineIsTheHeadAlone) {
  const config::Config cfg = ConfigFrom({});
  const json pods = fleet::KubeRayPodRequests(
      JobFrom(
          "name: one\nimage: i\nentrypoint: [python]\npools: [{name: main, cpusPerMachine: 2}]\n",
          cfg),
      cfg);
  EXPECT_EQ(
      pods,
      json::parse(
          R"([{"group": "head", "pool": "main", "pods": 1, "requests": {"cpu": "2", "gpus": 0}}])"));
}

}  // namespace
}  // namespace starforge::kuberay
