// The scheduling decision of kubesim's scheduler, as pure functions over Node and Pod JSON: the
// filters of kube-scheduler 1.32's default profile that apply here, in its order
// (NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit), their reason
// strings, the FitError message grammar (pkg/scheduler/framework/types.go) with DefaultPreemption's
// "preemption: …" part, and a LeastAllocated choice among the nodes that fit.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kubesim::node {

// Resource name -> amount in thousandths of a unit ("500m" cpu = 500, "1Gi" = 1073741824000).
using Resources = std::map<std::string, int64_t>;

// What the pod asks the scheduler for, as the NodeResourcesFit plugin computes it: per container
// `requests` (a resource with only a limit requests its limit, as API defaulting makes it), summed
// over containers; sidecars (init containers with restartPolicy Always) add to that sum; each
// other init container needs its own request plus the sidecars started before it; the result is
// the per-resource maximum, plus spec.overhead. Unparseable quantities count as 0.
Resources PodRequests(const nlohmann::json& pod);

// A node's allocatable resources (status.allocatable, else status.capacity).
Resources NodeAllocatable(const nlohmann::json& node);

// The taints the scheduler sees: spec.taints, plus node.kubernetes.io/not-ready:NoSchedule when
// the Ready condition is False (…/unreachable when Unknown or missing conditions say so), as the
// node lifecycle controller would add them.
nlohmann::json EffectiveTaints(const nlohmann::json& node);

// Does any toleration of the pod tolerate `taint` (v1 helper ToleratesTaint)?
bool Tolerates(const nlohmann::json& pod, const nlohmann::json& taint);

// nodeSelector and requiredDuringSchedulingIgnoredDuringExecution node affinity.
bool MatchesNodeAffinity(const nlohmann::json& pod, const nlohmann::json& node);

// The outcome of the filters on one node.
struct NodeStatus {
  bool fits = true;
  // kube-scheduler's reason strings; NodeResourcesFit can give several on one node.
  std::vector<std::string> reasons;
  // true = UnschedulableAndUnresolvable (preemption cannot help), false = Unschedulable.
  bool unresolvable = false;
};

// The pods already on a node (bound, not Succeeded/Failed), for resource and port accounting.
struct NodeUsage {
  Resources requested;
  int64_t pods = 0;
  std::vector<int64_t> host_ports;  // TCP host ports in use (0.0.0.0)
};

// What a pod takes from its node, computed once per pod version (the scheduler's cache).
struct PodDemand {
  Resources requests;
  std::vector<int64_t> host_ports;
};
PodDemand DemandOf(const nlohmann::json& pod);

// Adds a pod to `usage`.
void AddPod(NodeUsage& usage, const PodDemand& demand);
void AddPod(NodeUsage& usage, const nlohmann::json& pod);

// Runs the filters, stopping at the first plugin that rejects the node.
NodeStatus FilterNode(const nlohmann::json& pod, const nlohmann::json& node,
                      const NodeUsage& usage);

// "0/5 nodes are available: 2 Insufficient nvidia.com/gpu, 3 node(s) didn't match Pod's node
// affinity/selector. preemption: 0/5 nodes are available: 2 No preemption victims found for
// incoming pod, 3 Preemption is not helpful for scheduling." — `statuses` holds one entry per node.
std::string FitErrorMessage(const std::vector<NodeStatus>& statuses);

// The VolumeBinding plugin's PreFilter (pkg/scheduler/framework/plugins/volumebinding): "" when
// every persistentVolumeClaim volume of the pod names a bound claim (or the pod has none), else
// the reason that makes the pod UnschedulableAndUnresolvable on every node, for the first volume
// in order: `persistentvolumeclaim "x" not found`, `… bound to non-existent persistentvolume
// "pv"` (phase Lost), `… is being deleted`; then, when any claim is unbound, "pod has unbound
// immediate PersistentVolumeClaims". Bound = spec.volumeName with the
// pv.kubernetes.io/bind-completed annotation, as the PV controller leaves it, or (kubesim has no
// PV controller; fixtures bind claims by hand) status.phase Bound. Every claim is "immediate":
// kubesim serves no StorageClasses, and kube-scheduler treats a claim whose class is missing so.
// `claims` maps the claim name to the claim, in the pod's namespace. Ephemeral volumes are not
// looked at.
std::string VolumeClaimsReason(const nlohmann::json& pod,
                               const std::map<std::string, nlohmann::json>& claims);

// The FitError of a PreFilter rejection on a cluster of `nodes` nodes: "0/N nodes are available:
// <reason>. preemption: 0/N nodes are available: N Preemption is not helpful for scheduling."
std::string PreFilterFitErrorMessage(size_t nodes, const std::string& reason);

// kube-scheduler's message when the cluster has no node at all.
inline constexpr const char* kNoNodesAvailable = "no nodes available to schedule pods";

struct Decision {
  std::string node;     // "" = unschedulable
  std::string message;  // the FitError (or no-nodes) message when unschedulable
};

// Picks a node for `pod` among `nodes` (name -> Node), given the usage per node name: the
// feasible node with the highest LeastAllocated score over cpu and memory, ties broken by name.
// No nodes → kNoNodesAvailable; then the pod's claims (VolumeClaimsReason over `claims`, the
// claims of the pod's namespace by name) before any node filter, as PreFilter runs first.
Decision Schedule(const nlohmann::json& pod, const std::map<std::string, nlohmann::json>& nodes,
                  const std::map<std::string, NodeUsage>& usage,
                  const std::map<std::string, nlohmann::json>& claims = {});

}  // namespace kubesim::node
