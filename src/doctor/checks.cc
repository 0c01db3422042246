// The doctor's verdicts: pure functions of what was read from the cluster (docs/deploy.md, "forge
// doctor").
#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "starforge/common/json_read.h"
#include "starforge/common/quantity.h"
#include "starforge/doctor/doctor.h"
#include "starforge/kuberay/constants.h"

namespace starforge::doctor {

namespace {

// PersistentVolume access modes (Kubernetes' spelling).
constexpr const char* kReadWriteMany = "ReadWriteMany";
constexpr const char* kReadOnlyMany = "ReadOnlyMany";

using json_read::Field;
using json_read::Name;
using json_read::Str;
using nlohmann::json;

using kuberay::kGpuResource;
// The oldest KubeRay StarForge supports (docs/upstream-facts.md).
constexpr int kMinKubeRayMajor = 1;
constexpr int kMinKubeRayMinor = 4;
constexpr const char* kInstallKubeRay =
    "install the KubeRay operator v1.4 or later with its CRDs: helm repo add kuberay "
    "https://ray-project.github.io/kuberay-helm/ && helm install kuberay-operator "
    "kuberay/kuberay-operator --version 1.4.2";

Check Make(std::string id, std::string title, Verdict v, std::string detail, std::string fix = "") {
  return Check{std::move(id), std::move(title), v, std::move(detail), std::move(fix)};
}

std::string Quoted(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items)
    out += (out.empty() ? "\"" : ", \"") + i + "\"";
  return "[" + out + "]";
}

std::string JoinComma(const std::vector<std::string>& items, size_t max = 5) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < max; ++i)
    out += (i ? ", " : "") + items[i];
  if (items.size() > max) out += fmt::format(" and {} more", items.size() - max);
  return out;
}

int64_t GpuCount(const json& node, const char* which) {
  const json& v = Field(Field(Field(node, "status"), which), kGpuResource);
  if (!v.is_string()) return 0;
  try {
    return std::stoll(v.get<std::string>());
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

bool Report::Passed() const {
  return std::none_of(checks.begin(), checks.end(),
                      [](const Check& c) { return c.verdict == Verdict::kFail; });
}

const std::vector<Rule>& RequiredRules() {
  static const std::vector<Rule> rules = {
      {false, kuberay::kRayApiGroup, "rayjobs", {"create", "get", "list", "watch", "delete"}},
      {false, kuberay::kRayApiGroup, "rayjobs/status", {"get"}},
      {false, kuberay::kRayApiGroup, "rayclusters", {"get", "list", "watch"}},
      {false, "", "pods", {"get", "list", "watch", "create", "delete"}},  // + playgrounds
      {false, "", "pods/log", {"get"}},
      {false, "", "events", {"list", "watch"}},
      {false, "events.k8s.io", "events", {"list", "watch"}},
      {false, "batch", "jobs", {"get", "list", "watch"}},
      {false, "", "services", {"get", "create", "delete"}},  // + playgrounds
      {false, "", "services/proxy", {"get", "create"}},
      {false, "", "persistentvolumeclaims", {"get"}},
      {true, "", "nodes", {"get", "list", "watch"}},
      {true, "", "pods", {"list", "watch"}},
  };
  return rules;
}

std::string RuleText(const Rule& rule, const std::vector<std::string>& verbs,
                     const std::string& ns) {
  return fmt::format(
      "- apiGroups: {}, resources: {}, verbs: {} ({})", Quoted({rule.group}),
      Quoted({rule.resource}), Quoted(verbs),
      rule.cluster ? "ClusterRole starforge-forge-capacity" : "Role forge in namespace " + ns);
}

std::optional<std::vector<int>> ImageVersion(const std::string& image) {
  // Without its digest, the tag follows the last ':' after the last '/' (a registry port is
  // not a tag).
  const std::string ref = image.substr(0, image.find('@'));
  const size_t slash = ref.rfind('/');
  const size_t colon = ref.rfind(':');
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash)) {
    return std::nullopt;
  }
  const std::string tag = ref.substr(colon + 1);
  static const std::regex kVersion(R"(^v?(\d+)\.(\d+)(?:\.(\d+))?.*$)");
  std::smatch m;
  if (!std::regex_match(tag, m, kVersion)) return std::nullopt;
  return std::vector<int>{std::stoi(m[1]), std::stoi(m[2]), m[3].matched ? std::stoi(m[3]) : 0};
}

Check CheckApiServer(const std::optional<json>& version, const std::string& error,
                     const std::string& server) {
  const std::string title = "Kubernetes API server";
  if (!version) {
    return Make("apiserver", title, Verdict::kFail, server.empty() ? error : server + ": " + error,
                "set FORGE_K8S_API_SERVER and FORGE_K8S_TOKEN, or provide a kubeconfig "
                "(KUBECONFIG or ~/.kube/config; FORGE_K8S_CONTEXT), and check the server is "
                "reachable from here");
  }
  return Make("apiserver", title, Verdict::kPass,
              fmt::format("{} answers, Kubernetes {}", server, Str(*version, "gitVersion")));
}

Check CheckIdentity(const json& review) {
  const std::string title = "Credentials";
  const json& user = Field(Field(review, "status"), "userInfo");
  if (!user.is_object()) {
    return Make("identity", title, Verdict::kPass,
                "authenticated (this API server does not serve SelfSubjectReview, so the "
                "user name is not shown)");
  }
  std::vector<std::string> groups;
  if (const json& g = Field(user, "groups"); g.is_array()) {
    for (const auto& x : g)
      if (x.is_string()) groups.push_back(x.get<std::string>());
  }
  return Make("identity", title, Verdict::kPass,
              fmt::format("authenticated as {}{}", Str(user, "username"),
                          groups.empty() ? "" : " (groups " + JoinComma(groups) + ")"));
}

Check CheckPermissions(const std::vector<std::pair<Rule, std::vector<std::string>>>& denied,
                       const std::vector<std::string>& errors, const std::string& ns) {
  const std::string title = "Permissions (SelfSubjectAccessReview)";
  if (!errors.empty()) {
    return Make("permissions", title, Verdict::kFail,
                "cannot ask the API server: " + JoinComma(errors, 2),
                "check the connection; StarForge's permissions are deploy/rbac.yaml");
  }
  if (denied.empty()) {
    size_t n = 0;
    for (const auto& r : RequiredRules())
      n += r.verbs.size();
    return Make("permissions", title, Verdict::kPass,
                fmt::format("all {} permissions of deploy/rbac.yaml are granted", n));
  }
  std::string missing;
  for (const auto& [rule, verbs] : denied)
    missing += (missing.empty() ? "" : "\n") + RuleText(rule, verbs, ns);
  return Make("permissions", title, Verdict::kFail, "missing:\n" + missing,
              "grant them: kubectl apply -f deploy/rbac.yaml (or the Helm chart's RBAC), with "
              "the service account and namespace StarForge runs as");
}

Check CheckKubeRayCrds(const json& discovery, const std::string& error) {
  const std::string title = "KubeRay CRDs (ray.io/v1 RayJob, RayCluster)";
  if (!error.empty()) {
    return Make("kuberay-crds", title, Verdict::kFail, "ray.io/v1 is not served: " + error,
                kInstallKubeRay);
  }
  std::set<std::string> served;
  if (const json& rs = Field(discovery, "resources"); rs.is_array()) {
    for (const auto& r : rs)
      served.insert(Str(r, "name"));
  }
  std::vector<std::string> missing;
  for (const char* want : {"rayjobs", "rayclusters"})
    if (!served.count(want)) missing.emplace_back(want);
  if (!missing.empty()) {
    return Make("kuberay-crds", title, Verdict::kFail,
                "ray.io/v1 does not serve " + JoinComma(missing), kInstallKubeRay);
  }
  return Make("kuberay-crds", title, Verdict::kPass, "rayjobs and rayclusters are served");
}

// The operator container's --reconcile-concurrency (Go's flag package: "-" or "--", "=V" or a
// separate V), or 1 (KubeRay's default) when absent or unreadable.
int ReconcileConcurrency(const json& container) {
  const json& args = Field(container, "args");
  if (!args.is_array()) return 1;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_string()) continue;
    std::string a = args[i].get<std::string>();
    if (a.rfind("--", 0) == 0) a.erase(0, 1);
    std::string value;
    if (a.rfind("-reconcile-concurrency=", 0) == 0) {
      value = a.substr(a.find('=') + 1);
    } else if (a == "-reconcile-concurrency" && i + 1 < args.size() && args[i + 1].is_string()) {
      value = args[i + 1].get<std::string>();
    } else {
      continue;
    }
    try {
      return std::max(1, std::stoi(value));
    } catch (const std::exception&) {
      return 1;
    }
  }
  return 1;
}

Check CheckOperator(const std::vector<json>& pods, const std::string& error) {
  const std::string title = "KubeRay operator version (v1.4 or later)";
  if (!error.empty()) {
    return Make("kuberay-operator", title, Verdict::kWarn,
                "cannot list the operator's pods: " + error,
                "check by hand: kubectl get deploy -A -l app.kubernetes.io/name=kuberay-operator "
                "-o wide shows an image tag v1.4 or later");
  }
  std::vector<std::string> found, old;
  bool single_worker = false;
  for (const auto& pod : pods) {
    const json& containers = Field(Field(pod, "spec"), "containers");
    if (!containers.is_array()) continue;
    for (const auto& c : containers) {
      const std::string image = Str(c, "image");
      const auto v = ImageVersion(image);
      if (!v) continue;
      found.push_back(Name(pod) + " (" + image + ", --reconcile-concurrency " +
                      std::to_string(ReconcileConcurrency(c)) + ")");
      single_worker = single_worker || ReconcileConcurrency(c) <= 1;
      if ((*v)[0] < kMinKubeRayMajor ||
          ((*v)[0] == kMinKubeRayMajor && (*v)[1] < kMinKubeRayMinor)) {
        old.push_back(Name(pod) + " runs " + image);
      }
      break;
    }
  }
  if (!old.empty()) {
    return Make("kuberay-operator", title, Verdict::kFail, JoinComma(old), kInstallKubeRay);
  }
  if (found.empty()) {
    return Make("kuberay-operator", title, Verdict::kWarn,
                "no pod labelled app.kubernetes.io/name=kuberay-operator with a versioned image "
                "was found",
                "if the operator runs elsewhere, check its version is v1.4 or later; otherwise " +
                    std::string(kInstallKubeRay));
  }
  // Each job's release waits for the operator's reconcile of its deleted RayJob (the finalizer):
  // with one worker, that reconcile queues behind every other RayJob's (docs/kuberay-fleet.md,
  // "Release"). A hint, not a warning: one worker is fine for a few dozen jobs at once.
  std::string detail = JoinComma(found);
  if (single_worker) {
    detail +=
        "; for hundreds of jobs at once raise the operator's reconcile concurrency (Helm "
        "--set reconcileConcurrency=10): with one worker each job's release waits behind every "
        "other RayJob's reconcile";
  }
  return Make("kuberay-operator", title, Verdict::kPass, detail);
}

Check CheckGpuNodes(const json& nodes, const config::Config& cfg) {
  const std::string& label = cfg.k8s_gpu_node_label;
  const std::string title = "GPU nodes labelled " + label + " with nvidia.com/gpu";
  struct Series {
    int nodes = 0;
    int64_t gpus = 0;
    std::vector<std::string> without_gpus;
    std::vector<std::string> unschedulable;
  };
  std::map<std::string, Series> series;
  std::vector<std::string> unlabelled_gpu_nodes;
  if (const json& items = Field(nodes, "items"); items.is_array()) {
    for (const auto& n : items) {
      const std::string value = json_read::Label(n, label);
      const int64_t gpus = GpuCount(n, "capacity");
      if (value.empty()) {
        if (gpus > 0) unlabelled_gpu_nodes.push_back(Name(n));
        continue;
      }
      Series& s = series[value];
      ++s.nodes;
      s.gpus += gpus;
      if (gpus == 0) s.without_gpus.push_back(Name(n));
      if (Field(Field(n, "spec"), "unschedulable") == json(true))
        s.unschedulable.push_back(Name(n));
    }
  }
  const std::string label_fix = fmt::format(
      "label each GPU node with its card series: kubectl label node <node> {}=<series> "
      "(e.g. h200){}",
      label,
      unlabelled_gpu_nodes.empty()
          ? std::string()
          : "; GPU nodes without the label: " + JoinComma(unlabelled_gpu_nodes));
  if (series.empty()) {
    return Make(
        "gpu-nodes", title, Verdict::kFail,
        "no node carries the label " + label + " (FORGE_K8S_GPU_NODE_LABEL): no job can be placed",
        label_fix);
  }
  std::string detail;
  std::vector<std::string> no_plugin;
  for (const auto& [name, s] : series) {
    detail += fmt::format("{}{}: {} node{}, {} GPUs", detail.empty() ? "" : "; ", name, s.nodes,
                          s.nodes == 1 ? "" : "s", s.gpus);
    if (!s.unschedulable.empty()) detail += " (cordoned: " + JoinComma(s.unschedulable) + ")";
    for (const auto& n : s.without_gpus)
      no_plugin.push_back(n + " (" + name + ")");
  }
  if (!no_plugin.empty() && cfg.k8s_gpu_passthrough) {
    return Make("gpu-nodes", title, Verdict::kFail,
                detail + "; no nvidia.com/gpu capacity on " + JoinComma(no_plugin),
                "run the NVIDIA device plugin on these nodes (e.g. helm install nvdp "
                "nvdp/nvidia-device-plugin -n nvidia-device-plugin --create-namespace, or the "
                "GPU Operator); or remove the label from nodes without GPUs");
  }
  if (!no_plugin.empty()) {
    detail += "; no nvidia.com/gpu capacity (FORGE_K8S_GPU_PASSTHROUGH=0: pods request none)";
  }
  if (!unlabelled_gpu_nodes.empty()) {
    return Make("gpu-nodes", title, Verdict::kWarn,
                detail + "; GPU nodes StarForge cannot use (no " + label +
                    " label): " + JoinComma(unlabelled_gpu_nodes),
                label_fix);
  }
  return Make("gpu-nodes", title, Verdict::kPass, detail);
}

namespace {

std::vector<std::string> AccessModes(const json& pvc) {
  std::vector<std::string> out;
  const json& status_modes = Field(Field(pvc, "status"), "accessModes");
  const json& modes =
      status_modes.is_array() ? status_modes : Field(Field(pvc, "spec"), "accessModes");
  if (modes.is_array()) {
    for (const auto& m : modes)
      if (m.is_string()) out.push_back(m.get<std::string>());
  }
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// What both PVC checks share: found, bound. nullopt = fine so far.
std::optional<Check> PvcBasics(const std::string& id, const std::string& title,
                               const std::string& name, const json& pvc, const std::string& error,
                               const config::Config& cfg, const std::string& setting) {
  if (!error.empty()) {
    return Make(id, title, Verdict::kWarn,
                "cannot read PersistentVolumeClaim " + name + ": " + error,
                "grant get on persistentvolumeclaims (deploy/rbac.yaml), or check it by hand: "
                "kubectl get pvc -n " +
                    cfg.k8s_namespace + " " + name);
  }
  if (pvc.is_null()) {
    return Make(id, title, Verdict::kFail,
                "PersistentVolumeClaim " + cfg.k8s_namespace + "/" + name + " does not exist",
                "create it in namespace " + cfg.k8s_namespace +
                    " (deploy/storage-pvc.yaml), or "
                    "set " +
                    setting + " to one that exists");
  }
  const std::string phase = Str(Field(pvc, "status"), "phase");
  if (phase != "Bound") {
    return Make(id, title, Verdict::kFail,
                "PersistentVolumeClaim " + cfg.k8s_namespace + "/" + name + " is " +
                    (phase.empty() ? "not bound" : phase),
                "kubectl describe pvc -n " + cfg.k8s_namespace + " " + name +
                    " says why (no matching StorageClass or volume); a claim of a "
                    "WaitForFirstConsumer class binds when the first pod uses it");
  }
  return std::nullopt;
}

}  // namespace

Check CheckStoragePvc(const json& pvc, const std::string& error, const config::Config& cfg) {
  const std::string title = "Storage volume (FORGE_K8S_STORAGE_PVC)";
  const std::string& name = cfg.k8s_storage_pvc;
  if (name.empty()) {
    return Make("storage-pvc", title, Verdict::kWarn,
                "unset: Ray pods get no storage volume, so driver.log, checkpoints and outputs "
                "stay in the pods and never reach the server (forge logs shows only the archive: "
                "ray-job.log, submitter.log, events.json)",
                "create a ReadWriteMany PVC in namespace " + cfg.k8s_namespace +
                    " (deploy/storage-pvc.yaml), mount it in forge serve at FORGE_STORAGE_ROOT and "
                    "set FORGE_K8S_STORAGE_PVC");
  }
  if (auto c = PvcBasics("storage-pvc", title, name, pvc, error, cfg, "FORGE_K8S_STORAGE_PVC"))
    return *c;
  const auto modes = AccessModes(pvc);
  const std::string found =
      fmt::format("{}/{} is Bound, access modes {}", cfg.k8s_namespace, name, JoinComma(modes));
  if (cfg.k8s_storage_shared && !Has(modes, kReadWriteMany)) {
    return Make("storage-pvc", title, Verdict::kFail,
                found +
                    ", but FORGE_K8S_STORAGE_SHARED=true needs ReadWriteMany (pods of one "
                    "job run on several nodes)",
                "use a ReadWriteMany storage class, or set FORGE_K8S_STORAGE_SHARED=false (then "
                "multi-machine jobs are refused)");
  }
  return Make("storage-pvc", title, Verdict::kPass,
              found + (cfg.k8s_storage_shared ? ""
                                              : " (FORGE_K8S_STORAGE_SHARED=false: "
                                                "multi-machine jobs are refused)"));
}

Check CheckCorpusPvc(const json& pvc, const std::string& error, const config::Config& cfg) {
  const std::string title = "Corpus volume (FORGE_K8S_CORPUS_PVC)";
  const std::string& name = cfg.k8s_corpus_pvc;
  if (name.empty()) {
    return Make("corpus-pvc", title, Verdict::kPass,
                "unset (optional): jobs asking for corpus: "
                "true are refused");
  }
  if (auto c = PvcBasics("corpus-pvc", title, name, pvc, error, cfg, "FORGE_K8S_CORPUS_PVC"))
    return *c;
  const auto modes = AccessModes(pvc);
  const std::string found =
      fmt::format("{}/{} is Bound, access modes {}", cfg.k8s_namespace, name, JoinComma(modes));
  if (!Has(modes, kReadOnlyMany) && !Has(modes, kReadWriteMany)) {
    return Make("corpus-pvc", title, Verdict::kWarn,
                found + ": pods on several nodes cannot mount it at once",
                "use a ReadOnlyMany or ReadWriteMany claim for the corpus");
  }
  return Make("corpus-pvc", title, Verdict::kPass, found);
}

// ---------------------------------------------------------------------------------------------

nlohmann::json ToJson(const Report& report) {
  json checks = json::array();
  for (const auto& c : report.checks) {
    json j = {{"id", c.id},
              {"title", c.title},
              {"verdict", c.verdict == Verdict::kPass   ? "pass"
                          : c.verdict == Verdict::kWarn ? "warn"
                                                        : "fail"},
              {"detail", c.detail}};
    if (!c.fix.empty()) j["fix"] = c.fix;
    checks.push_back(std::move(j));
  }
  return {{"passed", report.Passed()}, {"checks", std::move(checks)}};
}

Report FromJson(const nlohmann::json& j) {
  Report r;
  if (const json& checks = Field(j, "checks"); checks.is_array()) {
    for (const auto& c : checks) {
      const std::string v = Str(c, "verdict");
      r.checks.push_back(Make(Str(c, "id"), Str(c, "title"),
                              v == "pass"   ? Verdict::kPass
                              : v == "warn" ? Verdict::kWarn
                                            : Verdict::kFail,
                              Str(c, "detail"), Str(c, "fix")));
    }
  }
  return r;
}

std::string ToText(const Report& report) {
  std::string out;
  auto indent = [](const std::string& text) {
    std::string s;
    for (char ch : text) {
      s += ch;
      if (ch == '\n') s += "      ";
    }
    return s;
  };
  int failed = 0, warned = 0;
  for (const auto& c : report.checks) {
    const char* mark = c.verdict == Verdict::kPass ? "✓" : c.verdict == Verdict::kWarn ? "!" : "✗";
    failed += c.verdict == Verdict::kFail;
    warned += c.verdict == Verdict::kWarn;
    out += fmt::format("{} {}: {}\n", mark, c.title, indent(c.detail));
    if (!c.fix.empty()) out += "    fix: " + indent(c.fix) + "\n";
  }
  out += failed == 0 ? fmt::format("all {} checks passed{}\n", report.checks.size(),
                                   warned ? fmt::format(" ({} with a warning)", warned) : "")
                     : fmt::format("{} of {} checks failed\n", failed, report.checks.size());
  return out;
}

}  // namespace starforge::doctor
