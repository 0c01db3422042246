// The KubeRay RayCluster controller (raycluster-controller), after KubeRay v1.7.0
// controllers/ray/raycluster_controller.go and common/pod.go, common/service.go: the head
// Service, the head pod and the worker pods (generateName, the §3.2 labels, injected env, the
// generated `ray start` command, the wait-gcs-ready init container, /dev/shm), replica
// reconciliation, and the status (state, conditions, head info, endpoints, replica counts,
// desired resources) written only when it changes. upstream-facts §3.2, §4, §9.4-9.6.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "controllers/controller.h"
#include "controllers/events.h"
#include "controllers/kuberay.h"
#include "controllers/kubeutil.h"
#include "controllers/operator.h"
#include "controllers/reconciler.h"

namespace kubesim::controllers {

namespace {

namespace kube = starforge::kube;
using std::chrono::milliseconds;
using Params = std::map<std::string, std::string>;

std::string GoFloat(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e21) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// {"a":1,"b":0.5} with Go's float formatting and sorted keys.
std::string FloatMapJson(const std::map<std::string, double>& m) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : m) {
    if (!first) out += ",";
    first = false;
    out += json(k).dump() + ":" + GoFloat(v);
  }
  return out + "}";
}

Params StartParams(const json& group) {
  Params p;
  const json& rsp = group.value("rayStartParams", json::object());
  if (rsp.is_object()) {
    for (const auto& [k, v] : rsp.items()) {
      p[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
  }
  return p;
}

bool IsGpuKey(const std::string& key) {
  if (key.size() >= 3 && key.compare(key.size() - 3, 3, "gpu") == 0) return true;
  // nvidia.com/mig-<n>g.<m>gb
  const std::string prefix = "nvidia.com/mig-";
  if (key.rfind(prefix, 0) != 0) return false;
  size_t i = prefix.size();
  auto digits = [&]() {
    size_t s = i;
    while (i < key.size() && std::isdigit(static_cast<unsigned char>(key[i])))
      ++i;
    return i > s;
  };
  if (!digits() || i >= key.size() || key[i] != 'g') return false;
  ++i;
  if (i >= key.size() || key[i] != '.') return false;
  ++i;
  if (!digits()) return false;
  return key.substr(i) == "gb";
}

// common/pod.go updateRayStartParamsResources: the group's top-level `resources` map.
void UpdateParamsResources(Params& p, const json& group_resources) {
  if (!group_resources.is_object() || group_resources.empty()) return;
  std::map<std::string, double> custom;
  for (const auto& [name, qv] : group_resources.items()) {
    if (!qv.is_string()) continue;
    const std::optional<Quantity> parsed = Quantity::Parse(qv.get<std::string>());
    if (!parsed) continue;
    const Quantity& q = *parsed;
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (lower == "cpu") {
      p["num-cpus"] = std::to_string(q.Value());
    } else if (lower == "memory") {
      p["memory"] = std::to_string(q.Value());
    } else if (IsGpuKey(lower)) {
      p["num-gpus"] = std::to_string(q.Value());
    } else {
      custom[name] = static_cast<double>(q.MilliValue()) / 1000.0;
    }
  }
  if (!custom.empty()) p["resources"] = "'" + FloatMapJson(custom) + "'";
}

void UpdateParamsLabels(Params& p, const json& group_labels) {
  if (!group_labels.is_object() || group_labels.empty()) return;
  std::map<std::string, std::string> sorted;
  for (const auto& [k, v] : group_labels.items())
    sorted[k] = v.is_string() ? v.get<std::string>() : v.dump();
  std::string out;
  for (const auto& [k, v] : sorted)
    out += (out.empty() ? "" : ",") + k + "=" + v;
  p["labels"] = out;
}

void SetMissingParams(Params& p, bool head, const std::string& head_port, const std::string& fqdn) {
  if (!head && p.count("address") == 0) p["address"] = fqdn + ":" + head_port;
  if (head && p.count("dashboard-host") == 0) p["dashboard-host"] = "0.0.0.0";
  if (p.count("metrics-export-port") == 0) p["metrics-export-port"] = "8080";
  p["block"] = "true";
  if (p.count("dashboard-agent-listen-port") == 0) p["dashboard-agent-listen-port"] = "52365";
}

std::string ConvertParamMap(const Params& p) {
  std::string out;
  for (const auto& [k, v] : p) {
    std::string lower = v;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    const bool special = k == "log-color" || k == "include-dashboard" || k == "include-log-monitor";
    if ((lower == "true" || lower == "false") && !special) {
      if (lower == "true") out += " --" + k + " ";
    } else {
      out += " --" + k + "=" + v + " ";
    }
  }
  return out;
}

// common/pod.go generateRayStartCommand (+ addWellKnownAcceleratorResources).
std::string RayStartCommand(bool head, Params& p, const json& resources) {
  const json& limits = resources.value("limits", json::object());
  const json& requests = resources.value("requests", json::object());
  auto qty = [](const json& list, const char* key, Quantity* q) {
    if (!list.is_object() || !list.contains(key) || !list[key].is_string()) return false;
    const std::optional<Quantity> parsed = Quantity::Parse(list[key].get<std::string>());
    if (parsed) *q = *parsed;
    return parsed && !parsed->IsZero();
  };
  Quantity q;
  if (p.count("num-cpus") == 0) {
    if (qty(limits, "cpu", &q) || qty(requests, "cpu", &q))
      p["num-cpus"] = std::to_string(q.Value());
  }
  if (p.count("memory") == 0 && qty(limits, "memory", &q)) p["memory"] = std::to_string(q.Value());
  if (limits.is_object() && !limits.empty()) {
    std::map<std::string, double> res_map;
    bool have_map = true;
    if (p.count("resources") != 0) {
      std::string s = p["resources"];
      const std::string trim = "'\"` ";
      s.erase(0, s.find_first_not_of(trim));
      s.erase(s.find_last_not_of(trim) + 1);
      json parsed = json::parse(s, nullptr, false);
      if (parsed.is_object()) {
        for (const auto& [k, v] : parsed.items())
          if (v.is_number()) res_map[k] = v.get<double>();
      } else {
        have_map = false;
      }
    }
    const std::map<std::string, std::string> accel = {{"aws.amazon.com/neuroncore", "neuron_cores"},
                                                      {"google.com/tpu", "TPU"}};
    bool accel_added = false;
    for (const auto& [k, ray_name] : accel)
      if (res_map.count(ray_name) != 0) accel_added = true;
    std::vector<std::string> keys;
    for (const auto& [k, v] : limits.items())
      keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    for (const std::string& k : keys) {
      if (!limits[k].is_string()) continue;
      const std::optional<Quantity> parsed = Quantity::Parse(limits[k].get<std::string>());
      if (!parsed) continue;
      const Quantity& v = *parsed;
      if (p.count("num-gpus") == 0 && IsGpuKey(k) && !v.IsZero()) {
        p["num-gpus"] = std::to_string(v.Value());
      }
      if (have_map && !accel_added) {
        auto it = accel.find(k);
        if (it != accel.end() && !v.IsZero()) {
          if (res_map.count(it->second) == 0) {
            res_map[it->second] = static_cast<double>(v.MilliValue()) / 1000.0;
            p["resources"] = "'" + FloatMapJson(res_map) + "'";
          }
          accel_added = true;
        }
      }
    }
  }
  return head ? "ray start --head " + ConvertParamMap(p) : "ray start " + ConvertParamMap(p);
}

bool EnvExists(const json& env, const std::string& name) {
  if (!env.is_array()) return false;
  for (const json& e : env)
    if (e.value("name", "") == name) return true;
  return false;
}

json FieldRefEnv(const std::string& name, const std::string& path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
}

std::string CmdToString(const json& arr) {
  std::string out;
  if (!arr.is_array()) return out;
  for (const json& v : arr)
    out += " " + (v.is_string() ? v.get<std::string>() : v.dump()) + " ";
  return out;
}

json LabelPod(bool head, const std::string& cluster, const std::string& group,
              const json& override_labels) {
  json labels = {{kRayIsNodeLabel, "yes"},
                 {kRayClusterLabel, cluster},
                 {kRayNodeTypeLabel, head ? "head" : "worker"},
                 {kRayGroupLabel, group},
                 {kRayIdLabel, cluster + (head ? "-head" : "-worker")},
                 {kAppNameLabel, "kuberay"},
                 {kCreatedByLabel, "kuberay-operator"}};
  if (override_labels.is_object()) {
    for (const auto& [k, v] : override_labels.items()) {
      if (k == kRayNodeTypeLabel || k == kRayGroupLabel || k == kRayClusterLabel) continue;
      labels[k] = v;
    }
  }
  return labels;
}

// utils.PodName: "<prefix[:50]>-<type>-", lowercased.
std::string PodGenerateName(const std::string& prefix, const std::string& type) {
  std::string p = prefix.size() > 50 ? prefix.substr(0, 50) : prefix;
  std::string out = p + "-" + type + "-";
  std::transform(out.begin(), out.end(), out.begin(), ::tolower);
  return out;
}

std::string FnvHash(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  static const char* kB32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  std::string out;
  for (int i = 0; i < 13; ++i) {
    out.push_back(kB32[h & 31]);
    h >>= 5;
  }
  return out;
}

struct PodBuild {
  const json* cluster;
  const OperatorFeatures* f;
  bool head;
  const json* group;  // headGroupSpec or a workerGroupSpec
  std::string group_name;
  int replica_index = 0;
  std::string replica_name{};  // multi-host only
  int host_index = 0;
  int num_hosts = 1;
};

// common/pod.go DefaultHeadPodTemplate / DefaultWorkerPodTemplate + BuildPod.
json BuildPod(const PodBuild& b) {
  const json& cluster = *b.cluster;
  const std::string cname = Str(cluster, {"metadata", "name"});
  const std::string ns = Str(cluster, {"metadata", "namespace"});
  const std::string fqdn = HeadFqdn(cluster);
  Params head_params = StartParams(At(cluster, {"spec", "headGroupSpec"}));
  const std::string head_port = head_params.count("port") ? head_params["port"] : "6379";
  const std::string crd_type =
      Str(cluster, {"metadata", "labels", kOriginCrdLabel}) == "RayJob" ? "RayJob" : "RayCluster";

  json tmpl = b.group->value("template", json::object());
  json md = tmpl.value("metadata", json::object());
  json spec = tmpl.value("spec", json::object());
  json& containers = spec["containers"];
  json& c0 = containers[0];

  Params params = StartParams(*b.group);
  UpdateParamsResources(params, b.group->value("resources", json::object()));
  UpdateParamsLabels(params, b.group->value("labels", json::object()));
  json merged_labels = md.value("labels", json::object());
  const json& group_labels = b.group->value("labels", json::object());
  if (group_labels.is_object()) {
    for (const auto& [k, v] : group_labels.items())
      merged_labels[k] = v;
  }
  json labels = LabelPod(b.head, cname, b.head ? "headgroup" : b.group_name, merged_labels);
  if (!b.head && b.f->replica_index_label) {
    labels["ray.io/worker-group-replica-index"] = std::to_string(b.replica_index);
    if (b.num_hosts > 1) {
      labels["ray.io/worker-group-replica-name"] = b.replica_name;
      labels["ray.io/replica-host-index"] = std::to_string(b.host_index);
    }
  }

  // The wait-gcs-ready init container (workers), with the Ray container's env and mounts as
  // they are before the injections below.
  if (!b.head) {
    const std::string faq =
        b.f->kuberay_version == "v1.7.0"
            ? "https://docs.ray.io/en/master/cluster/kubernetes/troubleshooting.html"
            : "https://github.com/ray-project/kuberay/blob/master/docs/guidance/FAQ.md";
    const std::string addr = fqdn + ":" + head_port;
    const std::string script =
        "\n\t\t\t\t\tSECONDS=0\n\t\t\t\t\twhile true; do\n\t\t\t\t\t\tif (( SECONDS <= 120 )); "
        "then\n\t\t\t\t\t\t\tif ray health-check --address " +
        addr +
        " > /dev/null 2>&1; then\n\t\t\t\t\t\t\t\techo \"GCS is ready.\"\n\t\t\t\t\t\t\t\tbreak\n"
        "\t\t\t\t\t\t\tfi\n\t\t\t\t\t\t\techo \"$SECONDS seconds elapsed: Waiting for GCS to be "
        "ready.\"\n\t\t\t\t\t\telse\n\t\t\t\t\t\t\tif ray health-check --address " +
        addr +
        "; then\n\t\t\t\t\t\t\t\techo \"GCS is ready. Any error messages above can be safely "
        "ignored.\"\n\t\t\t\t\t\t\t\tbreak\n\t\t\t\t\t\t\tfi\n\t\t\t\t\t\t\techo \"$SECONDS "
        "seconds elapsed: Still waiting for GCS to be ready. For troubleshooting, refer to the "
        "FAQ at " +
        faq + ".\"\n\t\t\t\t\t\tfi\n\t\t\t\t\t\tsleep 5\n\t\t\t\t\tdone\n\t\t\t\t";
    json init = {{"name", "wait-gcs-ready"},
                 {"image", c0.value("image", "")},
                 {"command", json::array({"/bin/bash", "-c", "--"})},
                 {"args", json::array({script})},
                 {"resources",
                  {{"limits", {{"cpu", "200m"}, {"memory", "256Mi"}}},
                   {"requests", {{"cpu", "200m"}, {"memory", "256Mi"}}}}}};
    if (c0.contains("imagePullPolicy")) init["imagePullPolicy"] = c0["imagePullPolicy"];
    if (c0.contains("securityContext")) init["securityContext"] = c0["securityContext"];
    if (c0.contains("env")) init["env"] = c0["env"];
    if (c0.contains("volumeMounts")) init["volumeMounts"] = c0["volumeMounts"];
    if (!spec.contains("initContainers") || !spec["initContainers"].is_array())
      spec["initContainers"] = json::array();
    spec["initContainers"].push_back(init);
  }

  SetMissingParams(params, b.head, head_port, fqdn);

  // Annotations.
  json annotations = md.value("annotations", json::object());
  const bool overwrite_cmd = [&] {
    std::string v = Str(cluster, {"metadata", "annotations", "ray.io/overwrite-container-cmd"});
    std::transform(v.begin(), v.end(), v.begin(), ::tolower);
    return v == "true";
  }();
  if (overwrite_cmd) annotations["ray.io/overwrite-container-cmd"] = "true";
  // configureGCSFaultTolerance: the head pod says whether GCS fault tolerance is on (the
  // cluster's ray.io/ft-enabled annotation or gcsFaultToleranceOptions; kubesim runs neither).
  if (b.head) {
    std::string ft = Str(cluster, {"metadata", "annotations", "ray.io/ft-enabled"});
    std::transform(ft.begin(), ft.end(), ft.begin(), ::tolower);
    const bool ft_enabled =
        ft == "true" || At(cluster, {"spec", "gcsFaultToleranceOptions"}).is_object();
    annotations["ray.io/ft-enabled"] = ft_enabled ? "true" : "false";
  }
  if (b.head && b.f->recreate_hash_annotation) {
    json hashed = cluster.value("spec", json::object());
    if (hashed.contains("workerGroupSpecs")) {
      for (json& g : hashed["workerGroupSpecs"]) {
        g.erase("replicas");
        g.erase("scaleStrategy");
      }
    }
    annotations["ray.io/upgrade-strategy-recreate-hash"] = FnvHash(hashed.dump());
    annotations["ray.io/kuberay-version"] = b.f->kuberay_version;
  }

  // metrics port on the Ray container.
  bool has_metrics = false;
  if (c0.contains("ports") && c0["ports"].is_array()) {
    for (const json& p : c0["ports"])
      if (p.value("name", "") == "metrics") has_metrics = true;
  }
  if (!has_metrics) {
    if (!c0.contains("ports") || !c0["ports"].is_array()) c0["ports"] = json::array();
    c0["ports"].push_back({{"name", "metrics"}, {"containerPort", 8080}});
  }

  // /dev/shm (unless plasma-directory is given).
  if (params.count("plasma-directory") == 0) {
    bool mounted = false;
    if (c0.contains("volumeMounts") && c0["volumeMounts"].is_array()) {
      for (const json& m : c0["volumeMounts"])
        if (m.value("mountPath", "") == "/dev/shm") mounted = true;
    }
    if (!mounted) {
      bool exists = false;
      if (spec.contains("volumes") && spec["volumes"].is_array()) {
        for (const json& v : spec["volumes"])
          if (v.value("name", "") == "shared-mem") exists = true;
      } else {
        spec["volumes"] = json::array();
      }
      if (!exists) {
        json empty_dir = {{"medium", "Memory"}};
        const json& res = c0.value("resources", json::object());
        const json& lim = res.value("limits", json::object());
        const json& req = res.value("requests", json::object());
        if (lim.is_object() && lim.contains("memory")) {
          empty_dir["sizeLimit"] = lim["memory"];
        } else if (req.is_object() && req.contains("memory")) {
          empty_dir["sizeLimit"] = req["memory"];
        }
        spec["volumes"].push_back({{"name", "shared-mem"}, {"emptyDir", empty_dir}});
      }
      if (!c0.contains("volumeMounts") || !c0["volumeMounts"].is_array())
        c0["volumeMounts"] = json::array();
      c0["volumeMounts"].push_back({{"mountPath", "/dev/shm"}, {"name", "shared-mem"}});
    }
  }

  // The container command: /bin/bash -c -- "ulimit -n ...; ray start ...".
  std::string cmd = CmdToString(c0.value("command", json::array()));
  cmd += CmdToString(c0.value("args", json::array()));
  const std::string ray_start =
      RayStartCommand(b.head, params, c0.value("resources", json::object()));
  bool overwrite_pod = false;
  {
    std::string v = annotations.value("ray.io/overwrite-container-cmd", "");
    std::transform(v.begin(), v.end(), v.begin(), ::tolower);
    overwrite_pod = v == "true";
  }
  if (!overwrite_pod && cmd.find("ray start") == std::string::npos) {
    const std::string generated =
        (b.f->ulimit_env ? "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; "
                         : "ulimit -n 65536; ") +
        ray_start;
    c0["command"] = json::array({"/bin/bash", "-c", "--"});
    c0["args"] = json::array({cmd.empty() ? generated : cmd + " && " + generated});
  }

  // Env of init containers: FQ_RAY_IP, RAY_IP.
  if (spec.contains("initContainers") && spec["initContainers"].is_array()) {
    for (json& ic : spec["initContainers"]) {
      if (!ic.contains("env") || !ic["env"].is_array()) ic["env"] = json::array();
      ic["env"].push_back({{"name", "FQ_RAY_IP"}, {"value", fqdn}});
      ic["env"].push_back({{"name", "RAY_IP"}, {"value", fqdn.substr(0, fqdn.find('.'))}});
    }
  }
  // Env of the Ray container (setContainerEnvVars).
  if (!c0.contains("env") || !c0["env"].is_array()) c0["env"] = json::array();
  json& env = c0["env"];
  const std::string ip = b.head ? "127.0.0.1" : fqdn;
  if (!b.head) {
    env.push_back({{"name", "FQ_RAY_IP"}, {"value", ip}});
    env.push_back({{"name", "RAY_IP"}, {"value", ip.substr(0, ip.find('.'))}});
  }
  env.push_back(FieldRefEnv("RAY_CLUSTER_NAME", "metadata.labels['ray.io/cluster']"));
  if (b.f->kuberay_version == "v1.7.0") {
    env.push_back(FieldRefEnv("RAY_CLUSTER_NAMESPACE", "metadata.namespace"));
  }
  env.push_back(FieldRefEnv("RAY_CLOUD_INSTANCE_ID", "metadata.name"));
  env.push_back(FieldRefEnv("RAY_NODE_TYPE_NAME", "metadata.labels['ray.io/group']"));
  env.push_back({{"name", "KUBERAY_GEN_RAY_START_CMD"}, {"value", ray_start}});
  if (!EnvExists(env, "RAY_PORT")) env.push_back({{"name", "RAY_PORT"}, {"value", head_port}});
  if (!EnvExists(env, "RAY_ADDRESS")) {
    env.push_back({{"name", "RAY_ADDRESS"}, {"value", ip + ":" + head_port}});
  }
  if (!EnvExists(env, "RAY_USAGE_STATS_KUBERAY_IN_USE")) {
    env.push_back({{"name", "RAY_USAGE_STATS_KUBERAY_IN_USE"}, {"value", "1"}});
  }
  if (b.head) {
    env.push_back(
        {{"name", "RAY_USAGE_STATS_EXTRA_TAGS"},
         {"value", "kuberay_version=" + b.f->kuberay_version + ";kuberay_crd=" + crd_type}});
  }
  if (!EnvExists(env, "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE")) {
    env.push_back({{"name", "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE"}, {"value", "1"}});
  }

  json pod_md = {{"generateName", b.head ? PodGenerateName(cname, "head")
                                         : PodGenerateName(cname + "-" + b.group_name, "worker")},
                 {"namespace", ns},
                 {"labels", labels},
                 {"ownerReferences", json::array({ControllerRef(cluster)})}};
  if (!annotations.empty()) pod_md["annotations"] = annotations;
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", pod_md}, {"spec", spec}};
}

// Desired replicas of a worker group (utils.GetWorkerGroupDesiredReplicas).
int64_t GroupDesired(const json& g) {
  if (g.value("suspend", false)) return 0;
  const int64_t min = g.value("minReplicas", 0);
  const int64_t max = g.value("maxReplicas", static_cast<int64_t>(2147483647));
  const int64_t hosts = std::max<int64_t>(1, g.value("numOfHosts", 1));
  int64_t r =
      g.contains("replicas") && g["replicas"].is_number() ? g["replicas"].get<int64_t>() : min;
  if (r < min) r = min;
  if (r > max) r = max;
  return r * hosts;
}

// Sum of a pod spec's resources, requests over limits (utils.CalculatePodResource).
std::map<std::string, Quantity> PodResources(const json& pod_spec) {
  std::map<std::string, Quantity> total;
  const json& containers = pod_spec.value("containers", json::array());
  for (const json& c : containers) {
    std::map<std::string, Quantity> cr;
    const json& res = c.value("resources", json::object());
    for (const char* kind : {"requests", "limits"}) {
      const json& list = res.value(kind, json::object());
      if (!list.is_object()) continue;
      for (const auto& [k, v] : list.items()) {
        if (cr.count(k) != 0 || !v.is_string()) continue;
        if (const std::optional<Quantity> q = Quantity::Parse(v.get<std::string>())) cr[k] = *q;
      }
    }
    for (const auto& [k, q] : cr)
      total[k].Add(q);
  }
  return total;
}

json SetCondition(json conds, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, const std::string& now) {
  for (json& c : conds) {
    if (c.value("type", "") != type) continue;
    if (c.value("status", "") != status) {
      c["status"] = status;
      c["lastTransitionTime"] = now;
    }
    c["reason"] = reason;
    c["message"] = message;
    return conds;
  }
  conds.push_back({{"type", type},
                   {"status", status},
                   {"lastTransitionTime", now},
                   {"reason", reason},
                   {"message", message}});
  return conds;
}

std::string ConditionStatus(const json& conds, const std::string& type) {
  if (!conds.is_array()) return "";
  for (const json& c : conds)
    if (c.value("type", "") == type) return c.value("status", "");
  return "";
}

// utils.InconsistentRayClusterStatus: everything but lastUpdateTime, observedGeneration and the
// desired resources.
bool StatusChanged(const json& a, const json& b) {
  for (const char* k : {"state", "reason", "readyWorkerReplicas", "availableWorkerReplicas",
                        "desiredWorkerReplicas", "minWorkerReplicas", "maxWorkerReplicas",
                        "endpoints", "head", "conditions"}) {
    const json av = a.is_object() && a.contains(k) ? a[k] : json();
    const json bv = b.is_object() && b.contains(k) ? b[k] : json();
    const bool a_empty = av.is_null() || (av.is_object() && av.empty()) || av == json(0) ||
                         (av.is_string() && av.get<std::string>().empty());
    const bool b_empty = bv.is_null() || (bv.is_object() && bv.empty()) || bv == json(0) ||
                         (bv.is_string() && bv.get<std::string>().empty());
    if (a_empty && b_empty) continue;
    if (av != bv) return true;
  }
  return false;
}

class RayClusterController : public Controller, public Reconciler {
 public:
  RayClusterController() : Reconciler("raycluster-controller", 4) {}
  ~RayClusterController() override { Stop(); }
  void Start(const ControllerContext& ctx) override {
    features_ = OperatorFeatures::For(ctx.flags);
    set_workers(PositiveIntFlag(ctx.flags, kReconcileConcurrencyFlag, 4));
    StartReconciler(ctx);
  }
  void Stop() override { StopReconciler(); }

 protected:
  void SetUp() override {
    recorder_ = std::make_unique<EventRecorder>(
        *client_, EventSource{features_.events_api, "raycluster-controller", ""});
    kube::InformerOptions rc;
    rc.resource = kRayClusters;
    AddInformer(rc, EnqueueSelf());
    auto by_label = [](const json& o) -> std::string {
      const std::string c = Str(o, {"metadata", "labels", kRayClusterLabel});
      return c.empty() ? "" : Str(o, {"metadata", "namespace"}) + "/" + c;
    };
    kube::InformerOptions pods;
    pods.resource = kube::resources::kPods;
    pods.label_selector = kRayClusterLabel;
    AddInformer(pods, EnqueueMapped(by_label));
    kube::InformerOptions svcs;
    svcs.resource = kube::resources::kServices;
    svcs.label_selector = kRayClusterLabel;
    AddInformer(svcs, EnqueueMapped(by_label));
  }

  milliseconds Reconcile(const std::string& key) override {
    const std::string ns = key.substr(0, key.find('/'));
    const std::string name = key.substr(key.find('/') + 1);
    json cluster;
    try {
      cluster = client_->Get(kRayClusters, ns, name);
    } catch (const kube::ApiError& e) {
      if (kube::IsNotFound(e)) return milliseconds(-1);
      throw;
    }
    const std::string managed_by = Str(cluster, {"spec", "managedBy"});
    if (!managed_by.empty() && managed_by != "ray.io/kuberay-operator") return milliseconds(-1);
    if (IsDeleting(cluster)) return milliseconds(-1);
    const json& head_containers =
        At(cluster, {"spec", "headGroupSpec", "template", "spec", "containers"});
    if (!head_containers.is_array() || head_containers.empty()) {
      recorder_->Emit(cluster, "Warning", "InvalidRayClusterSpec", "Validate",
                      "The RayCluster spec is invalid " + ns + "/" + name +
                          ": headGroupSpec should have at least one container");
      return milliseconds(-1);
    }

    std::string reconcile_err;
    std::string failure_reason;
    try {
      ReconcileHeadService(cluster);
      ReconcilePods(cluster, &reconcile_err, &failure_reason);
    } catch (const kube::ApiError& e) {
      if (kube::IsConflict(e)) throw;
      reconcile_err = e.message();
    }

    // calculateStatus.
    const std::string now = NowRfc3339();
    json old_status = cluster.value("status", json::object());
    json st = old_status;
    json conds = st.value("conditions", json::array());
    if (!reconcile_err.empty() && !failure_reason.empty()) {
      conds = SetCondition(conds, "ReplicaFailure", "True", failure_reason, reconcile_err, now);
    } else if (reconcile_err.empty()) {
      json kept = json::array();
      for (const json& c : conds)
        if (c.value("type", "") != "ReplicaFailure") kept.push_back(c);
      conds = kept;
    }
    if (cluster["metadata"].contains("generation"))
      st["observedGeneration"] = cluster["metadata"]["generation"];

    kube::ListOptions lo;
    lo.label_selector = std::string(kRayClusterLabel) + "=" + name;
    json pods = client_->List(kube::resources::kPods, ns, lo)["items"];
    int64_t ready_workers = 0;
    int64_t available_workers = 0;
    const json* head_pod = nullptr;
    bool all_running = !pods.empty();
    for (const json& p : pods) {
      const bool worker = Str(p, {"metadata", "labels", kRayNodeTypeLabel}) == "worker";
      if (worker && PodRunningAndReady(p)) ++ready_workers;
      if (worker && PodPhase(p) == "Running") ++available_workers;
      if (!PodRunningAndReady(p)) all_running = false;
      if (Str(p, {"metadata", "labels", kRayNodeTypeLabel}) == "head" && head_pod == nullptr)
        head_pod = &p;
    }
    const json& groups = At(cluster, {"spec", "workerGroupSpecs"});
    int64_t desired = 0;
    int64_t min_total = 0;
    int64_t max_total = 0;
    std::map<std::string, Quantity> total =
        PodResources(At(cluster, {"spec", "headGroupSpec", "template", "spec"}).is_object()
                         ? At(cluster, {"spec", "headGroupSpec", "template", "spec"})
                         : json::object());
    if (groups.is_array()) {
      for (const json& g : groups) {
        desired += GroupDesired(g);
        if (g.value("suspend", false)) continue;
        const int64_t hosts = std::max<int64_t>(1, g.value("numOfHosts", 1));
        min_total += g.value("minReplicas", 0) * hosts;
        max_total += g.value("maxReplicas", static_cast<int64_t>(2147483647)) * hosts;
        std::map<std::string, Quantity> pr = PodResources(
            At(g, {"template", "spec"}).is_object() ? At(g, {"template", "spec"}) : json::object());
        const int64_t replicas =
            g.contains("replicas") && g["replicas"].is_number() ? g["replicas"].get<int64_t>() : 0;
        for (auto& [k, q] : pr) {
          q.Mul(replicas * hosts);
          total[k].Add(q);
        }
      }
    }
    max_total = std::min<int64_t>(max_total, 2147483647);
    auto set_or_erase = [&](const char* k, int64_t v) {
      if (v != 0) {
        st[k] = v;
      } else {
        st.erase(k);
      }
    };
    set_or_erase("readyWorkerReplicas", ready_workers);
    set_or_erase("availableWorkerReplicas", available_workers);
    set_or_erase("desiredWorkerReplicas", desired);
    set_or_erase("minWorkerReplicas", min_total);
    set_or_erase("maxWorkerReplicas", max_total);
    Quantity gpus;
    for (const auto& [k, q] : total)
      if (IsGpuKey(k)) gpus.Add(q);
    st["desiredCPU"] = total.count("cpu") ? total["cpu"].String() : "0";
    st["desiredMemory"] = total.count("memory") ? total["memory"].String() : "0";
    st["desiredGPU"] = gpus.String();
    st["desiredTPU"] = total.count("google.com/tpu") ? total["google.com/tpu"].String() : "0";

    if (reconcile_err.empty() && static_cast<int64_t>(pods.size()) == desired + 1 && all_running) {
      st["state"] = "ready";
      st.erase("reason");
    }
    // Conditions (gate RayClusterStatusConditions, on).
    if (head_pod == nullptr) {
      conds = SetCondition(conds, "HeadPodReady", "False", "HeadPodNotFound", "Head Pod not found",
                           now);
    } else {
      std::string status = "False";
      std::string reason = "Unknown";
      std::string message;
      const json& pc = At(*head_pod, {"status", "conditions"});
      if (pc.is_array()) {
        for (const json& c : pc) {
          if (c.value("type", "") != "Ready") continue;
          status = c.value("status", "False");
          message = c.value("message", "");
          std::string r = c.value("reason", "");
          if (status == "True" && r.empty()) r = "HeadPodRunningAndReady";
          if (!r.empty()) reason = r;
          if (r == "ContainersNotReady") {
            const json& cs = At(*head_pod, {"status", "containerStatuses"});
            if (cs.is_array()) {
              for (const json& s : cs) {
                const json& state = s.value("state", json::object());
                const char* which = state.contains("waiting")      ? "waiting"
                                    : state.contains("terminated") ? "terminated"
                                                                   : nullptr;
                if (which == nullptr) continue;
                if (!message.empty()) message += "; ";
                message += s.value("name", "") + ": " + state[which].value("message", "");
                reason = state[which].value("reason", "");
                break;
              }
            }
          }
          break;
        }
      }
      conds = SetCondition(conds, "HeadPodReady", status, reason, message, now);
    }
    const bool suspended = ConditionStatus(conds, "RayClusterSuspended") == "True";
    if (ConditionStatus(conds, "RayClusterProvisioned") != "True" && !suspended) {
      if (all_running) {
        conds =
            SetCondition(conds, "RayClusterProvisioned", "True", "AllPodRunningAndReadyFirstTime",
                         "All Ray Pods are ready for the first time", now);
      } else {
        conds = SetCondition(conds, "RayClusterProvisioned", "False", "RayClusterPodsProvisioning",
                             "RayCluster Pods are being provisioned for first time", now);
      }
    }
    const bool suspend_spec = At(cluster, {"spec", "suspend"}).is_boolean() &&
                              At(cluster, {"spec", "suspend"}).get<bool>();
    if (ConditionStatus(conds, "RayClusterSuspending") == "True") {
      if (pods.empty()) {
        conds = SetCondition(conds, "RayClusterProvisioned", "False", "RayClusterPodsProvisioning",
                             "RayCluster has been suspended", now);
        conds =
            SetCondition(conds, "RayClusterSuspending", "False", "RayClusterSuspending", "", now);
        conds = SetCondition(conds, "RayClusterSuspended", "True", "RayClusterSuspended", "", now);
      }
    } else if (suspended) {
      if (!suspend_spec) {
        conds = SetCondition(conds, "RayClusterSuspended", "False", "RayClusterSuspended", "", now);
      }
    } else {
      conds = SetCondition(conds, "RayClusterSuspended", "False", "RayClusterSuspended", "", now);
      conds = SetCondition(conds, "RayClusterSuspending", suspend_spec ? "True" : "False",
                           "RayClusterSuspending", "", now);
    }
    if (suspend_spec && pods.empty()) st["state"] = "suspended";
    st["conditions"] = conds;

    // endpoints and head info.
    json svc;
    try {
      svc = client_->Get(kube::resources::kServices, ns, HeadServiceName(cluster));
    } catch (const kube::ApiError& e) {
      if (!kube::IsNotFound(e)) throw;
    }
    if (svc.is_object()) {
      json eps = st.value("endpoints", json::object());
      for (const json& p : At(svc, {"spec", "ports"})) {
        const std::string pn = p.value("name", "");
        if (pn.empty()) continue;
        if (p.value("nodePort", 0) != 0) {
          eps[pn] = std::to_string(p.value("nodePort", 0));
        } else if (p.contains("targetPort") && p["targetPort"].is_number()) {
          eps[pn] = std::to_string(p["targetPort"].get<int64_t>());
        } else if (p.contains("targetPort") && p["targetPort"].is_string()) {
          eps[pn] = p["targetPort"];
        } else {
          eps[pn] = std::to_string(p.value("port", 0));
        }
      }
      st["endpoints"] = eps;
    }
    json head = json::object();
    if (head_pod != nullptr) {
      const std::string ip = Str(*head_pod, {"status", "podIP"});
      if (!ip.empty()) head["podIP"] = ip;
      head["podName"] = Str(*head_pod, {"metadata", "name"});
    }
    if (svc.is_object()) {
      const std::string cip = Str(svc, {"spec", "clusterIP"});
      std::string sip = cip;
      if (cip == "None") sip = head_pod != nullptr ? Str(*head_pod, {"status", "podIP"}) : "";
      if (!sip.empty()) head["serviceIP"] = sip;
      head["serviceName"] = Str(svc, {"metadata", "name"});
    }
    st["head"] = head;
    st["lastUpdateTime"] = now;
    if (old_status.value("state", "") != st.value("state", "")) {
      json stt = st.value("stateTransitionTimes", json::object());
      stt[st.value("state", "")] = now;
      st["stateTransitionTimes"] = stt;
    }

    const bool changed = StatusChanged(old_status, st);
    if (changed) {
      json updated = cluster;
      updated["status"] = st;
      client_->UpdateStatus(kRayClusters, ns, updated);
    }
    if (!reconcile_err.empty() || changed) return milliseconds(2000);
    return milliseconds(300000);
  }

 private:
  void ReconcileHeadService(const json& cluster) {
    const std::string ns = Str(cluster, {"metadata", "namespace"});
    const std::string name = Str(cluster, {"metadata", "name"});
    kube::ListOptions lo;
    lo.label_selector = std::string(kRayClusterLabel) + "=" + name + "," + kRayNodeTypeLabel +
                        "=head," + kRayIdLabel + "=" + name + "-head";
    json list = client_->List(kube::resources::kServices, ns, lo)["items"];
    if (!list.empty()) return;
    json svc = BuildHeadService(cluster);
    svc["metadata"]["ownerReferences"] = json::array({ControllerRef(cluster)});
    try {
      client_->Create(kube::resources::kServices, ns, svc);
    } catch (const kube::ApiError& e) {
      if (kube::IsAlreadyExists(e)) return;
      recorder_->Emit(cluster, "Warning", "FailedToCreateService", "Create",
                      "Failed creating service " + ns + "/" + Str(svc, {"metadata", "name"}) +
                          ", " + e.message());
      throw;
    }
    recorder_->Emit(cluster, "Normal", "CreatedService", "Create",
                    "Created service " + ns + "/" + Str(svc, {"metadata", "name"}));
  }

  // Returns through `err` a reconcile error (and a ReplicaFailure reason for create/delete
  // failures); API errors other than those are thrown.
  void ReconcilePods(const json& cluster, std::string* err, std::string* failure_reason) {
    const std::string ns = Str(cluster, {"metadata", "namespace"});
    const std::string name = Str(cluster, {"metadata", "name"});
    kube::ListOptions lo;
    lo.label_selector = std::string(kRayClusterLabel) + "=" + name;
    json pods = client_->List(kube::resources::kPods, ns, lo)["items"];
    const json& conds = At(cluster, {"status", "conditions"});
    const bool suspend_spec = At(cluster, {"spec", "suspend"}).is_boolean() &&
                              At(cluster, {"spec", "suspend"}).get<bool>();
    if (ConditionStatus(conds, "RayClusterSuspending") == "True") {
      for (const json& p : pods)
        DeletePod(p);
      recorder_->Emit(cluster, "Normal", "DeletedPod", "Delete",
                      "Deleted Pods for RayCluster " + ns + "/" + name + " due to suspension");
      return;
    }
    if (ConditionStatus(conds, "RayClusterSuspended") == "True" || suspend_spec) return;

    std::vector<const json*> heads;
    for (const json& p : pods)
      if (Str(p, {"metadata", "labels", kRayNodeTypeLabel}) == "head") heads.push_back(&p);
    if (heads.size() == 1) {
      const json& hp = *heads[0];
      if (!IsDeleting(hp) && ShouldDelete(hp)) {
        DeletePod(hp);
        recorder_->Emit(cluster, "Normal", "DeletedHeadPod", "Delete",
                        "Deleted head Pod " + ns + "/" + Str(hp, {"metadata", "name"}) +
                            "; Pod status: " + PodPhase(hp) +
                            "; Pod restart policy: " + Str(hp, {"spec", "restartPolicy"}) +
                            "; Ray container terminated status: " + TerminatedString(hp));
        *err = "The head Pod " + Str(hp, {"metadata", "name"}) + " status is " + PodPhase(hp) +
               " which is a terminal state.";
        return;
      }
    } else if (heads.empty()) {
      const bool provisioned = ConditionStatus(conds, "RayClusterProvisioned") == "True";
      if (provisioned && Str(cluster, {"metadata", "annotations",
                                       "ray.io/disable-provisioned-head-restart"}) == "true") {
        return;
      }
      PodBuild b{&cluster, &features_, true, &At(cluster, {"spec", "headGroupSpec"}), "headgroup"};
      json pod = BuildPod(b);
      try {
        json created = client_->Create(kube::resources::kPods, ns, pod);
        recorder_->Emit(cluster, "Normal", "CreatedHeadPod", "Create",
                        "Created head Pod " + ns + "/" + Str(created, {"metadata", "name"}));
      } catch (const kube::ApiError& e) {
        recorder_->Emit(cluster, "Warning", "FailedToCreateHeadPod", "Create",
                        "Failed to create head Pod " + ns + "/" +
                            pod["metadata"].value("name", "") + ", " + e.message());
        *err = "failed to create head pod\n" + e.message();
        *failure_reason = "FailedCreateHeadPod";
        return;
      }
    } else {
      std::string names;
      for (const json* p : heads)
        names += (names.empty() ? "" : " ") + Str(*p, {"metadata", "name"});
      *err = std::to_string(heads.size()) + " head pods found [" + names +
             "]. Please delete extra head pods";
      return;
    }

    const json& groups = At(cluster, {"spec", "workerGroupSpecs"});
    if (!groups.is_array()) return;
    for (const json& g : groups) {
      const std::string gname = g.value("groupName", "");
      std::vector<const json*> gpods;
      for (const json& p : pods) {
        if (Str(p, {"metadata", "labels", kRayGroupLabel}) == gname &&
            Str(p, {"metadata", "labels", kRayNodeTypeLabel}) == "worker") {
          gpods.push_back(&p);
        }
      }
      if (g.value("suspend", false)) {
        for (const json* p : gpods)
          DeletePod(*p);
        if (!gpods.empty()) {
          recorder_->Emit(cluster, "Normal", "DeletedWorkerPod", "Delete",
                          "Deleted all pods for suspended worker group " + gname +
                              " in RayCluster " + ns + "/" + name);
        }
        continue;
      }
      int deleted_unhealthy = 0;
      std::vector<const json*> running;
      for (const json* p : gpods) {
        if (!IsDeleting(*p) && ShouldDelete(*p)) {
          ++deleted_unhealthy;
          DeletePod(*p);
          recorder_->Emit(cluster, "Normal", "DeletedWorkerPod", "Delete",
                          "Deleted worker Pod " + ns + "/" + Str(*p, {"metadata", "name"}) +
                              "; Pod status: " + PodPhase(*p) +
                              "; Pod restart policy: " + Str(*p, {"spec", "restartPolicy"}) +
                              "; Ray container terminated status: " + TerminatedString(*p));
        } else {
          running.push_back(p);
        }
      }
      if (deleted_unhealthy > 0) {
        *err = "delete " + std::to_string(deleted_unhealthy) + " unhealthy worker Pods";
        return;
      }
      const json& to_delete = At(g, {"scaleStrategy", "workersToDelete"});
      if (to_delete.is_array()) {
        for (const json& n : to_delete) {
          if (!n.is_string()) continue;
          try {
            client_->Delete(kube::resources::kPods, ns, n.get<std::string>());
            recorder_->Emit(cluster, "Normal", "DeletedWorkerPod", "Delete",
                            "Deleted pod " + ns + "/" + n.get<std::string>());
          } catch (const kube::ApiError& e) {
            if (!kube::IsNotFound(e)) throw;
          }
          running.erase(
              std::remove_if(running.begin(), running.end(),
                             [&](const json* p) {
                               return Str(*p, {"metadata", "name"}) == n.get<std::string>();
                             }),
              running.end());
        }
      }
      const int64_t want = GroupDesired(g);
      const int64_t diff = want - static_cast<int64_t>(running.size());
      if (diff > 0) {
        std::set<int> used;
        for (const json* p : running) {
          const std::string idx =
              Str(*p, {"metadata", "labels", "ray.io/worker-group-replica-index"});
          if (!idx.empty()) used.insert(std::atoi(idx.c_str()));
        }
        const int hosts = std::max(1, g.value("numOfHosts", 1));
        int next = 0;
        std::string replica_name;
        for (int64_t i = 0; i < diff; ++i) {
          PodBuild b{&cluster, &features_, false, &g, gname};
          b.num_hosts = hosts;
          if (hosts > 1) {
            // Multi-host groups are created a replica (numOfHosts pods) at a time.
            if (i % hosts == 0) {
              while (used.count(next) != 0)
                ++next;
              used.insert(next);
              replica_name = gname + "-" + Rand5();
            }
            b.replica_index = next;
            b.replica_name = replica_name;
            b.host_index = static_cast<int>(i % hosts);
          } else {
            while (used.count(next) != 0)
              ++next;
            used.insert(next);
            b.replica_index = next;
          }
          json pod = BuildPod(b);
          try {
            json created = client_->Create(kube::resources::kPods, ns, pod);
            recorder_->Emit(cluster, "Normal", "CreatedWorkerPod", "Create",
                            "Created worker Pod " + ns + "/" + Str(created, {"metadata", "name"}));
          } catch (const kube::ApiError& e) {
            recorder_->Emit(cluster, "Warning", "FailedToCreateWorkerPod", "Create",
                            "Failed to create worker Pod for the cluster " + ns + "/" + name +
                                ", " + e.message());
            *err = "failed to create worker pod\n" + e.message();
            *failure_reason = "FailedCreateWorkerPod";
            return;
          }
        }
      } else if (diff < 0) {
        for (int64_t i = 0; i < -diff && i < static_cast<int64_t>(running.size()); ++i) {
          DeletePod(*running[i]);
          recorder_->Emit(cluster, "Normal", "DeletedWorkerPod", "Delete",
                          "Deleted Pod " + ns + "/" + Str(*running[i], {"metadata", "name"}));
        }
      }
    }
  }

  static std::string TerminatedString(const json& pod) {
    const json& term = RayContainerTerminated(pod);
    return term.is_null() ? "nil" : "&" + term.dump();
  }

  static const json& RayContainerTerminated(const json& pod) {
    static const json kNull;
    const json& containers = At(pod, {"spec", "containers"});
    if (!containers.is_array() || containers.empty()) return kNull;
    const std::string name = containers[0].value("name", "");
    const json& cs = At(pod, {"status", "containerStatuses"});
    if (!cs.is_array()) return kNull;
    for (const json& s : cs) {
      if (s.value("name", "") != name) continue;
      return At(s, {"state", "terminated"});
    }
    return kNull;
  }

  // raycluster_controller.go shouldDeletePod.
  static bool ShouldDelete(const json& pod) {
    const std::string phase = PodPhase(pod);
    if (phase == "Failed" || phase == "Succeeded") return true;
    if (phase == "Running" && !RayContainerTerminated(pod).is_null()) {
      return Str(pod, {"spec", "restartPolicy"}) == "Never";
    }
    return false;
  }

  void DeletePod(const json& pod) {
    try {
      client_->Delete(kube::resources::kPods, Str(pod, {"metadata", "namespace"}),
                      Str(pod, {"metadata", "name"}));
    } catch (const kube::ApiError& e) {
      if (!kube::IsNotFound(e)) throw;
    }
  }

  OperatorFeatures features_;
  std::unique_ptr<EventRecorder> recorder_;
};

}  // namespace

std::unique_ptr<Controller> NewRayClusterController() {
  return std::make_unique<RayClusterController>();
}

}  // namespace kubesim::controllers
