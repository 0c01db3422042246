#include "node/scheduling.h"

#include <algorithm>

#include "starforge/common/json_read.h"
#include "starforge/common/quantity.h"

namespace kubesim::node {

using nlohmann::json;

namespace {

using starforge::json_read::Field;  // never-throwing reads (common/json_read.h)
using starforge::json_read::Str;

int64_t Milli(const json& v) {
  if (v.is_number_integer()) return v.get<int64_t>() * 1000;
  if (v.is_number()) return static_cast<int64_t>(v.get<double>() * 1000);
  if (!v.is_string()) return 0;
  auto q = starforge::Quantity::Parse(v.get<std::string>());
  return q ? q->MilliValue() : 0;
}

// A container's requests; a resource with a limit but no request requests its limit.
Resources ContainerRequests(const json& c) {
  Resources out;
  const json& res = Field(c, "resources");
  const json& limits = Field(res, "limits");
  const json& requests = Field(res, "requests");
  if (limits.is_object()) {
    for (const auto& [k, v] : limits.items())
      out[k] = Milli(v);
  }
  if (requests.is_object()) {
    for (const auto& [k, v] : requests.items())
      out[k] = Milli(v);
  }
  return out;
}

void AddTo(Resources& a, const Resources& b) {
  for (const auto& [k, v] : b)
    a[k] += v;
}

void MaxInto(Resources& a, const Resources& b) {
  for (const auto& [k, v] : b)
    a[k] = std::max(a[k], v);
}

bool IsScalarResource(const std::string& name) {
  // Extended resources (vendor-domain/name), hugepages-*, and prefixed native resources.
  return name.find('/') != std::string::npos || name.rfind("hugepages-", 0) == 0 ||
         name.rfind("attachable-volumes-", 0) == 0;
}

bool MatchesSelectorRequirement(const json& req, const json& labels, const std::string& name,
                                bool field) {
  const std::string key = Str(req, "key");
  const std::string op = Str(req, "operator");
  std::vector<std::string> values;
  if (Field(req, "values").is_array()) {
    for (const auto& v : req["values"]) {
      if (v.is_string()) values.push_back(v.get<std::string>());
    }
  }
  bool has = false;
  std::string value;
  if (field) {
    if (key == "metadata.name") {
      has = true;
      value = name;
    }
  } else if (labels.is_object() && labels.contains(key) && labels[key].is_string()) {
    has = true;
    value = labels[key].get<std::string>();
  }
  auto in = [&] { return std::find(values.begin(), values.end(), value) != values.end(); };
  if (op == "In") return has && in();
  if (op == "NotIn") return !has || !in();
  if (op == "Exists") return has;
  if (op == "DoesNotExist") return !has;
  if (op == "Gt" || op == "Lt") {
    if (!has || values.size() != 1) return false;
    try {
      const long long have = std::stoll(value);
      const long long want = std::stoll(values[0]);
      return op == "Gt" ? have > want : have < want;
    } catch (const std::exception&) {
      return false;
    }
  }
  return false;
}

bool MatchesTerm(const json& term, const json& node) {
  const json& md = Field(node, "metadata");
  const json& labels = Field(md, "labels");
  const std::string name = Str(md, "name");
  const json& exprs = Field(term, "matchExpressions");
  const json& fields = Field(term, "matchFields");
  const bool no_exprs = !exprs.is_array() || exprs.empty();
  const bool no_fields = !fields.is_array() || fields.empty();
  if (no_exprs && no_fields) return false;  // an empty term matches no node
  if (!no_exprs) {
    for (const auto& r : exprs) {
      if (!MatchesSelectorRequirement(r, labels, name, false)) return false;
    }
  }
  if (!no_fields) {
    for (const auto& r : fields) {
      if (!MatchesSelectorRequirement(r, labels, name, true)) return false;
    }
  }
  return true;
}

std::vector<int64_t> HostPorts(const json& pod) {
  std::vector<int64_t> out;
  const json& spec = Field(pod, "spec");
  for (const char* list : {"initContainers", "containers"}) {
    const json& cs = Field(spec, list);
    if (!cs.is_array()) continue;
    for (const auto& c : cs) {
      const json& ports = Field(c, "ports");
      if (!ports.is_array()) continue;
      for (const auto& p : ports) {
        const json& hp = Field(p, "hostPort");
        const std::string proto = Str(p, "protocol");
        if (hp.is_number_integer() && hp.get<int64_t>() > 0 && (proto.empty() || proto == "TCP")) {
          out.push_back(hp.get<int64_t>());
        }
      }
    }
  }
  return out;
}

}  // namespace

Resources PodRequests(const json& pod) {
  const json& spec = Field(pod, "spec");
  Resources sum;
  if (Field(spec, "containers").is_array()) {
    for (const auto& c : spec["containers"])
      AddTo(sum, ContainerRequests(c));
  }
  Resources init_max;
  Resources sidecars;
  if (Field(spec, "initContainers").is_array()) {
    for (const auto& c : spec["initContainers"]) {
      const Resources r = ContainerRequests(c);
      if (Str(c, "restartPolicy") == "Always") {
        AddTo(sum, r);
        AddTo(sidecars, r);
        MaxInto(init_max, sidecars);
      } else {
        Resources effective = r;
        AddTo(effective, sidecars);
        MaxInto(init_max, effective);
      }
    }
  }
  MaxInto(sum, init_max);
  if (Field(spec, "overhead").is_object()) {
    for (const auto& [k, v] : spec["overhead"].items())
      sum[k] += Milli(v);
  }
  return sum;
}

Resources NodeAllocatable(const json& node) {
  const json& status = Field(node, "status");
  const json& alloc =
      Field(status, "allocatable").is_object() ? status["allocatable"] : Field(status, "capacity");
  Resources out;
  if (alloc.is_object()) {
    for (const auto& [k, v] : alloc.items())
      out[k] = Milli(v);
  }
  return out;
}

json EffectiveTaints(const json& node) {
  json taints = json::array();
  const json& spec_taints = Field(Field(node, "spec"), "taints");
  if (spec_taints.is_array()) taints = spec_taints;
  std::string ready = "True";
  const json& conds = Field(Field(node, "status"), "conditions");
  if (conds.is_array()) {
    for (const auto& c : conds) {
      if (Str(c, "type") == "Ready") ready = Str(c, "status");
    }
  }
  if (ready != "True") {
    const std::string key =
        ready == "False" ? "node.kubernetes.io/not-ready" : "node.kubernetes.io/unreachable";
    bool present = false;
    for (const auto& t : taints)
      present |= Str(t, "key") == key && Str(t, "effect") == "NoSchedule";
    if (!present) taints.push_back({{"key", key}, {"effect", "NoSchedule"}});
  }
  return taints;
}

bool Tolerates(const json& pod, const json& taint) {
  const json& tols = Field(Field(pod, "spec"), "tolerations");
  if (!tols.is_array()) return false;
  for (const auto& t : tols) {
    const std::string effect = Str(t, "effect");
    if (!effect.empty() && effect != Str(taint, "effect")) continue;
    const std::string key = Str(t, "key");
    if (!key.empty() && key != Str(taint, "key")) continue;
    const std::string op = Str(t, "operator");
    if (op == "Exists") return true;
    if ((op.empty() || op == "Equal") && Str(t, "value") == Str(taint, "value")) return true;
  }
  return false;
}

bool MatchesNodeAffinity(const json& pod, const json& node) {
  const json& spec = Field(pod, "spec");
  const json& labels = Field(Field(node, "metadata"), "labels");
  const json& selector = Field(spec, "nodeSelector");
  if (selector.is_object()) {
    for (const auto& [k, v] : selector.items()) {
      if (!labels.is_object() || !labels.contains(k) || labels[k] != v) return false;
    }
  }
  const json& required = Field(Field(Field(spec, "affinity"), "nodeAffinity"),
                               "requiredDuringSchedulingIgnoredDuringExecution");
  const json& terms = Field(required, "nodeSelectorTerms");
  if (required.is_object() && terms.is_array()) {
    bool any = false;
    for (const auto& term : terms)
      any |= MatchesTerm(term, node);
    if (!any) return false;
  }
  return true;
}

PodDemand DemandOf(const json& pod) {
  return {PodRequests(pod), HostPorts(pod)};
}

void AddPod(NodeUsage& usage, const PodDemand& demand) {
  AddTo(usage.requested, demand.requests);
  ++usage.pods;
  usage.host_ports.insert(usage.host_ports.end(), demand.host_ports.begin(),
                          demand.host_ports.end());
}

void AddPod(NodeUsage& usage, const json& pod) {
  AddPod(usage, DemandOf(pod));
}

NodeStatus FilterNode(const json& pod, const json& node, const NodeUsage& usage) {
  NodeStatus st;
  auto reject = [&st](std::string reason, bool unresolvable) {
    st.fits = false;
    st.unresolvable = unresolvable;
    st.reasons.push_back(std::move(reason));
    return st;
  };
  // NodeUnschedulable: a cordoned node, unless the pod tolerates the unschedulable taint.
  if (Field(Field(node, "spec"), "unschedulable") == json(true)) {
    const json taint = {{"key", "node.kubernetes.io/unschedulable"}, {"effect", "NoSchedule"}};
    if (!Tolerates(pod, taint)) return reject("node(s) were unschedulable", true);
  }
  // TaintToleration: the first NoSchedule/NoExecute taint the pod does not tolerate.
  for (const auto& taint : EffectiveTaints(node)) {
    const std::string effect = Str(taint, "effect");
    if (effect != "NoSchedule" && effect != "NoExecute") continue;
    if (!Tolerates(pod, taint)) {
      return reject(
          "node(s) had untolerated taint {" + Str(taint, "key") + ": " + Str(taint, "value") + "}",
          true);
    }
  }
  // NodeAffinity.
  if (!MatchesNodeAffinity(pod, node)) {
    return reject("node(s) didn't match Pod's node affinity/selector", true);
  }
  // NodePorts.
  for (int64_t p : HostPorts(pod)) {
    if (std::find(usage.host_ports.begin(), usage.host_ports.end(), p) != usage.host_ports.end()) {
      return reject("node(s) didn't have free ports for the requested pod ports", false);
    }
  }
  // NodeResourcesFit: every insufficient resource is a reason of its own.
  const Resources alloc = NodeAllocatable(node);
  const Resources want = PodRequests(pod);
  auto free_of = [&](const std::string& r) {
    auto a = alloc.find(r);
    auto u = usage.requested.find(r);
    return (a == alloc.end() ? 0 : a->second) - (u == usage.requested.end() ? 0 : u->second);
  };
  auto pods_it = alloc.find("pods");
  if (pods_it != alloc.end() && (usage.pods + 1) * 1000 > pods_it->second) {
    st.reasons.push_back("Too many pods");
  }
  for (const char* r : {"cpu", "memory", "ephemeral-storage"}) {
    auto w = want.find(r);
    if (w != want.end() && w->second > 0 && w->second > free_of(r)) {
      st.reasons.push_back(std::string("Insufficient ") + r);
    }
  }
  for (const auto& [r, amount] : want) {
    if (!IsScalarResource(r) || amount == 0) continue;
    if (amount > free_of(r)) st.reasons.push_back("Insufficient " + r);
  }
  if (!st.reasons.empty()) {
    st.fits = false;
    st.unresolvable = false;
  }
  return st;
}

std::string FitErrorMessage(const std::vector<NodeStatus>& statuses) {
  const std::string head = "0/" + std::to_string(statuses.size()) + " nodes are available:";
  auto histogram = [](const std::map<std::string, int>& counts) {
    std::vector<std::string> parts;
    for (const auto& [reason, n] : counts)
      parts.push_back(std::to_string(n) + " " + reason);
    std::sort(parts.begin(), parts.end());  // sort.Strings over "<count> <reason>"
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i)
      out += (i ? ", " : "") + parts[i];
    return out;
  };
  std::map<std::string, int> reasons;
  std::map<std::string, int> preemption;
  for (const NodeStatus& st : statuses) {
    for (const auto& r : st.reasons)
      ++reasons[r];
    ++preemption[st.unresolvable ? "Preemption is not helpful for scheduling"
                                 : "No preemption victims found for incoming pod"];
  }
  std::string msg = head;
  if (!reasons.empty()) msg += " " + histogram(reasons) + ".";
  msg += " preemption: " + head + " " + histogram(preemption) + ".";
  return msg;
}

std::string VolumeClaimsReason(const json& pod, const std::map<std::string, json>& claims) {
  const json& spec = pod.is_object() && pod.contains("spec") ? pod["spec"] : json::object();
  if (!spec.contains("volumes") || !spec["volumes"].is_array()) return "";
  bool unbound = false;
  for (const json& v : spec["volumes"]) {
    if (!v.is_object() || !v.contains("persistentVolumeClaim") ||
        !v["persistentVolumeClaim"].is_object()) {
      continue;
    }
    const std::string name = v["persistentVolumeClaim"].value("claimName", "");
    auto it = claims.find(name);
    // The PVC lister's NotFound error, in its singular resource name.
    if (it == claims.end()) return "persistentvolumeclaim \"" + name + "\" not found";
    const json& pvc = it->second;
    const json& md = pvc.contains("metadata") ? pvc["metadata"] : json::object();
    const json& pspec = pvc.contains("spec") ? pvc["spec"] : json::object();
    const std::string phase = pvc.contains("status") ? pvc["status"].value("phase", "") : "";
    const std::string volume = pspec.value("volumeName", "");
    if (phase == "Lost") {
      return "persistentvolumeclaim \"" + name + "\" bound to non-existent persistentvolume \"" +
             volume + "\"";
    }
    if (md.contains("deletionTimestamp") && !md["deletionTimestamp"].is_null()) {
      return "persistentvolumeclaim \"" + name + "\" is being deleted";
    }
    const bool bind_completed = md.contains("annotations") && md["annotations"].is_object() &&
                                md["annotations"].contains("pv.kubernetes.io/bind-completed");
    if (!((!volume.empty() && bind_completed) || phase == "Bound")) unbound = true;
  }
  return unbound ? "pod has unbound immediate PersistentVolumeClaims" : "";
}

std::string PreFilterFitErrorMessage(size_t nodes, const std::string& reason) {
  const std::string head = "0/" + std::to_string(nodes) + " nodes are available:";
  return head + " " + reason + ". preemption: " + head + " " + std::to_string(nodes) +
         " Preemption is not helpful for scheduling.";
}

Decision Schedule(const json& pod, const std::map<std::string, json>& nodes,
                  const std::map<std::string, NodeUsage>& usage,
                  const std::map<std::string, json>& claims) {
  Decision d;
  if (nodes.empty()) {
    d.message = kNoNodesAvailable;
    return d;
  }
  if (const std::string reason = VolumeClaimsReason(pod, claims); !reason.empty()) {
    d.message = PreFilterFitErrorMessage(nodes.size(), reason);
    return d;
  }
  static const NodeUsage kEmpty;
  std::vector<NodeStatus> statuses;
  const Resources want = PodRequests(pod);
  int64_t best_score = -1;
  for (const auto& [name, node] : nodes) {
    auto u = usage.find(name);
    const NodeUsage& used = u == usage.end() ? kEmpty : u->second;
    NodeStatus st = FilterNode(pod, node, used);
    if (!st.fits) {
      statuses.push_back(std::move(st));
      continue;
    }
    // LeastAllocated over cpu and memory (weights 1), in the 0..100 range.
    const Resources alloc = NodeAllocatable(node);
    int64_t score = 0;
    int64_t weights = 0;
    for (const char* r : {"cpu", "memory"}) {
      auto a = alloc.find(r);
      if (a == alloc.end() || a->second <= 0) continue;
      auto uu = used.requested.find(r);
      auto w = want.find(r);
      const int64_t requested =
          (uu == used.requested.end() ? 0 : uu->second) + (w == want.end() ? 0 : w->second);
      const long double frac =
          static_cast<long double>(a->second - requested) / static_cast<long double>(a->second);
      score += static_cast<int64_t>(std::max<long double>(0, frac) * 100);
      ++weights;
    }
    if (weights > 0) score /= weights;
    if (score > best_score) {
      best_score = score;
      d.node = name;
    }
  }
  if (d.node.empty()) d.message = FitErrorMessage(statuses);
  return d;
}

}  // namespace kubesim::node
