// GPU capacity per card series from nodes and pods, and whether a job could ever fit. Pure.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/jobspec/jobspec.h"

namespace starforge::kuberay {

struct NodeCapacity {
  std::string name;
  std::string series;                // value of the GPU node label; "" = unlabelled
  int64_t gpu_capacity = 0;          // status.capacity["nvidia.com/gpu"]
  int64_t gpu_allocatable = 0;       // status.allocatable["nvidia.com/gpu"]
  int64_t gpu_requested = 0;         // by non-terminal pods bound to the node (kubectl's sum)
  int64_t gpu_free = 0;              // max(0, allocatable - requested)
  int64_t pods = 0;                  // non-terminal pods bound to the node
  std::vector<std::string> blocked;  // why new pods cannot land: "cordoned", "NotReady
                                     // (KubeletNotReady)", "taint dedicated=infra:NoSchedule";
                                     // empty = schedulable
  bool Schedulable() const { return blocked.empty(); }
};

struct SeriesCapacity {
  std::string series;  // "" = nodes without the label
  int64_t nodes = 0;
  int64_t gpu_capacity = 0;
  int64_t gpu_allocatable = 0;
  int64_t gpu_requested = 0;
  int64_t gpu_free = 0;  // free on schedulable nodes only (what a new job can get)
  int64_t blocked_nodes = 0;
  int64_t max_node_allocatable = 0;       // the largest allocatable of any node (blocked or not)
  std::vector<NodeCapacity> node_detail;  // sorted by name
};

// Groups `nodes` (core/v1 Node objects) by the value of label `gpu_label` and counts the GPU
// requests of `pods` (core/v1 Pods, any namespace) bound to them (spec.nodeName), skipping
// Succeeded/Failed pods; init containers count as the scheduler counts them. Series sorted by
// name, the unlabelled group ("") last.
std::vector<SeriesCapacity> ComputeCapacity(const std::vector<nlohmann::json>& nodes,
                                            const std::vector<nlohmann::json>& pods,
                                            const std::string& gpu_label);

// What the non-terminal pods bound to one node request: the sums ComputeCapacity needs of them.
struct NodeUsage {
  int64_t pods = 0;
  int64_t gpu_requested = 0;
  friend bool operator==(const NodeUsage&, const NodeUsage&) = default;
};

// The pods' NodeUsage per node (spec.nodeName), kept up to date pod by pod from watch events, so
// that capacity and the Unschedulable diagnosis need no copy of every pod. Not thread-safe.
class NodeUsageSums {
 public:
  // Replaces the contribution of `before` (null = none) with that of `now` (null = gone).
  void Update(const nlohmann::json* before, const nlohmann::json* now);
  const std::map<std::string, NodeUsage>& by_node() const { return by_node_; }

 private:
  std::map<std::string, NodeUsage> by_node_;  // nodes with no pod are absent
};

// ComputeCapacity from per-node sums instead of the pods themselves.
std::vector<SeriesCapacity> ComputeCapacityFromUsage(const std::vector<nlohmann::json>& nodes,
                                                     const std::map<std::string, NodeUsage>& usage,
                                                     const std::string& gpu_label);

// A pod cut to what NodeUsageSums and ComputeCapacity read of it (metadata's namespace, name,
// uid and resourceVersion, spec.nodeName, status.phase, and the pod's GPU request as one
// container's request): an informer's transform for a cache of every pod in the cluster.
nlohmann::json TrimPodForCapacity(const nlohmann::json& pod);

// {"gpuNodeLabel": …, "series": [{"series", "nodes", "gpus": {capacity, allocatable, requested,
// free}, "blockedNodes", "nodeDetail": [{name, gpus{…}, pods, schedulable, blocked[]}]}]}.
nlohmann::json ToJson(const std::vector<SeriesCapacity>& capacity, const std::string& gpu_label);

// Whether a job could ever run (not whether it fits now). kuberay does not depend on fleet; the
// fleet copies this into fleet::Admission.
struct FitCheck {
  bool possible = true;
  std::string message;  // when not possible: what the pool asks, what exists
  std::string field;    // e.g. "pools[1].gpuSeries" or "pools[0].gpusPerMachine"
};

// Not possible when a pool names a series with no node, or asks more GPUs per machine than the
// largest allocatable of any node of its series. Pools without a series are not checked.
// `gpus_requested` false (FORGE_K8S_GPU_PASSTHROUGH=0): pods request no nvidia.com/gpu, so a
// node's GPU count bounds nothing and only the series must exist.
FitCheck CheckFits(const jobspec::JobSpec& spec, const std::vector<SeriesCapacity>& capacity,
                   bool gpus_requested);

// Effective GPU request of one pod as the scheduler and `kubectl describe node` count it
// (max(Σ containers + sidecars, each init container + sidecars so far) + overhead).
int64_t PodGpuRequest(const nlohmann::json& pod);

}  // namespace starforge::kuberay
