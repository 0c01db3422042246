// The printers of kube-apiserver 1.32 (pkg/printers/internalversion/printers.go), the CRD
// column convertor (apiextensions-apiserver/pkg/registry/customresource/tableconvertor) and the
// default table (apiserver/pkg/registry/rest/table.go), over JSON objects.
#include "table.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <map>
#include <set>

#include "event_fields.h"
#include "starforge/common/format.h"
#include "starforge/common/json_read.h"
#include "status.h"

namespace kubesim::table {

using nlohmann::json;
using starforge::FormatRfc3339;
using starforge::json_read::At;
using starforge::json_read::Str;

namespace {

const char kNameDesc[] =
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const char kCreatedDesc[] =
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/"
    "api-conventions.md#metadata";

json Col(const std::string& name, const std::string& desc, int priority = 0,
         const std::string& type = "string", const std::string& format = "") {
  return {{"name", name},
          {"type", type},
          {"format", format},
          {"description", desc},
          {"priority", priority}};
}
json NameCol() {
  return Col("Name", kNameDesc, 0, "string", "name");
}
json AgeCol() {
  return Col("Age", kCreatedDesc);
}

int64_t Int(const json& obj, std::initializer_list<const char*> keys) {
  const json& v = At(obj, keys);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number()) return static_cast<int64_t>(v.get<double>());
  return 0;
}
const json& Arr(const json& obj, std::initializer_list<const char*> keys) {
  static const json kEmpty = json::array();
  const json& v = At(obj, keys);
  return v.is_array() ? v : kEmpty;
}

// translateTimestampSince: "<unknown>" for an unset time.
std::string Since(const std::string& ts, int64_t now) {
  if (ts.empty()) return "<unknown>";
  auto t = ParseRfc3339(ts);
  if (!t) return "<unknown>";
  return HumanDuration(now - *t);
}

std::string Join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i)
    out += (i ? sep : "") + v[i];
  return out;
}

// labels.FormatLabels: sorted k=v pairs, "<none>" when empty.
std::string FormatLabels(const json& m) {
  if (!m.is_object() || m.empty()) return "<none>";
  std::vector<std::string> parts;
  for (const auto& [k, v] : m.items())
    parts.push_back(k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
  return Join(parts, ",");  // nlohmann's object is a std::map: already sorted by key
}

// metav1.FormatLabelSelector: requirements sorted by key, "<none>" when there are none.
std::string FormatLabelSelector(const json& sel) {
  std::multimap<std::string, std::string> reqs;
  if (sel.is_object()) {
    const json& match = At(sel, {"matchLabels"});
    if (match.is_object()) {
      for (const auto& [k, v] : match.items())
        reqs.emplace(k, k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
    }
    for (const json& e : Arr(sel, {"matchExpressions"})) {
      const std::string key = Str(e, {"key"});
      const std::string op = Str(e, {"operator"});
      std::vector<std::string> vals;
      for (const json& v : Arr(e, {"values"}))
        if (v.is_string()) vals.push_back(v.get<std::string>());
      std::sort(vals.begin(), vals.end());
      if (op == "In") reqs.emplace(key, key + " in (" + Join(vals, ",") + ")");
      if (op == "NotIn") reqs.emplace(key, key + " notin (" + Join(vals, ",") + ")");
      if (op == "Exists") reqs.emplace(key, key);
      if (op == "DoesNotExist") reqs.emplace(key, "!" + key);
    }
  }
  if (reqs.empty()) return "<none>";
  std::vector<std::string> parts;
  for (const auto& [k, s] : reqs)
    parts.push_back(s);
  return Join(parts, ",");
}

bool HasCondition(const json& conditions, const std::string& type) {
  for (const json& c : conditions.is_array() ? conditions : json::array()) {
    if (Str(c, {"type"}) == type) return Str(c, {"status"}) == "True";
  }
  return false;
}

// ---- pods -------------------------------------------------------------------------------

bool IsRestartableInit(const json* c) {
  return c != nullptr && Str(*c, {"restartPolicy"}) == "Always";
}

json PodCells(const json& pod, int64_t now, json* conditions) {
  const json& spec = At(pod, {"spec"});
  const json& status = At(pod, {"status"});
  int64_t restarts = 0;
  int64_t restartable_init_restarts = 0;
  int64_t total = static_cast<int64_t>(Arr(spec, {"containers"}).size());
  int64_t ready = 0;
  std::optional<int64_t> last_restart;
  std::optional<int64_t> last_restartable_init_restart;
  auto later = [](std::optional<int64_t>& cur, const json& st) {
    const std::string fin = Str(st, {"lastState", "terminated", "finishedAt"});
    if (At(st, {"lastState", "terminated"}).is_null()) return;
    auto t = ParseRfc3339(fin);
    if (t && (!cur || *cur < *t)) cur = *t;
  };
  const std::string phase = Str(status, {"phase"});
  std::string reason = phase;
  if (!Str(status, {"reason"}).empty()) reason = Str(status, {"reason"});
  for (const json& c : Arr(status, {"conditions"})) {
    if (Str(c, {"type"}) == "PodScheduled" && Str(c, {"reason"}) == "SchedulingGated")
      reason = "SchedulingGated";
  }
  if (phase == "Succeeded") {
    *conditions = json::array({{{"type", "Completed"},
                                {"status", "True"},
                                {"reason", "Succeeded"},
                                {"message", "The pod has completed successfully."}}});
  } else if (phase == "Failed") {
    *conditions = json::array({{{"type", "Completed"},
                                {"status", "True"},
                                {"reason", "Failed"},
                                {"message", "The pod failed."}}});
  }
  std::map<std::string, const json*> inits;
  const json& init_specs = Arr(spec, {"initContainers"});
  for (const json& c : init_specs) {
    inits[Str(c, {"name"})] = &c;
    if (IsRestartableInit(&c)) ++total;
  }
  const int64_t n_inits = static_cast<int64_t>(init_specs.size());
  bool initializing = false;
  const json& init_statuses = Arr(status, {"initContainerStatuses"});
  for (size_t i = 0; i < init_statuses.size(); ++i) {
    const json& c = init_statuses[i];
    restarts += Int(c, {"restartCount"});
    later(last_restart, c);
    auto it = inits.find(Str(c, {"name"}));
    const json* def = it == inits.end() ? nullptr : it->second;
    if (IsRestartableInit(def)) {
      restartable_init_restarts += Int(c, {"restartCount"});
      later(last_restartable_init_restart, c);
    }
    const json& term = At(c, {"state", "terminated"});
    const json& wait = At(c, {"state", "waiting"});
    if (term.is_object() && Int(term, {"exitCode"}) == 0) continue;
    if (IsRestartableInit(def) && At(c, {"started"}) == true) {
      if (At(c, {"ready"}) == true) ++ready;
      continue;
    }
    if (term.is_object()) {
      if (Str(term, {"reason"}).empty()) {
        reason = Int(term, {"signal"}) != 0
                     ? "Init:Signal:" + std::to_string(Int(term, {"signal"}))
                     : "Init:ExitCode:" + std::to_string(Int(term, {"exitCode"}));
      } else {
        reason = "Init:" + Str(term, {"reason"});
      }
    } else if (wait.is_object() && !Str(wait, {"reason"}).empty() &&
               Str(wait, {"reason"}) != "PodInitializing") {
      reason = "Init:" + Str(wait, {"reason"});
    } else {
      reason = "Init:" + std::to_string(i) + "/" + std::to_string(n_inits);
    }
    initializing = true;
    break;
  }
  bool initialized_true = false;
  for (const json& c : Arr(status, {"conditions"})) {
    if (Str(c, {"type"}) == "Initialized" && Str(c, {"status"}) == "True") initialized_true = true;
  }
  if (!initializing || initialized_true) {
    restarts = restartable_init_restarts;
    last_restart = last_restartable_init_restart;
    bool has_running = false;
    const json& statuses = Arr(status, {"containerStatuses"});
    for (size_t k = statuses.size(); k-- > 0;) {
      const json& c = statuses[k];
      restarts += Int(c, {"restartCount"});
      later(last_restart, c);
      const json& term = At(c, {"state", "terminated"});
      const json& wait = At(c, {"state", "waiting"});
      if (wait.is_object() && !Str(wait, {"reason"}).empty()) {
        reason = Str(wait, {"reason"});
      } else if (term.is_object() && !Str(term, {"reason"}).empty()) {
        reason = Str(term, {"reason"});
      } else if (term.is_object()) {
        reason = Int(term, {"signal"}) != 0 ? "Signal:" + std::to_string(Int(term, {"signal"}))
                                            : "ExitCode:" + std::to_string(Int(term, {"exitCode"}));
      } else if (At(c, {"ready"}) == true && At(c, {"state", "running"}).is_object()) {
        has_running = true;
        ++ready;
      }
    }
    if (reason == "Completed" && has_running) {
      reason = HasCondition(At(status, {"conditions"}), "Ready") ? "Running" : "NotReady";
    }
  }
  const bool deleting = !At(pod, {"metadata", "deletionTimestamp"}).is_null();
  if (deleting && Str(status, {"reason"}) == "NodeLost") {
    reason = "Unknown";
  } else if (deleting && phase != "Succeeded" && phase != "Failed") {
    reason = "Terminating";
  }
  std::string restarts_str = std::to_string(restarts);
  if (restarts != 0 && last_restart) {
    restarts_str += " (" + HumanDuration(now - *last_restart) + " ago)";
  }
  std::string ip = Str(Arr(status, {"podIPs"}).empty() ? json() : status["podIPs"][0], {"ip"});
  std::string node = Str(spec, {"nodeName"});
  std::string nominated = Str(status, {"nominatedNodeName"});
  std::string gates = "<none>";
  if (!Arr(spec, {"readinessGates"}).empty()) {
    int64_t ok = 0;
    for (const json& g : spec["readinessGates"]) {
      for (const json& c : Arr(status, {"conditions"})) {
        if (Str(c, {"type"}) == Str(g, {"conditionType"})) {
          if (Str(c, {"status"}) == "True") ++ok;
          break;
        }
      }
    }
    gates = std::to_string(ok) + "/" + std::to_string(spec["readinessGates"].size());
  }
  return json::array({Str(pod, {"metadata", "name"}),
                      std::to_string(ready) + "/" + std::to_string(total), reason, restarts_str,
                      Since(Str(pod, {"metadata", "creationTimestamp"}), now),
                      ip.empty() ? "<none>" : ip, node.empty() ? "<none>" : node,
                      nominated.empty() ? "<none>" : nominated, gates});
}

json PodColumns() {
  return json::array(
      {NameCol(), Col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
       Col("Status", "The aggregate status of the containers in this pod."),
       Col("Restarts",
           "The number of times the containers in this pod have been restarted and when the last "
           "container in this pod has restarted."),
       AgeCol(),
       Col("IP", "podIP address allocated to the pod. Routable at least within the cluster.", 1),
       Col("Node", "NodeName indicates in which node this pod is scheduled.", 1),
       Col("Nominated Node",
           "nominatedNodeName is set only when this pod preempts other pods on the node.", 1),
       Col("Readiness Gates",
           "If specified, all readiness gates will be evaluated for pod readiness.", 1)});
}

// ---- nodes ------------------------------------------------------------------------------

json NodeCells(const json& node, int64_t now) {
  std::vector<std::string> status;
  for (const json& c : Arr(node, {"status", "conditions"})) {
    if (Str(c, {"type"}) != "Ready") continue;
    status.push_back(Str(c, {"status"}) == "True" ? "Ready" : "NotReady");
    break;
  }
  if (status.empty()) status.push_back("Unknown");
  if (At(node, {"spec", "unschedulable"}) == true) status.push_back("SchedulingDisabled");
  std::set<std::string> roles;
  const json& labels = At(node, {"metadata", "labels"});
  if (labels.is_object()) {
    for (const auto& [k, v] : labels.items()) {
      static const std::string kPrefix = "node-role.kubernetes.io/";
      if (k.rfind(kPrefix, 0) == 0) {
        if (k.size() > kPrefix.size()) roles.insert(k.substr(kPrefix.size()));
      } else if (k == "kubernetes.io/role" && v.is_string() && !v.get<std::string>().empty()) {
        roles.insert(v.get<std::string>());
      }
    }
  }
  std::string roles_str = Join(std::vector<std::string>(roles.begin(), roles.end()), ",");
  auto address = [&](const std::string& type) {
    for (const json& a : Arr(node, {"status", "addresses"})) {
      if (Str(a, {"type"}) == type) return Str(a, {"address"});
    }
    return std::string("<none>");
  };
  auto info = [&](const char* key) {
    std::string v = Str(node, {"status", "nodeInfo", key});
    return v.empty() ? std::string("<unknown>") : v;
  };
  return json::array({Str(node, {"metadata", "name"}), Join(status, ","),
                      roles_str.empty() ? "<none>" : roles_str,
                      Since(Str(node, {"metadata", "creationTimestamp"}), now),
                      Str(node, {"status", "nodeInfo", "kubeletVersion"}), address("InternalIP"),
                      address("ExternalIP"), info("osImage"), info("kernelVersion"),
                      info("containerRuntimeVersion")});
}

json NodeColumns() {
  return json::array(
      {NameCol(), Col("Status", "The status of the node"), Col("Roles", "The roles of the node"),
       AgeCol(), Col("Version", "Kubelet Version reported by the node."),
       Col("Internal-IP", "List of addresses reachable to the node.", 1),
       Col("External-IP", "List of addresses reachable to the node.", 1),
       Col("OS-Image", "OS Image reported by the node from /etc/os-release.", 1),
       Col("Kernel-Version", "Kernel Version reported by the node.", 1),
       Col("Container-Runtime", "ContainerRuntime Version reported by the node.", 1)});
}

// ---- events (core/v1 field names; events.k8s.io objects are mapped back first) ----------

json CoreEvent(json ev) {
  for (const auto& [from, to] : kEventV1ToCore) {
    if (ev.contains(from)) {
      ev[to] = ev[from];
      ev.erase(from);
    }
  }
  return ev;
}

json EventCells(const json& ev, int64_t now) {
  std::string first = Since(Str(ev, {"firstTimestamp"}), now);
  if (Str(ev, {"firstTimestamp"}).empty()) first = Since(Str(ev, {"eventTime"}), now);
  std::string last = Since(Str(ev, {"lastTimestamp"}), now);
  if (Str(ev, {"lastTimestamp"}).empty()) last = first;
  int64_t count = Int(ev, {"count"});
  if (At(ev, {"series"}).is_object()) {
    last = Since(Str(ev, {"series", "lastObservedTime"}), now);
    count = Int(ev, {"series", "count"});
  } else if (count == 0) {
    count = 1;
  }
  std::string kind = Str(ev, {"involvedObject", "kind"});
  std::transform(kind.begin(), kind.end(), kind.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string name = Str(ev, {"involvedObject", "name"});
  const std::string target = name.empty() ? kind : kind + "/" + name;
  std::string component = Str(ev, {"source", "component"});
  if (component.empty()) component = Str(ev, {"reportingComponent"});
  std::string instance = Str(ev, {"source", "host"});
  if (instance.empty()) instance = Str(ev, {"reportingInstance"});
  const std::string source = instance.empty() ? component : component + ", " + instance;
  std::string message = Str(ev, {"message"});
  const auto b = message.find_first_not_of(" \t\r\n");
  const auto e = message.find_last_not_of(" \t\r\n");
  message = b == std::string::npos ? "" : message.substr(b, e - b + 1);
  return json::array({last, Str(ev, {"type"}), Str(ev, {"reason"}), target,
                      Str(ev, {"involvedObject", "fieldPath"}), source, message, first, count,
                      Str(ev, {"metadata", "name"})});
}

json EventColumns() {
  return json::array(
      {Col("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
       Col("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
       Col("Reason",
           "This should be a short, machine understandable string that gives the reason "
           "for the transition into the object's current status."),
       Col("Object", "The object that this event is about."),
       Col("Subobject", "The field of the involved object the event is about.", 1),
       Col("Source", "The component reporting this event.", 1),
       Col("Message", "A human-readable description of the status of this operation."),
       Col("First Seen", "The time at which the event was first recorded.", 1),
       Col("Count", "The number of times this event has occurred.", 1),
       Col("Name", kNameDesc, 1, "string", "name")});
}

// ---- jobs, services, configmaps, secrets, namespaces, serviceaccounts --------------------

json JobCells(const json& job, int64_t now) {
  const int64_t succeeded = Int(job, {"status", "succeeded"});
  std::string completions;
  if (At(job, {"spec", "completions"}).is_number()) {
    completions =
        std::to_string(succeeded) + "/" + std::to_string(Int(job, {"spec", "completions"}));
  } else if (Int(job, {"spec", "parallelism"}) > 1) {
    completions =
        std::to_string(succeeded) + "/1 of " + std::to_string(Int(job, {"spec", "parallelism"}));
  } else {
    completions = std::to_string(succeeded) + "/1";
  }
  std::string duration;
  auto start = ParseRfc3339(Str(job, {"status", "startTime"}));
  auto done = ParseRfc3339(Str(job, {"status", "completionTime"}));
  if (start) duration = HumanDuration((done ? *done : now) - *start);
  const json& conds = At(job, {"status", "conditions"});
  std::string status = "Running";
  if (HasCondition(conds, "Complete")) {
    status = "Complete";
  } else if (HasCondition(conds, "Failed")) {
    status = "Failed";
  } else if (!At(job, {"metadata", "deletionTimestamp"}).is_null()) {
    status = "Terminating";
  } else if (HasCondition(conds, "Suspended")) {
    status = "Suspended";
  } else if (HasCondition(conds, "FailureTarget")) {
    status = "FailureTarget";
  }
  std::vector<std::string> names, images;
  for (const json& c : Arr(job, {"spec", "template", "spec", "containers"})) {
    names.push_back(Str(c, {"name"}));
    images.push_back(Str(c, {"image"}));
  }
  return json::array({Str(job, {"metadata", "name"}), status, completions, duration,
                      Since(Str(job, {"metadata", "creationTimestamp"}), now), Join(names, ","),
                      Join(images, ","), FormatLabelSelector(At(job, {"spec", "selector"}))});
}

json JobColumns() {
  return json::array(
      {NameCol(), Col("Status", "Status of the job."),
       Col("Completions", "The number of pods which reached phase Succeeded."),
       Col("Duration", "Time required to complete the job."), AgeCol(),
       Col("Containers", "Names of each container in the template.", 1),
       Col("Images", "Images referenced by each container in the template.", 1),
       Col("Selector", "A label query over pods that should match the pod count.", 1)});
}

json ServiceCells(const json& svc, int64_t now) {
  const json& spec = At(svc, {"spec"});
  const std::string type = Str(spec, {"type"});
  std::string cluster_ip = "<none>";
  if (!Arr(spec, {"clusterIPs"}).empty() && spec["clusterIPs"][0].is_string()) {
    cluster_ip = spec["clusterIPs"][0].get<std::string>();
  } else if (!Str(spec, {"clusterIP"}).empty()) {
    cluster_ip = Str(spec, {"clusterIP"});
  }
  std::vector<std::string> external;
  for (const json& ip : Arr(spec, {"externalIPs"}))
    if (ip.is_string()) external.push_back(ip.get<std::string>());
  std::string external_ip = "<unknown>";
  if (type == "ClusterIP" || type == "NodePort") {
    external_ip = external.empty() ? "<none>" : Join(external, ",");
  } else if (type == "LoadBalancer") {
    std::set<std::string> lb;
    for (const json& in : Arr(svc, {"status", "loadBalancer", "ingress"})) {
      if (!Str(in, {"ip"}).empty()) {
        lb.insert(Str(in, {"ip"}));
      } else if (!Str(in, {"hostname"}).empty()) {
        lb.insert(Str(in, {"hostname"}));
      }
    }
    std::vector<std::string> all(lb.begin(), lb.end());
    all.insert(all.end(), external.begin(), external.end());
    external_ip = all.empty() ? "<pending>" : Join(all, ",");
  } else if (type == "ExternalName") {
    external_ip = Str(spec, {"externalName"});
  }
  std::vector<std::string> ports;
  for (const json& p : Arr(spec, {"ports"})) {
    std::string proto = Str(p, {"protocol"});
    if (proto.empty()) proto = "TCP";  // kube-apiserver defaults it; kubesim does not
    const int64_t node_port = Int(p, {"nodePort"});
    ports.push_back(std::to_string(Int(p, {"port"})) +
                    (node_port > 0 ? ":" + std::to_string(node_port) : "") + "/" + proto);
  }
  return json::array({Str(svc, {"metadata", "name"}), type, cluster_ip, external_ip,
                      ports.empty() ? "<none>" : Join(ports, ","),
                      Since(Str(svc, {"metadata", "creationTimestamp"}), now),
                      FormatLabels(At(spec, {"selector"}))});
}

json ServiceColumns() {
  return json::array({NameCol(), Col("Type", "type determines how the Service is exposed."),
                      Col("Cluster-IP", "clusterIP is the IP address of the service."),
                      Col("External-IP",
                          "externalIPs is a list of IP addresses for which nodes in the cluster "
                          "will also accept traffic for this service."),
                      Col("Port(s)", "The list of ports that are exposed by this service."),
                      AgeCol(),
                      Col("Selector",
                          "Route service traffic to pods with label keys and values matching this "
                          "selector.",
                          1)});
}

int64_t Size(const json& v) {
  return v.is_object() || v.is_array() ? static_cast<int64_t>(v.size()) : 0;
}

// ---- custom resources (apiextensions' tableconvertor) -----------------------------------

// The CRD's columns, or the Age column kube-apiserver serves when there are none.
json CrdColumns(const Printer& p) {
  if (p.crd_columns.is_array() && !p.crd_columns.empty()) return p.crd_columns;
  return json::array({{{"name", "Age"},
                       {"type", "date"},
                       {"description", kCreatedDesc},
                       {"jsonPath", ".metadata.creationTimestamp"}}});
}

// jsonpath's text for a string column: strings raw, other values as JSON.
json StringCell(const json& v) {
  if (v.is_string()) return v;
  return v.dump();
}

// apiextensions' cellForJSONValue: a date becomes an age on the server
// (metatable.ConvertToHumanReadableDateType), unlike the default table's "Created At".
json TypedCell(const std::string& type, const json& v, int64_t now) {
  if (v.is_null()) return nullptr;
  if (type == "integer" && v.is_number()) {
    return v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(v.get<double>());
  }
  if (type == "number" && v.is_number()) return v.get<double>();
  if (type == "boolean" && v.is_boolean()) return v;
  if (type == "string" && v.is_string()) return v;
  if (type == "date" && v.is_string()) {
    auto t = ParseRfc3339(v.get<std::string>());
    if (!t) return "<invalid>";
    return HumanDuration(now - *t);
  }
  return nullptr;
}

}  // namespace

std::optional<std::string> NegotiateTable(const std::string& accept) {
  size_t pos = 0;
  while (pos <= accept.size()) {
    size_t comma = accept.find(',', pos);
    if (comma == std::string::npos) comma = accept.size();
    std::string entry = accept.substr(pos, comma - pos);
    pos = comma + 1;
    std::map<std::string, std::string> params;
    std::string type;
    size_t p = 0;
    bool first = true;
    while (p <= entry.size()) {
      size_t semi = entry.find(';', p);
      if (semi == std::string::npos) semi = entry.size();
      std::string part = entry.substr(p, semi - p);
      p = semi + 1;
      part.erase(0, part.find_first_not_of(" \t"));
      part.erase(part.find_last_not_of(" \t") + 1);
      if (first) {
        type = part;
        first = false;
        continue;
      }
      auto eq = part.find('=');
      if (eq != std::string::npos) params[part.substr(0, eq)] = part.substr(eq + 1);
    }
    if (type.empty()) continue;
    auto as = params.find("as");
    if (as == params.end()) {
      if (type == "application/json" || type == "*/*" || type == "application/*") {
        return std::nullopt;
      }
      continue;
    }
    if (as->second == "Table" && type == "application/json" && params["g"] == "meta.k8s.io" &&
        (params["v"] == "v1" || params["v"] == "v1beta1")) {
      return "meta.k8s.io/" + params["v"];
    }
  }
  return std::nullopt;
}

IncludeObject ParseIncludeObject(const std::string& value) {
  if (value.empty() || value == "Metadata") return IncludeObject::kMetadata;
  if (value == "None") return IncludeObject::kNone;
  if (value == "Object") return IncludeObject::kObject;
  throw BadRequest("unrecognized includeObject value: \"" + value + "\"");
}

json Columns(const Printer& p) {
  if (p.custom) {
    json cols = json::array({NameCol()});
    for (const json& c : CrdColumns(p)) {
      const std::string path = c.value("jsonPath", "");
      std::string desc = c.value("description", "");
      if (desc.empty()) desc = "Custom resource definition column (in JSONPath format): " + path;
      cols.push_back(Col(c.value("name", ""), desc, c.value("priority", 0), c.value("type", ""),
                         c.value("format", "")));
    }
    return cols;
  }
  if (p.group.empty()) {
    if (p.plural == "pods") return PodColumns();
    if (p.plural == "nodes") return NodeColumns();
    if (p.plural == "events") return EventColumns();
    if (p.plural == "services") return ServiceColumns();
    if (p.plural == "configmaps") {
      return json::array(
          {NameCol(), Col("Data", "Data contains the configuration data."), AgeCol()});
    }
    if (p.plural == "secrets") {
      return json::array({NameCol(),
                          Col("Type",
                              "Used to facilitate programmatic handling of "
                              "secret data."),
                          Col("Data", "Data contains the secret data."), AgeCol()});
    }
    if (p.plural == "namespaces") {
      return json::array({NameCol(), Col("Status", "The status of the namespace"), AgeCol()});
    }
    if (p.plural == "serviceaccounts") {
      return json::array({NameCol(),
                          Col("Secrets",
                              "Secrets is a list of the secrets in the same namespace that pods "
                              "running using this ServiceAccount are allowed to use."),
                          AgeCol()});
    }
  }
  if (p.group == "events.k8s.io" && p.plural == "events") return EventColumns();
  if (p.group == "batch" && p.plural == "jobs") return JobColumns();
  return json::array({NameCol(), Col("Created At", kCreatedDesc, 0, "date")});
}

json Cells(const Printer& p, const json& obj, int64_t now) {
  json conditions;
  return CellsAndConditions(p, obj, now, &conditions);
}

json CellsAndConditions(const Printer& p, const json& obj, int64_t now, json* conditions) {
  const std::string name = Str(obj, {"metadata", "name"});
  const std::string created = Str(obj, {"metadata", "creationTimestamp"});
  if (p.custom) {
    json cells = json::array({name});
    for (const json& c : CrdColumns(p)) {
      const json v = EvalDottedPath(obj, c.value("jsonPath", ""));
      const std::string type = c.value("type", "");
      cells.push_back(v.is_null()        ? json(nullptr)
                      : type == "string" ? StringCell(v)
                                         : TypedCell(type, v, now));
    }
    return cells;
  }
  if (p.group.empty()) {
    if (p.plural == "pods") return PodCells(obj, now, conditions);
    if (p.plural == "nodes") return NodeCells(obj, now);
    if (p.plural == "events") return EventCells(obj, now);
    if (p.plural == "services") return ServiceCells(obj, now);
    if (p.plural == "configmaps") {
      return json::array(
          {name, Size(At(obj, {"data"})) + Size(At(obj, {"binaryData"})), Since(created, now)});
    }
    if (p.plural == "secrets") {
      std::string type = Str(obj, {"type"});
      if (type.empty()) type = "Opaque";  // kube-apiserver's default (DefaultSecret)
      return json::array({name, type, Size(At(obj, {"data"})), Since(created, now)});
    }
    if (p.plural == "namespaces") {
      return json::array({name, Str(obj, {"status", "phase"}), Since(created, now)});
    }
    if (p.plural == "serviceaccounts") {
      return json::array({name, Size(At(obj, {"secrets"})), Since(created, now)});
    }
  }
  if (p.group == "events.k8s.io" && p.plural == "events") return EventCells(CoreEvent(obj), now);
  if (p.group == "batch" && p.plural == "jobs") return JobCells(obj, now);
  auto t = ParseRfc3339(created);
  return json::array({name, t ? json(FormatRfc3339(*t)) : json("0001-01-01T00:00:00Z")});
}

json ToTable(const Printer& p, const std::vector<json>& objects, const json& list_meta,
             const Options& o, int64_t now) {
  json md = json::object();
  if (list_meta.is_object()) {
    for (const char* k : {"resourceVersion", "continue", "remainingItemCount"}) {
      if (list_meta.contains(k)) md[k] = list_meta[k];
    }
  } else if (objects.size() == 1) {
    const std::string rv = Str(objects[0], {"metadata", "resourceVersion"});
    if (!rv.empty()) md["resourceVersion"] = rv;
  }
  json rows = json::array();
  for (const json& obj : objects) {
    json conditions;
    json row = {{"cells", CellsAndConditions(p, obj, now, &conditions)}};
    if (!conditions.is_null()) row["conditions"] = conditions;
    switch (o.include) {
      case IncludeObject::kNone:
        row["object"] = nullptr;
        break;
      case IncludeObject::kMetadata:
        row["object"] = {{"kind", "PartialObjectMetadata"},
                         {"apiVersion", o.group_version},
                         {"metadata", At(obj, {"metadata"})}};
        break;
      case IncludeObject::kObject:
        row["object"] = obj;
        break;
    }
    rows.push_back(std::move(row));
  }
  return {{"kind", "Table"},
          {"apiVersion", o.group_version},
          {"metadata", md},
          {"columnDefinitions", o.no_headers ? json(nullptr) : Columns(p)},
          {"rows", rows}};
}

json EvalDottedPath(const json& obj, const std::string& path) {
  if (path.size() < 2 || path[0] != '.') return nullptr;
  for (char c : path) {
    if (c == '[' || c == ']' || c == '*' || c == '{' || c == '}' || c == '@' || c == '$' ||
        c == '\'' || c == '"' || c == ' ') {
      return nullptr;
    }
  }
  const json* cur = &obj;
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t dot = path.find('.', pos);
    if (dot == std::string::npos) dot = path.size();
    const std::string key = path.substr(pos, dot - pos);
    if (key.empty() || !cur->is_object()) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    pos = dot + 1;
  }
  return *cur;
}

std::string HumanDuration(int64_t seconds) {
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 60 * 2) return std::to_string(seconds) + "s";
  const int64_t minutes = seconds / 60;
  if (minutes < 10) {
    const int64_t s = seconds % 60;
    return s == 0 ? std::to_string(minutes) + "m"
                  : std::to_string(minutes) + "m" + std::to_string(s) + "s";
  }
  if (minutes < 60 * 3) return std::to_string(minutes) + "m";
  const int64_t hours = seconds / 3600;
  if (hours < 8) {
    const int64_t m = minutes % 60;
    return m == 0 ? std::to_string(hours) + "h"
                  : std::to_string(hours) + "h" + std::to_string(m) + "m";
  }
  if (hours < 48) return std::to_string(hours) + "h";
  if (hours < 24 * 8) {
    const int64_t h = hours % 24;
    return h == 0 ? std::to_string(hours / 24) + "d"
                  : std::to_string(hours / 24) + "d" + std::to_string(h) + "h";
  }
  if (hours < 24 * 365 * 2) return std::to_string(hours / 24) + "d";
  if (hours < 24 * 365 * 8) {
    const int64_t dy = (hours / 24) % 365;
    return dy == 0 ? std::to_string(hours / 24 / 365) + "y"
                   : std::to_string(hours / 24 / 365) + "y" + std::to_string(dy) + "d";
  }
  return std::to_string(hours / 24 / 365) + "y";
}

std::optional<int64_t> ParseRfc3339(const std::string& text) {
  const std::optional<int64_t> ms = starforge::ParseRfc3339(text);  // common/format.h
  if (!ms) return std::nullopt;
  return *ms / 1000;
}

}  // namespace kubesim::table
