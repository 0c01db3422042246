#include "defaults.h"

#include <map>
#include <optional>

#include "starforge/common/quantity.h"

namespace kubesim {

using nlohmann::json;

namespace {

constexpr const char* kControllerUid = "batch.kubernetes.io/controller-uid";
constexpr const char* kJobName = "batch.kubernetes.io/job-name";
constexpr const char* kLegacyControllerUid = "controller-uid";
constexpr const char* kLegacyJobName = "job-name";

bool IsObject(const json& obj, const char* key) {
  return obj.contains(key) && obj[key].is_object();
}
bool IsArray(const json& obj, const char* key) {
  return obj.contains(key) && obj[key].is_array();
}
bool Empty(const json& obj, const char* key) {
  return !obj.contains(key) || obj[key].is_null() || (obj[key].is_string() && obj[key] == "") ||
         (obj[key].is_object() && obj[key].empty()) || (obj[key].is_array() && obj[key].empty());
}
void SetIfEmpty(json& obj, const char* key, const json& value) {
  if (Empty(obj, key)) obj[key] = value;
}
std::string StrOf(const json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_string() ? obj[key].get<std::string>()
                                                                      : "";
}

// The tag parsers.ParseImageName finds: the part after ':' in the last path component, "latest"
// when there is neither a tag nor a digest, "" for a digest only (or no image).
std::string ImageTag(const std::string& image) {
  if (image.empty()) return "";
  const auto at = image.find('@');
  const std::string name = image.substr(0, at);
  const auto slash = name.rfind('/');
  const auto colon = name.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    return name.substr(colon + 1);
  }
  return at == std::string::npos ? "latest" : "";
}

// SetDefaults_ObjectFieldSelector.
void DefaultFieldRef(json& holder) {
  if (IsObject(holder, "fieldRef")) SetIfEmpty(holder["fieldRef"], "apiVersion", "v1");
}

// SetDefaults_HTTPGetAction (and the generated GRPC service default) of a probe or handler.
void DefaultHandler(json& handler) {
  if (IsObject(handler, "httpGet")) {
    SetIfEmpty(handler["httpGet"], "path", "/");
    SetIfEmpty(handler["httpGet"], "scheme", "HTTP");
  }
  if (IsObject(handler, "grpc") && !handler["grpc"].contains("service")) {
    handler["grpc"]["service"] = "";
  }
}

// SetDefaults_Container with the generated walk over ports, env, probes and lifecycle handlers.
void DefaultContainer(json& c) {
  if (Empty(c, "imagePullPolicy")) {
    c["imagePullPolicy"] = ImageTag(StrOf(c, "image")) == "latest" ? "Always" : "IfNotPresent";
  }
  SetIfEmpty(c, "terminationMessagePath", "/dev/termination-log");
  SetIfEmpty(c, "terminationMessagePolicy", "File");
  if (IsArray(c, "ports")) {
    for (json& p : c["ports"])
      if (p.is_object()) SetIfEmpty(p, "protocol", "TCP");
  }
  if (IsArray(c, "env")) {
    for (json& e : c["env"])
      if (e.is_object() && IsObject(e, "valueFrom")) DefaultFieldRef(e["valueFrom"]);
  }
  for (const char* probe : {"livenessProbe", "readinessProbe", "startupProbe"}) {
    if (!IsObject(c, probe)) continue;
    json& p = c[probe];
    for (const auto& [field, value] : {std::pair<const char*, int>{"timeoutSeconds", 1},
                                       {"periodSeconds", 10},
                                       {"successThreshold", 1},
                                       {"failureThreshold", 3}}) {
      if (!p.contains(field) || p[field] == 0) p[field] = value;
    }
    DefaultHandler(p);
  }
  if (IsObject(c, "lifecycle")) {
    for (const char* hook : {"postStart", "preStop"})
      if (IsObject(c["lifecycle"], hook)) DefaultHandler(c["lifecycle"][hook]);
  }
}

// SetDefaults_Volume and the volume sources' defaults (mode 0644, fieldRef, token expiry).
void DefaultVolume(json& v) {
  bool has_source = false;
  for (const auto& [key, value] : v.items())
    has_source |= key != "name" && !value.is_null();
  if (!has_source) v["emptyDir"] = json::object();
  if (IsObject(v, "hostPath") && !v["hostPath"].contains("type")) v["hostPath"]["type"] = "";
  for (const char* src : {"secret", "configMap", "downwardAPI", "projected"}) {
    if (IsObject(v, src) && !v[src].contains("defaultMode")) v[src]["defaultMode"] = 420;
  }
  if (IsObject(v, "downwardAPI") && IsArray(v["downwardAPI"], "items")) {
    for (json& item : v["downwardAPI"]["items"])
      if (item.is_object()) DefaultFieldRef(item);
  }
  if (IsObject(v, "projected") && IsArray(v["projected"], "sources")) {
    for (json& s : v["projected"]["sources"]) {
      if (!s.is_object()) continue;
      if (IsObject(s, "downwardAPI") && IsArray(s["downwardAPI"], "items")) {
        for (json& item : s["downwardAPI"]["items"])
          if (item.is_object()) DefaultFieldRef(item);
      }
      if (IsObject(s, "serviceAccountToken")) {
        SetIfEmpty(s["serviceAccountToken"], "expirationSeconds", 3600);
      }
    }
  }
}

// Requests default to limits where a resource has a limit and no request (SetDefaults_Pod).
void RequestsFromLimits(json& c) {
  if (!IsObject(c, "resources") || !IsObject(c["resources"], "limits")) return;
  json& res = c["resources"];
  if (!IsObject(res, "requests")) res["requests"] = json::object();
  for (const auto& [name, q] : res["limits"].items()) {
    if (!res["requests"].contains(name)) res["requests"][name] = q;
  }
}

// A pod's cpu/memory quantity in milli-units; nullopt when absent or unparsable.
std::optional<int64_t> Milli(const json& q) {
  if (q.is_number_integer()) return q.get<int64_t>() * 1000;
  if (q.is_number()) return static_cast<int64_t>(q.get<double>() * 1000);
  if (!q.is_string()) return std::nullopt;
  auto parsed = starforge::Quantity::Parse(q.get<std::string>());
  if (!parsed) return std::nullopt;
  return parsed->MilliValue();
}

// The built-in PriorityClasses every cluster has (scheduling/v1 SystemPriorityClasses).
std::optional<int64_t> SystemPriority(const std::string& name) {
  if (name == "system-cluster-critical") return 2000000000;
  if (name == "system-node-critical") return 2000001000;
  return std::nullopt;
}

json Toleration(const char* key) {
  return {
      {"key", key}, {"operator", "Exists"}, {"effect", "NoExecute"}, {"tolerationSeconds", 300}};
}

// An IPv4 address literal (the only family kubesim's cluster has).
bool IsIpv4(const std::string& ip) {
  return !ip.empty() && ip.find(':') == std::string::npos && ip != "None";
}

}  // namespace

json DefaultPodSpec(json spec) {
  if (!spec.is_object()) return spec;
  SetIfEmpty(spec, "dnsPolicy", "ClusterFirst");
  SetIfEmpty(spec, "restartPolicy", "Always");
  if (!IsObject(spec, "securityContext")) spec["securityContext"] = json::object();
  if (!spec.contains("terminationGracePeriodSeconds") ||
      spec["terminationGracePeriodSeconds"].is_null()) {
    spec["terminationGracePeriodSeconds"] = 30;
  }
  SetIfEmpty(spec, "schedulerName", "default-scheduler");
  if (IsArray(spec, "volumes")) {
    for (json& v : spec["volumes"])
      if (v.is_object()) DefaultVolume(v);
  }
  for (const char* list : {"initContainers", "containers", "ephemeralContainers"}) {
    if (!IsArray(spec, list)) continue;
    for (json& c : spec[list])
      if (c.is_object()) DefaultContainer(c);
  }
  // serviceAccount is the deprecated alias of serviceAccountName (v1 conversion): read when the
  // new field is empty, and always written back equal to it.
  if (Empty(spec, "serviceAccountName") && !Empty(spec, "serviceAccount")) {
    spec["serviceAccountName"] = spec["serviceAccount"];
  }
  if (Empty(spec, "serviceAccountName")) {
    spec.erase("serviceAccount");
  } else {
    spec["serviceAccount"] = spec["serviceAccountName"];
  }
  return spec;
}

json DefaultPod(json pod) {
  if (!pod.is_object()) return pod;
  if (!IsObject(pod, "spec")) pod["spec"] = json::object();
  json& spec = pod["spec"];
  for (const char* list : {"containers", "initContainers"}) {
    if (!IsArray(spec, list)) continue;
    for (json& c : spec[list])
      if (c.is_object()) RequestsFromLimits(c);
  }
  if (!spec.contains("enableServiceLinks") || spec["enableServiceLinks"].is_null()) {
    spec["enableServiceLinks"] = true;
  }
  if (spec.value("hostNetwork", false)) {
    for (const char* list : {"containers", "initContainers"}) {
      if (!IsArray(spec, list)) continue;
      for (json& c : spec[list]) {
        if (!c.is_object() || !IsArray(c, "ports")) continue;
        for (json& p : c["ports"]) {
          if (p.is_object() && (!p.contains("hostPort") || p["hostPort"] == 0)) {
            p["hostPort"] = p.value("containerPort", 0);
          }
        }
      }
    }
  }
  // ServiceAccount admission: the namespace's "default" account unless one is named.
  if (Empty(spec, "serviceAccountName") && Empty(spec, "serviceAccount")) {
    spec["serviceAccountName"] = "default";
  }
  spec = DefaultPodSpec(std::move(spec));
  // Priority admission: no class → the default priority 0; a built-in system class → its value.
  // (kubesim serves no PriorityClasses, so another class name leaves priority unset.)
  const std::string pc = StrOf(spec, "priorityClassName");
  std::optional<int64_t> priority = pc.empty() ? std::optional<int64_t>(0) : SystemPriority(pc);
  if (priority) {
    if (!spec.contains("priority") || spec["priority"].is_null()) spec["priority"] = *priority;
    SetIfEmpty(spec, "preemptionPolicy", "PreemptLowerPriority");
  }
  // DefaultTolerationSeconds admission: tolerate not-ready/unreachable nodes for 300 s unless a
  // toleration already covers the NoExecute taint (an empty key or effect matches everything).
  bool not_ready = false;
  bool unreachable = false;
  if (IsArray(spec, "tolerations")) {
    for (const json& t : spec["tolerations"]) {
      const std::string key = StrOf(t, "key");
      const std::string effect = StrOf(t, "effect");
      if (!effect.empty() && effect != "NoExecute") continue;
      not_ready |= key.empty() || key == "node.kubernetes.io/not-ready";
      unreachable |= key.empty() || key == "node.kubernetes.io/unreachable";
    }
  } else {
    spec["tolerations"] = json::array();
  }
  if (!not_ready) spec["tolerations"].push_back(Toleration("node.kubernetes.io/not-ready"));
  if (!unreachable) spec["tolerations"].push_back(Toleration("node.kubernetes.io/unreachable"));
  if (spec["tolerations"].empty()) spec.erase("tolerations");
  // The registry strategy: a fresh status.
  pod["status"] = {{"phase", "Pending"}, {"qosClass", PodQosClass(pod)}};
  if (!Empty(spec, "schedulingGates")) {
    pod["status"]["conditions"] =
        json::array({{{"type", "PodScheduled"},
                      {"status", "False"},
                      {"reason", "SchedulingGated"},
                      {"message", "Scheduling is blocked due to non-empty scheduling gates"}}});
  }
  return pod;
}

json MountServiceAccountToken(json pod, const json& service_account,
                              const std::string& volume_name) {
  static const char* kMountPath = "/var/run/secrets/kubernetes.io/serviceaccount";
  if (!pod.is_object() || !IsObject(pod, "spec")) return pod;
  if (IsObject(pod, "metadata") && IsObject(pod["metadata"], "annotations") &&
      pod["metadata"]["annotations"].contains("kubernetes.io/config.mirror")) {
    return pod;
  }
  json& spec = pod["spec"];
  // The pod's preference wins, then the account's; the default is to mount.
  const json* automount = nullptr;
  if (spec.contains("automountServiceAccountToken") &&
      spec["automountServiceAccountToken"].is_boolean()) {
    automount = &spec["automountServiceAccountToken"];
  } else if (service_account.is_object() &&
             service_account.contains("automountServiceAccountToken") &&
             service_account["automountServiceAccountToken"].is_boolean()) {
    automount = &service_account["automountServiceAccountToken"];
  }
  if (automount != nullptr && !automount->get<bool>()) return pod;
  std::string name;
  if (IsArray(spec, "volumes")) {
    for (const json& v : spec["volumes"]) {
      const std::string n = StrOf(v, "name");
      if (n.rfind("kube-api-access-", 0) == 0) {
        name = n;
        break;
      }
    }
  }
  const bool has_volume = !name.empty();
  if (!has_volume) name = volume_name;
  bool needs_volume = false;
  for (const char* list : {"initContainers", "containers"}) {
    if (!IsArray(spec, list)) continue;
    for (json& c : spec[list]) {
      if (!c.is_object()) continue;
      bool mounted = false;
      if (IsArray(c, "volumeMounts")) {
        for (const json& m : c["volumeMounts"])
          mounted |= StrOf(m, "mountPath") == kMountPath;
      } else {
        c["volumeMounts"] = json::array();
      }
      if (mounted) continue;
      c["volumeMounts"].push_back({{"name", name}, {"readOnly", true}, {"mountPath", kMountPath}});
      needs_volume = true;
    }
  }
  if (!has_volume && needs_volume) {
    if (!IsArray(spec, "volumes")) spec["volumes"] = json::array();
    spec["volumes"].push_back(
        {{"name", name},
         {"projected",
          {{"defaultMode", 420},
           {"sources",
            json::array(
                {{{"serviceAccountToken", {{"expirationSeconds", 3607}, {"path", "token"}}}},
                 {{"configMap",
                   {{"name", "kube-root-ca.crt"},
                    {"items", json::array({{{"key", "ca.crt"}, {"path", "ca.crt"}}})}}}},
                 {{"downwardAPI",
                   {{"items", json::array({{{"path", "namespace"},
                                            {"fieldRef",
                                             {{"apiVersion", "v1"},
                                              {"fieldPath", "metadata.namespace"}}}}})}}}}})}}}});
  }
  return pod;
}

std::string PodQosClass(const json& pod) {
  std::map<std::string, int64_t> requests;
  std::map<std::string, int64_t> limits;
  bool guaranteed = true;
  const json spec = pod.is_object() && IsObject(pod, "spec") ? pod["spec"] : json::object();
  for (const char* list : {"containers", "initContainers"}) {
    if (!IsArray(spec, list)) continue;
    for (const json& c : spec[list]) {
      const json res = c.is_object() && IsObject(c, "resources") ? c["resources"] : json::object();
      int found = 0;
      for (const char* kind : {"requests", "limits"}) {
        if (!IsObject(res, kind)) continue;
        for (const char* name : {"cpu", "memory"}) {
          if (!res[kind].contains(name)) continue;
          const auto milli = Milli(res[kind][name]);
          if (!milli || *milli <= 0) continue;
          (std::string(kind) == "requests" ? requests : limits)[name] += *milli;
          if (std::string(kind) == "limits") ++found;
        }
      }
      if (found < 2) guaranteed = false;  // both a cpu and a memory limit in every container
    }
  }
  if (requests.empty() && limits.empty()) return "BestEffort";
  if (guaranteed) {
    for (const auto& [name, req] : requests) {
      auto lim = limits.find(name);
      if (lim == limits.end() || lim->second != req) guaranteed = false;
    }
  }
  return guaranteed && requests.size() == limits.size() ? "Guaranteed" : "Burstable";
}

json DefaultJob(json job) {
  if (!job.is_object()) return job;
  if (!IsObject(job, "spec")) job["spec"] = json::object();
  json& spec = job["spec"];
  auto unset = [&spec](const char* key) { return !spec.contains(key) || spec[key].is_null(); };
  if (unset("completions") && unset("parallelism")) {
    spec["completions"] = 1;
    spec["parallelism"] = 1;
  }
  if (unset("parallelism")) spec["parallelism"] = 1;
  if (unset("backoffLimit")) spec["backoffLimit"] = unset("backoffLimitPerIndex") ? 6 : 2147483647;
  if (unset("completionMode")) spec["completionMode"] = "NonIndexed";
  if (unset("suspend")) spec["suspend"] = false;
  if (IsObject(spec, "podFailurePolicy") && IsArray(spec["podFailurePolicy"], "rules")) {
    for (json& rule : spec["podFailurePolicy"]["rules"]) {
      if (!rule.is_object() || !IsArray(rule, "onPodConditions")) continue;
      for (json& pattern : rule["onPodConditions"])
        if (pattern.is_object()) SetIfEmpty(pattern, "status", "True");
    }
  }
  if (unset("podReplacementPolicy")) {
    spec["podReplacementPolicy"] = unset("podFailurePolicy") ? "TerminatingOrFailed" : "Failed";
  }
  if (unset("manualSelector")) spec["manualSelector"] = false;
  if (!IsObject(spec, "template")) spec["template"] = json::object();
  json& tmpl = spec["template"];
  if (IsObject(tmpl, "spec")) tmpl["spec"] = DefaultPodSpec(tmpl["spec"]);
  // The Job strategy's generateSelector: the template carries the job's name and uid under both
  // label forms (the user's values win), and the selector picks the uid.
  if (!spec["manualSelector"].is_boolean() || !spec["manualSelector"].get<bool>()) {
    json& md = job["metadata"];
    if (!IsObject(tmpl, "metadata")) tmpl["metadata"] = json::object();
    if (!IsObject(tmpl["metadata"], "labels")) tmpl["metadata"]["labels"] = json::object();
    json& labels = tmpl["metadata"]["labels"];
    const std::string name = StrOf(md, "name");
    const std::string uid = StrOf(md, "uid");
    for (const char* key : {kLegacyJobName, kJobName})
      if (!labels.contains(key)) labels[key] = name;
    for (const char* key : {kLegacyControllerUid, kControllerUid})
      if (!labels.contains(key)) labels[key] = uid;
    if (!IsObject(spec, "selector")) spec["selector"] = json::object();
    if (!IsObject(spec["selector"], "matchLabels"))
      spec["selector"]["matchLabels"] = json::object();
    json& match = spec["selector"]["matchLabels"];
    if (!match.contains(kControllerUid)) match[kControllerUid] = uid;
  }
  // SetDefaults_Job: a Job without labels takes its template's (which, by then, include the
  // generated ones: kube-apiserver applies the defaults again when it reads the Job back).
  if (Empty(job["metadata"], "labels") && IsObject(tmpl, "metadata") &&
      IsObject(tmpl["metadata"], "labels")) {
    job["metadata"]["labels"] = tmpl["metadata"]["labels"];
  }
  job["status"] = json::object();
  return job;
}

bool ServiceNeedsClusterIp(const json& svc) {
  const json spec = svc.is_object() && IsObject(svc, "spec") ? svc["spec"] : json::object();
  const std::string type = spec.value("type", "ClusterIP");
  if (type != "ClusterIP" && type != "NodePort" && type != "LoadBalancer") return false;
  if (!Empty(spec, "clusterIP")) return false;
  return !IsArray(spec, "clusterIPs") || spec["clusterIPs"].empty();
}

json DefaultService(json svc, const json& old, const std::string& cluster_ip) {
  if (!svc.is_object()) return svc;
  if (!IsObject(svc, "spec")) svc["spec"] = json::object();
  json& spec = svc["spec"];
  // SetDefaults_Service.
  SetIfEmpty(spec, "sessionAffinity", "None");
  if (spec["sessionAffinity"] == "None") spec.erase("sessionAffinityConfig");
  if (spec["sessionAffinity"] == "ClientIP") {
    json& cfg = spec["sessionAffinityConfig"];
    if (!cfg.is_object() || !IsObject(cfg, "clientIP") ||
        !cfg["clientIP"].contains("timeoutSeconds")) {
      cfg = {{"clientIP", {{"timeoutSeconds", 10800}}}};
    }
  }
  SetIfEmpty(spec, "type", "ClusterIP");
  const std::string type = spec["type"].is_string() ? spec["type"].get<std::string>() : "";
  if (IsArray(spec, "ports")) {
    for (json& p : spec["ports"]) {
      if (!p.is_object()) continue;
      SetIfEmpty(p, "protocol", "TCP");
      if (!p.contains("targetPort") || p["targetPort"] == 0 || p["targetPort"] == "") {
        p["targetPort"] = p.value("port", 0);
      }
    }
  }
  const bool external = type == "LoadBalancer" || type == "NodePort" || !Empty(spec, "externalIPs");
  if (external) SetIfEmpty(spec, "externalTrafficPolicy", "Cluster");
  if (type == "ClusterIP" || type == "NodePort" || type == "LoadBalancer") {
    SetIfEmpty(spec, "internalTrafficPolicy", "Cluster");
  }
  if (type == "LoadBalancer" && !spec.contains("allocateLoadBalancerNodePorts")) {
    spec["allocateLoadBalancerNodePorts"] = true;
  }
  if (type == "ExternalName") return svc;

  // The REST storage: an update keeps the allocated address and the old policy; clusterIP and
  // clusterIPs[0] mirror each other; a new ClusterIP service gets `cluster_ip`.
  const json old_spec = old.is_object() && IsObject(old, "spec") ? old["spec"] : json::object();
  if (Empty(spec, "clusterIP") && !Empty(old_spec, "clusterIP")) {
    spec["clusterIP"] = old_spec["clusterIP"];
  }
  if (!IsArray(spec, "clusterIPs") || spec["clusterIPs"].empty()) {
    if (IsArray(old_spec, "clusterIPs") && !old_spec["clusterIPs"].empty() &&
        (Empty(spec, "clusterIP") || spec["clusterIP"] == old_spec["clusterIPs"][0])) {
      spec["clusterIPs"] = old_spec["clusterIPs"];
    } else if (!Empty(spec, "clusterIP")) {
      spec["clusterIPs"] = json::array({spec["clusterIP"]});
    }
  }
  if (Empty(spec, "clusterIP") && IsArray(spec, "clusterIPs") && !spec["clusterIPs"].empty()) {
    spec["clusterIP"] = spec["clusterIPs"][0];
  }
  if (Empty(spec, "clusterIP") && !cluster_ip.empty()) {
    spec["clusterIP"] = cluster_ip;
    spec["clusterIPs"] = json::array({cluster_ip});
  }
  const bool headless = StrOf(spec, "clusterIP") == "None";
  const bool selectorless = Empty(spec, "selector");
  if (Empty(spec, "ipFamilyPolicy")) {
    if (!Empty(old_spec, "ipFamilyPolicy")) {
      spec["ipFamilyPolicy"] = old_spec["ipFamilyPolicy"];
    } else {
      spec["ipFamilyPolicy"] = headless && selectorless ? "RequireDualStack" : "SingleStack";
    }
  }
  if (!IsArray(spec, "ipFamilies") || spec["ipFamilies"].empty()) {
    if (IsArray(old_spec, "ipFamilies") && !old_spec["ipFamilies"].empty()) {
      spec["ipFamilies"] = old_spec["ipFamilies"];
    } else {
      json families = json::array();
      if (IsArray(spec, "clusterIPs")) {
        for (const json& ip : spec["clusterIPs"])
          if (ip.is_string() && IsIpv4(ip.get<std::string>())) families.push_back("IPv4");
      }
      if (families.empty()) families.push_back("IPv4");
      // A headless selectorless service that is not SingleStack lists both families.
      if (headless && selectorless && spec["ipFamilyPolicy"] != "SingleStack") {
        families.push_back("IPv6");
      }
      spec["ipFamilies"] = families;
    }
  }
  if (!old.is_object()) svc["status"] = {{"loadBalancer", json::object()}};
  return svc;
}

json DefaultNamespace(json ns) {
  if (!ns.is_object()) return ns;
  const std::string name = IsObject(ns, "metadata") ? StrOf(ns["metadata"], "name") : "";
  if (!name.empty()) {
    if (!IsObject(ns["metadata"], "labels")) ns["metadata"]["labels"] = json::object();
    ns["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
  }
  ns["spec"] = {{"finalizers", json::array({"kubernetes"})}};
  ns["status"] = {{"phase", "Active"}};
  return ns;
}

json DefaultSecret(json secret) {
  if (secret.is_object()) SetIfEmpty(secret, "type", "Opaque");
  return secret;
}

}  // namespace kubesim
