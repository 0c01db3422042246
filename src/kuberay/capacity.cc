#include "starforge/kuberay/capacity.h"
#include "starforge/common/format.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "starforge/common/json_read.h"
#include "starforge/common/quantity.h"
#include "starforge/kuberay/constants.h"

namespace starforge::kuberay {
namespace {

using json_read::Field;
using json_read::Str;
using nlohmann::json;

// A resource amount in whole units (rounded up, like Quantity.Value()); 0 when absent or invalid.
int64_t Amount(const json& list, const char* resource) {
  const json& v = Field(list, resource);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_string()) return 0;
  auto q = Quantity::Parse(v.get<std::string>());
  return q ? std::max<int64_t>(q->Value(), 0) : 0;
}

// A container's GPU request: requests, else limits (the API server defaults requests to limits).
int64_t ContainerGpus(const json& container) {
  const json& resources = Field(container, "resources");
  const json& requests = Field(resources, "requests");
  if (requests.is_object() && requests.contains(kGpuResource))
    return Amount(requests, kGpuResource);
  return Amount(Field(resources, "limits"), kGpuResource);
}

bool Terminated(const json& pod) {
  const std::string phase = Str(Field(pod, "status"), "phase");
  return phase == kPodSucceeded || phase == kPodFailed;
}

std::vector<std::string> BlockedReasons(const json& node) {
  std::vector<std::string> out;
  const json& spec = Field(node, "spec");
  const bool cordoned = Field(spec, "unschedulable").is_boolean() && spec["unschedulable"];
  if (cordoned) out.push_back("cordoned");
  bool not_ready = false;
  const json& conditions = Field(Field(node, "status"), "conditions");
  if (conditions.is_array()) {
    for (const json& c : conditions) {
      if (Str(c, "type") != "Ready") continue;
      if (Str(c, "status") != "True") {
        not_ready = true;
        const std::string reason = Str(c, "reason");
        out.push_back(reason.empty() ? kNodeNotReady
                                     : std::string(kNodeNotReady) + " (" + reason + ")");
      }
    }
  }
  const json& taints = Field(spec, "taints");
  if (taints.is_array()) {
    for (const json& t : taints) {
      const std::string key = Str(t, "key");
      const std::string effect = Str(t, "effect");
      if (effect != kTaintNoSchedule && effect != kTaintNoExecute) continue;
      // The GPU pods StarForge renders tolerate nvidia.com/gpu:NoSchedule.
      if (key == kGpuTaintKey && effect == kTaintNoSchedule) continue;
      // Already said: the node controller's taints for cordon and NotReady.
      if (cordoned && key == "node.kubernetes.io/unschedulable") continue;
      if (not_ready &&
          (key == "node.kubernetes.io/not-ready" || key == "node.kubernetes.io/unreachable")) {
        continue;
      }
      const std::string value = Str(t, "value");
      out.push_back("taint " + key + (value.empty() ? "" : "=" + value) + ":" + effect);
    }
  }
  return out;
}

json GpusJson(int64_t capacity, int64_t allocatable, int64_t requested, int64_t free) {
  return json{{"capacity", capacity},
              {"allocatable", allocatable},
              {"requested", requested},
              {"free", free}};
}

// "h200 (3 nodes, 8 GPUs each)" or "h200 (3 nodes, 4-8 GPUs)".
std::string DescribeSeries(const SeriesCapacity& s) {
  int64_t lo = s.max_node_allocatable;
  for (const auto& n : s.node_detail)
    lo = std::min(lo, n.gpu_allocatable);
  std::string gpus =
      lo == s.max_node_allocatable
          ? Plural(lo, "GPU", "GPUs") + (s.nodes == 1 ? "" : " each")
          : std::to_string(lo) + "-" + std::to_string(s.max_node_allocatable) + " GPUs";
  return s.series + " (" + Plural(s.nodes, "node", "nodes") + ", " + gpus + ")";
}

}  // namespace

int64_t PodGpuRequest(const json& pod) {
  const json& spec = Field(pod, "spec");
  int64_t containers = 0;
  if (const json& cs = Field(spec, "containers"); cs.is_array()) {
    for (const json& c : cs)
      containers += ContainerGpus(c);
  }
  int64_t sidecars = 0;
  int64_t init_max = 0;
  if (const json& ics = Field(spec, "initContainers"); ics.is_array()) {
    for (const json& c : ics) {
      const int64_t gpus = ContainerGpus(c);
      if (Str(c, "restartPolicy") == "Always") {
        // A sidecar runs next to the main containers and the init containers after it.
        containers += gpus;
        sidecars += gpus;
        init_max = std::max(init_max, sidecars);
      } else {
        init_max = std::max(init_max, gpus + sidecars);
      }
    }
  }
  return std::max(containers, init_max) + Amount(Field(spec, "overhead"), kGpuResource);
}

namespace {

// The usage one pod adds to its node: none when unbound or terminated.
std::optional<std::pair<std::string, int64_t>> Contribution(const json* pod) {
  if (pod == nullptr) return std::nullopt;
  std::string node = Str(Field(*pod, "spec"), "nodeName");
  if (node.empty() || Terminated(*pod)) return std::nullopt;
  return std::make_pair(std::move(node), PodGpuRequest(*pod));
}

}  // namespace

void NodeUsageSums::Update(const json* before, const json* now) {
  if (auto c = Contribution(before)) {
    auto it = by_node_.find(c->first);
    if (it != by_node_.end()) {
      it->second.pods -= 1;
      it->second.gpu_requested -= c->second;
      if (it->second.pods <= 0) by_node_.erase(it);
    }
  }
  if (auto c = Contribution(now)) {
    NodeUsage& u = by_node_[c->first];
    u.pods += 1;
    u.gpu_requested += c->second;
  }
}

json TrimPodForCapacity(const json& pod) {
  const json& meta = Field(pod, "metadata");
  json m = json::object();
  for (const char* k : {"namespace", "name", "uid", "resourceVersion"})
    if (meta.is_object() && meta.contains(k)) m[k] = meta[k];
  json out = {{"metadata", std::move(m)}, {"spec", json::object()}, {"status", json::object()}};
  const std::string node = Str(Field(pod, "spec"), "nodeName");
  if (!node.empty()) out["spec"]["nodeName"] = node;
  const std::string phase = Str(Field(pod, "status"), "phase");
  if (!phase.empty()) out["status"]["phase"] = phase;
  const int64_t gpus = PodGpuRequest(pod);
  out["spec"]["containers"] = json::array(
      {gpus > 0 ? json{{"resources", {{"requests", {{kGpuResource, gpus}}}}}} : json::object()});
  return out;
}

std::vector<SeriesCapacity> ComputeCapacity(const std::vector<json>& nodes,
                                            const std::vector<json>& pods,
                                            const std::string& gpu_label) {
  NodeUsageSums sums;
  for (const json& pod : pods)
    sums.Update(nullptr, &pod);
  return ComputeCapacityFromUsage(nodes, sums.by_node(), gpu_label);
}

std::vector<SeriesCapacity> ComputeCapacityFromUsage(const std::vector<json>& nodes,
                                                     const std::map<std::string, NodeUsage>& usage,
                                                     const std::string& gpu_label) {
  std::map<std::string, NodeCapacity> by_name;
  for (const json& node : nodes) {
    const json& meta = Field(node, "metadata");
    NodeCapacity n;
    n.name = Str(meta, "name");
    if (n.name.empty()) continue;
    n.series = Str(Field(meta, "labels"), gpu_label.c_str());
    const json& status = Field(node, "status");
    n.gpu_capacity = Amount(Field(status, "capacity"), kGpuResource);
    n.gpu_allocatable = Amount(Field(status, "allocatable"), kGpuResource);
    n.blocked = BlockedReasons(node);
    by_name[n.name] = std::move(n);
  }
  for (const auto& [node, u] : usage) {
    auto it = by_name.find(node);
    if (it == by_name.end()) continue;
    it->second.pods = u.pods;
    it->second.gpu_requested = u.gpu_requested;
  }

  std::map<std::string, SeriesCapacity> by_series;
  for (auto& [name, n] : by_name) {
    n.gpu_free = std::max<int64_t>(0, n.gpu_allocatable - n.gpu_requested);
    SeriesCapacity& s = by_series[n.series];
    s.series = n.series;
    s.nodes += 1;
    s.gpu_capacity += n.gpu_capacity;
    s.gpu_allocatable += n.gpu_allocatable;
    s.gpu_requested += n.gpu_requested;
    if (n.Schedulable()) {
      s.gpu_free += n.gpu_free;
    } else {
      s.blocked_nodes += 1;
    }
    s.max_node_allocatable = std::max(s.max_node_allocatable, n.gpu_allocatable);
    s.node_detail.push_back(n);  // by_name is sorted, so the detail is too
  }
  std::vector<SeriesCapacity> out;
  for (auto& [series, s] : by_series) {
    if (!series.empty()) out.push_back(std::move(s));
  }
  if (auto it = by_series.find(kUnlabelledSeries); it != by_series.end()) {
    out.push_back(std::move(it->second));
  }
  return out;
}

json ToJson(const std::vector<SeriesCapacity>& capacity, const std::string& gpu_label) {
  json series = json::array();
  for (const SeriesCapacity& s : capacity) {
    json detail = json::array();
    for (const NodeCapacity& n : s.node_detail) {
      detail.push_back(
          {{"name", n.name},
           {"gpus", GpusJson(n.gpu_capacity, n.gpu_allocatable, n.gpu_requested, n.gpu_free)},
           {"pods", n.pods},
           {"schedulable", n.Schedulable()},
           {"blocked", n.blocked}});
    }
    series.push_back(
        {{"series", s.series},
         {"nodes", s.nodes},
         {"gpus", GpusJson(s.gpu_capacity, s.gpu_allocatable, s.gpu_requested, s.gpu_free)},
         {"blockedNodes", s.blocked_nodes},
         {"maxGpusPerNode", s.max_node_allocatable},
         {"nodeDetail", detail}});
  }
  return json{{"gpuNodeLabel", gpu_label}, {"series", series}};
}

FitCheck CheckFits(const jobspec::JobSpec& spec, const std::vector<SeriesCapacity>& capacity,
                   bool gpus_requested) {
  std::vector<std::string> problems;
  FitCheck result;
  for (size_t i = 0; i < spec.pools.size(); ++i) {
    const jobspec::Pool& pool = spec.pools[i];
    if (pool.gpu_series.empty()) continue;  // any node
    const std::string path = "pools[" + std::to_string(i) + "]";
    auto it = std::find_if(capacity.begin(), capacity.end(),
                           [&](const SeriesCapacity& s) { return s.series == pool.gpu_series; });
    std::string problem;
    std::string field;
    if (it == capacity.end() || it->nodes == 0) {
      problem = "pool " + pool.name + " asks for machines of series " + pool.gpu_series +
                ", but no node of series " + pool.gpu_series + " exists";
      field = path + ".gpuSeries";
    } else if (gpus_requested && pool.gpus_per_machine > it->max_node_allocatable) {
      problem = "pool " + pool.name + " asks for " + Plural(pool.gpus_per_machine, "GPU", "GPUs") +
                " per machine of series " + pool.gpu_series + "; nodes of " + pool.gpu_series +
                " have at most " + std::to_string(it->max_node_allocatable) + " (" +
                Plural(it->nodes, "node", "nodes") + ")";
      field = path + ".gpusPerMachine";
    }
    if (problem.empty()) continue;
    if (result.field.empty()) result.field = field;
    problems.push_back(problem);
  }
  if (problems.empty()) return result;
  result.possible = false;
  for (const std::string& p : problems) {
    if (!result.message.empty()) result.message += "; ";
    result.message += p;
  }
  std::string existing;
  for (const SeriesCapacity& s : capacity) {
    if (s.series.empty() || s.nodes == 0) continue;
    if (!existing.empty()) existing += ", ";
    existing += DescribeSeries(s);
  }
  result.message += "; series that exist: " + (existing.empty() ? "none" : existing);
  return result;
}

}  // namespace starforge::kuberay
