// ComputeCapacity / CheckFits: GPU accounting per card series the way the scheduler and
// `kubectl describe node` count it (docs/kuberay-fleet.md, "Capacity arithmetic").
#include "starforge/kuberay/capacity.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace starforge::kuberay {
namespace {

using nlohmann::json;

const std::string kLabel = "starforge/gpu-series";

json Node(const std::string& name, const std::string& series, int gpus,
          const json& extra = json::object()) {
  json labels = {{"kubernetes.io/hostname", name}};
  if (!series.empty()) labels[kLabel] = series;
  json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", name}, {"labels", labels}}},
      {"spec", json::object()},
      {"status",
       {{"capacity", {{"cpu", "96"}, {"memory", "1Ti"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
        {"allocatable",
         {{"cpu", "95500m"}, {"memory", "1000Gi"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
        {"conditions",
         {{{"type", "MemoryPressure"},
           {"status", "False"},
           {"reason", "KubeletHasSufficientMemory"}},
          {{"type", "Ready"},
           {"status", "True"},
           {"reason", "KubeletReady"},
           {"message", "kubelet is posting ready status"}}}}}}};
  node.merge_patch(extra);
  return node;
}

json Container(const std::string& name, int gpus, bool limits_only = false) {
  json c = {{"name", name}, {"image", "img:1"}};
  if (gpus > 0) {
    c["resources"]["limits"] = {{"nvidia.com/gpu", std::to_string(gpus)}};
    if (!limits_only) c["resources"]["requests"] = {{"nvidia.com/gpu", std::to_string(gpus)}};
  }
  return c;
}

json Pod(const std::string& name, const std::string& node, int gpus,
         const std::string& phase = "Running", const std::string& ns = "starforge") {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", ns}}},
              {"spec", {{"containers", {Container("main", gpus)}}}},
              {"status", {{"phase", phase}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

const SeriesCapacity& Find(const std::vector<SeriesCapacity>& c, const std::string& series) {
  for (const auto& s : c) {
    if (s.series == series) return s;
  }
  throw std::runtime_error("no series " + series);
}

TEST(PodGpuRequest, CountsLikeTheScheduler) {
  struct Case {
    const char* name;
    json spec;
    int64_t want;
  };
  json side = Container("side", 1);
  side["restartPolicy"] = "Always";
  const std::vector<Case> cases = {
      {"one container", {{"containers", {Container("a", 8)}}}, 8},
      {"limits only (requests default to limits)", {{"containers", {Container("a", 4, true)}}}, 4},
      {"two containers add", {{"containers", {Container("a", 2), Container("b", 3)}}}, 5},
      {"no GPUs", {{"containers", {Container("a", 0)}}}, 0},
      // An init container needing more than the main containers sets the pod's request.
      {"init container max",
       {{"containers", {Container("a", 2)}}, {"initContainers", {Container("i", 4)}}},
       4},
      {"init container smaller",
       {{"containers", {Container("a", 8)}}, {"initContainers", {Container("i", 1)}}},
       8},
      // A sidecar (restartPolicy Always) adds to the main containers and to later inits.
      // main phase 2 + 1; the init container runs next to the sidecar: 2 + 1.
      {"sidecar",
       {{"containers", {Container("a", 2)}}, {"initContainers", {side, Container("i", 2)}}},
       3},
      {"overhead",
       {{"containers", {Container("a", 2)}}, {"overhead", {{"nvidia.com/gpu", "1"}}}},
       3},
      {"quantity with suffix",
       {{"containers", {{{"name", "a"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1k"}}}}}}}}},
       1000},
  };
  for (const auto& c : cases) {
    json pod = {{"spec", c.spec}};
    EXPECT_EQ(PodGpuRequest(pod), c.want) << c.name;
  }
}

TEST(PodGpuRequest, SidecarBeforeLargeInit) {
  json side = Container("side", 2);
  side["restartPolicy"] = "Always";
  json pod = {
      {"spec",
       {{"containers", {Container("a", 1)}}, {"initContainers", {side, Container("i", 4)}}}}};
  // Main phase: 1 + 2 = 3. The init container runs next to the sidecar: 4 + 2 = 6.
  EXPECT_EQ(PodGpuRequest(pod), 6);
}

TEST(ComputeCapacity, GroupsBySeriesAndCountsRequests) {
  const std::vector<json> nodes = {Node("gpu-a1", "h200", 8), Node("gpu-a2", "h200", 8),
                                   Node("gpu-b1", "h100", 4), Node("cpu-1", "", 0)};
  const std::vector<json> pods = {
      Pod("train-head", "gpu-a1", 8),
      Pod("other-team", "gpu-a2", 3, "Running", "research"),  // any namespace counts
      Pod("done", "gpu-a2", 4, "Succeeded"),                  // terminal: not counted
      Pod("failed", "gpu-a2", 4, "Failed"),
      Pod("pending-bound", "gpu-b1", 1, "Pending"),  // bound, not started: counted
      Pod("unbound", "", 8, "Pending"),              // not bound: not counted
      Pod("elsewhere", "gone-node", 8),              // node not listed: ignored
  };
  const auto cap = ComputeCapacity(nodes, pods, kLabel);
  ASSERT_EQ(cap.size(), 3u);
  EXPECT_EQ(cap[0].series, "h100");  // sorted, unlabelled last
  EXPECT_EQ(cap[1].series, "h200");
  EXPECT_EQ(cap[2].series, "");

  const SeriesCapacity& h200 = Find(cap, "h200");
  EXPECT_EQ(h200.nodes, 2);
  EXPECT_EQ(h200.gpu_capacity, 16);
  EXPECT_EQ(h200.gpu_allocatable, 16);
  EXPECT_EQ(h200.gpu_requested, 11);
  EXPECT_EQ(h200.gpu_free, 5);
  EXPECT_EQ(h200.blocked_nodes, 0);
  EXPECT_EQ(h200.max_node_allocatable, 8);
  ASSERT_EQ(h200.node_detail.size(), 2u);
  EXPECT_EQ(h200.node_detail[0].name, "gpu-a1");
  EXPECT_EQ(h200.node_detail[0].gpu_free, 0);
  EXPECT_EQ(h200.node_detail[0].pods, 1);
  EXPECT_EQ(h200.node_detail[1].gpu_requested, 3);
  EXPECT_EQ(h200.node_detail[1].pods, 1);

  const SeriesCapacity& h100 = Find(cap, "h100");
  EXPECT_EQ(h100.gpu_requested, 1);
  EXPECT_EQ(h100.gpu_free, 3);

  const SeriesCapacity& cpu = Find(cap, "");
  EXPECT_EQ(cpu.nodes, 1);
  EXPECT_EQ(cpu.gpu_allocatable, 0);
}

TEST(ComputeCapacity, BlockedNodesSayWhy) {
  json cordoned = Node("a-cordoned", "h200", 8,
                       {{"spec",
                         {{"unschedulable", true},
                          {"taints",
                           {{{"key", "node.kubernetes.io/unschedulable"},
                             {"effect", "NoSchedule"},
                             {"timeAdded", "2026-03-01T09:00:00Z"}}}}}}});
  json not_ready = Node("b-notready", "h200", 8);
  not_ready["status"]["conditions"][1] = {{"type", "Ready"},
                                          {"status", "Unknown"},
                                          {"reason", "NodeStatusUnknown"},
                                          {"message", "Kubelet stopped posting node status."}};
  not_ready["spec"]["taints"] = {
      {{"key", "node.kubernetes.io/unreachable"}, {"effect", "NoExecute"}},
      {{"key", "node.kubernetes.io/unreachable"}, {"effect", "NoSchedule"}}};
  json tainted =
      Node("c-tainted", "h200", 8,
           {{"spec",
             {{"taints",
               {{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}},
                {{"key", "dedicated"}, {"value", "infra"}, {"effect", "NoSchedule"}},
                {{"key", "soft"}, {"effect", "PreferNoSchedule"}},
                {{"key", "drain"}, {"effect", "NoExecute"}}}}}}});
  json gpu_taint_only =
      Node("d-gpu-taint", "h200", 8,
           {{"spec", {{"taints", {{{"key", "nvidia.com/gpu"}, {"effect", "NoSchedule"}}}}}}});
  json gpu_noexecute =
      Node("e-gpu-noexec", "h200", 8,
           {{"spec", {{"taints", {{{"key", "nvidia.com/gpu"}, {"effect", "NoExecute"}}}}}}});
  const auto cap = ComputeCapacity({cordoned, not_ready, tainted, gpu_taint_only, gpu_noexecute},
                                   {Pod("x", "a-cordoned", 2)}, kLabel);
  ASSERT_EQ(cap.size(), 1u);
  const SeriesCapacity& s = cap[0];
  EXPECT_EQ(s.nodes, 5);
  EXPECT_EQ(s.blocked_nodes, 4);
  EXPECT_EQ(s.gpu_free, 8);  // only d-gpu-taint accepts pods
  EXPECT_EQ(s.gpu_requested, 2);
  using V = std::vector<std::string>;
  EXPECT_EQ(s.node_detail[0].blocked, V{"cordoned"});
  EXPECT_EQ(s.node_detail[0].gpu_free, 6);  // free but blocked: shown per node
  EXPECT_EQ(s.node_detail[1].blocked, V{"NotReady (NodeStatusUnknown)"});
  EXPECT_EQ(s.node_detail[2].blocked,
            (V{"taint dedicated=infra:NoSchedule", "taint drain:NoExecute"}));
  EXPECT_TRUE(s.node_detail[3].Schedulable());
  EXPECT_EQ(s.node_detail[4].blocked, V{"taint nvidia.com/gpu:NoExecute"});
}

// The sums a watch keeps pod by pod (bind, finish, move, delete) give what a full recount gives,
// also from pods cut down by TrimPodForCapacity.
TEST(NodeUsageSums, FollowPodEventsLikeARecount) {
  const std::vector<json> nodes = {Node("a", "h200", 8), Node("b", "h200", 8)};
  NodeUsageSums sums;
  auto same_as_recount = [&](const std::vector<json>& pods) {
    NodeUsageSums trimmed;
    for (const json& p : pods) {
      const json t = TrimPodForCapacity(p);
      trimmed.Update(nullptr, &t);
    }
    EXPECT_EQ(trimmed.by_node(), sums.by_node());
    const auto full = ComputeCapacity(nodes, pods, kLabel);
    const auto kept = ComputeCapacityFromUsage(nodes, sums.by_node(), kLabel);
    ASSERT_EQ(full.size(), kept.size());
    for (size_t i = 0; i < full.size(); ++i) {
      EXPECT_EQ(full[i].gpu_requested, kept[i].gpu_requested);
      EXPECT_EQ(full[i].gpu_free, kept[i].gpu_free);
      ASSERT_EQ(full[i].node_detail.size(), kept[i].node_detail.size());
      for (size_t n = 0; n < full[i].node_detail.size(); ++n)
        EXPECT_EQ(full[i].node_detail[n].pods, kept[i].node_detail[n].pods);
    }
  };
  const json unbound = Pod("p", "", 2, "Pending");
  sums.Update(nullptr, &unbound);
  same_as_recount({unbound});
  const json bound = Pod("p", "a", 2, "Pending");
  sums.Update(&unbound, &bound);
  const json other = Pod("q", "a", 4);
  sums.Update(nullptr, &other);
  same_as_recount({bound, other});
  EXPECT_EQ(sums.by_node().at("a"), (NodeUsage{2, 6}));
  const json done = Pod("q", "a", 4, "Succeeded");
  sums.Update(&other, &done);
  same_as_recount({bound, done});
  sums.Update(&done, nullptr);
  sums.Update(&bound, nullptr);
  same_as_recount({});
  EXPECT_TRUE(sums.by_node().empty()) << "a node whose pods all left is dropped";
}

TEST(ComputeCapacity, RequestedBeyondAllocatableIsZeroFree) {
  json node = Node("n", "h100", 4);
  node["status"]["allocatable"]["nvidia.com/gpu"] = "3";  // one GPU unhealthy
  const auto cap = ComputeCapacity({node}, {Pod("a", "n", 4)}, kLabel);
  EXPECT_EQ(cap[0].gpu_capacity, 4);
  EXPECT_EQ(cap[0].gpu_allocatable, 3);
  EXPECT_EQ(cap[0].gpu_requested, 4);
  EXPECT_EQ(cap[0].gpu_free, 0);
  EXPECT_EQ(cap[0].max_node_allocatable, 3);
}

TEST(ComputeCapacity, NodesWithoutGpusOrStatus) {
  json bare = {{"metadata", {{"name", "bare"}}}};
  const auto cap = ComputeCapacity({bare}, {}, kLabel);
  ASSERT_EQ(cap.size(), 1u);
  EXPECT_EQ(cap[0].series, "");
  EXPECT_EQ(cap[0].gpu_allocatable, 0);
  EXPECT_TRUE(cap[0].node_detail[0].Schedulable());  // no Ready condition: not judged
}

TEST(ComputeCapacity, ToJsonShape) {
  json cordoned = Node("b", "h200", 8, {{"spec", {{"unschedulable", true}}}});
  const auto cap = ComputeCapacity({Node("a", "h200", 8), cordoned}, {Pod("p", "a", 4)}, kLabel);
  const json got = ToJson(cap, kLabel);
  const json want = json::parse(R"({
    "gpuNodeLabel": "starforge/gpu-series",
    "series": [{
      "series": "h200", "nodes": 2, "blockedNodes": 1, "maxGpusPerNode": 8,
      "gpus": {"capacity": 16, "allocatable": 16, "requested": 4, "free": 4},
      "nodeDetail": [
        {"name": "a", "gpus": {"capacity": 8, "allocatable": 8, "requested": 4, "free": 4},
         "pods": 1, "schedulable": true, "blocked": []},
        {"name": "b", "gpus": {"capacity": 8, "allocatable": 8, "requested": 0, "free": 8},
         "pods": 0, "schedulable": false, "blocked": ["cordoned"]}
      ]
    }]
  })");
  EXPECT_EQ(got, want) << got.dump(2);
}

// ---- CheckFits ----

std::vector<SeriesCapacity> Cluster() {
  return ComputeCapacity(
      {Node("h200-1", "h200", 8), Node("h200-2", "h200", 8),
       Node("h200-3", "h200", 8, {{"spec", {{"unschedulable", true}}}}), Node("h100-1", "h100", 4),
       Node("h100-2", "h100", 4), Node("cpu-1", "", 0)},
      {Pod("busy", "h200-1", 8)}, kLabel);
}

struct FitCase {
  const char* name;
  const char* job;
  bool possible;
  const char* field;
  const char* message;
};

class CheckFitsTest : public ::testing::TestWithParam<FitCase> {};

TEST_P(CheckFitsTest, Decides) {
  const FitCase& c = GetParam();
  const FitCheck r = CheckFits(testing::JobFrom(c.job), Cluster(), true);
  EXPECT_EQ(r.possible, c.possible);
  EXPECT_EQ(r.field, c.field);
  EXPECT_EQ(r.message, c.message);
}

INSTANTIATE_TEST_SUITE_P(
    Pools, CheckFitsTest,
    ::testing::Values(
        // Busy or cordoned nodes still count: the job only has to wait.
        FitCase{"FitsWhenBusy", R"(
name: a
image: img:1
entrypoint: python x.py
pools: [{name: train, gpuSeries: h200, machines: 3, gpusPerMachine: 8}]
)",
                true, "", ""},
        FitCase{"CpuPoolNotChecked", R"(
name: a
image: img:1
entrypoint: python x.py
pools: [{name: main}]
)",
                true, "", ""},
        FitCase{"TooManyGpusPerMachine", R"(
name: a
image: img:1
entrypoint: python x.py
pools: [{name: train, gpuSeries: h100, machines: 1, gpusPerMachine: 8}]
)",
                false, "pools[0].gpusPerMachine",
                "pool train asks for 8 GPUs per machine of series h100; nodes of h100 have at "
                "most 4 (2 nodes); series that exist: h100 (2 nodes, 4 GPUs each), h200 (3 "
                "nodes, 8 GPUs each)"},
        FitCase{"NoSuchSeries", R"(
name: a
image: img:1
entrypoint: python x.py
pools:
  - {name: train, gpuSeries: h200, machines: 1, gpusPerMachine: 8}
  - {name: rollout, gpuSeries: b200, machines: 2, gpusPerMachine: 8}
)",
                false, "pools[1].gpuSeries",
                "pool rollout asks for machines of series b200, but no node of series b200 "
                "exists; series that exist: h100 (2 nodes, 4 GPUs each), h200 (3 nodes, 8 GPUs "
                "each)"},
        FitCase{"SeriesWithoutGpusStillMustExist", R"(
name: a
image: img:1
entrypoint: python x.py
pools: [{name: prep, gpuSeries: a10}]
)",
                false, "pools[0].gpuSeries",
                "pool prep asks for machines of series a10, but no node of series a10 exists; "
                "series that exist: h100 (2 nodes, 4 GPUs each), h200 (3 nodes, 8 GPUs each)"},
        FitCase{"EveryProblemListed", R"(
name: a
image: img:1
entrypoint: python x.py
pools:
  - {name: train, gpuSeries: h100, gpusPerMachine: 16}
  - {name: rollout, gpuSeries: b200, gpusPerMachine: 1}
)",
                false, "pools[0].gpusPerMachine",
                "pool train asks for 16 GPUs per machine of series h100; nodes of h100 have at "
                "most 4 (2 nodes); pool rollout asks for machines of series b200, but no node of "
                "series b200 exists; series that exist: h100 (2 nodes, 4 GPUs each), h200 (3 "
                "nodes, 8 GPUs each)"}),
    [](const ::testing::TestParamInfo<FitCase>& p) { return p.param.name; });

TEST(CheckFits, EmptyClusterAndMixedSizes) {
  const auto job = testing::JobFrom(R"(
name: a
image: img:1
entrypoint: python x.py
pools: [{name: train, gpuSeries: h200, gpusPerMachine: 8}]
)");
  EXPECT_EQ(CheckFits(job, {}, true).message,
            "pool train asks for machines of series h200, but no node of series h200 exists; "
            "series that exist: none");
  json small = Node("h200-small", "h200", 4);
  const auto cap =
      ComputeCapacity({Node("h200-big", "h200", 8), small, Node("x", "l4", 1)}, {}, kLabel);
  EXPECT_TRUE(CheckFits(job, cap, true).possible);
  const auto job16 = testing::JobFrom(R"(
name: a
image: img:1
entrypoint: python x.py
pools: [{name: train, gpuSeries: h200, gpusPerMachine: 16}]
)");
  EXPECT_EQ(CheckFits(job16, cap, true).message,
            "pool train asks for 16 GPUs per machine of series h200; nodes of h200 have at most 8 "
            "(2 nodes); series that exist: h200 (2 nodes, 4-8 GPUs), l4 (1 node, 1 GPU)");
}

// FORGE_K8S_GPU_PASSTHROUGH=0 (a kind cluster without GPUs): pods request no GPUs, so nodes that
// advertise none still take GPU pools of their series; a series that does not exist still rejects.
TEST(CheckFits, WithoutGpuPassthroughOnlyTheSeriesMustExist) {
  const auto job = testing::JobFrom(R"(
name: a
image: img:1
entrypoint: python x.py
pools: [{name: train, gpuSeries: h200, machines: 2, gpusPerMachine: 8}]
)");
  const auto cap = ComputeCapacity({Node("kind-worker", "h200", 0)}, {}, kLabel);
  EXPECT_FALSE(CheckFits(job, cap, true).possible);
  const FitCheck r = CheckFits(job, cap, false);
  EXPECT_TRUE(r.possible) << r.message;
  const auto other = ComputeCapacity({Node("kind-worker", "h100", 0)}, {}, kLabel);
  EXPECT_EQ(CheckFits(job, other, false).field, "pools[0].gpuSeries");
}

}  // namespace
}  // namespace starforge::kuberay
