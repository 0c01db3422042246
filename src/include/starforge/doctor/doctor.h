// `forge doctor` / GET /api/v1/doctor: does this cluster meet what StarForge's kuberay fleet needs
// (docs/deploy.md, "forge doctor")? Each check reads the cluster or the object store once and says
// what it found and, when not met, the fix. The verdicts are pure functions of what was read
// (Check* below); Run does the reading.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/config/config.h"
#include "starforge/kube/client.h"
#include "starforge/objstore/object_store.h"

namespace starforge::doctor {

enum class Verdict { kPass, kWarn, kFail };

struct Check {
  std::string id;     // stable: "apiserver", "permissions", "kuberay-crds", …
  std::string title;  // one line for people
  Verdict verdict = Verdict::kPass;
  std::string detail;  // what was found
  std::string fix;     // when not kPass: what to do (commands, settings)
};

struct Report {
  std::vector<Check> checks;
  bool Passed() const;  // no kFail (warnings pass)
};

// One RBAC rule StarForge's service account needs, as deploy/rbac.yaml grants it.
struct Rule {
  bool cluster = false;  // ClusterRole starforge-forge-capacity; else Role forge in the namespace
  std::string group;     // "" = core
  std::string resource;  // "pods", "pods/log", …
  std::vector<std::string> verbs;
};
// Every rule of deploy/rbac.yaml (a test keeps the two equal).
const std::vector<Rule>& RequiredRules();
// "- apiGroups: [\"ray.io\"], resources: [\"rayjobs\"], verbs: [\"delete\"] (Role forge in
// namespace starforge)": the rule as deploy/ spells it, with only `verbs`.
std::string RuleText(const Rule& rule, const std::vector<std::string>& verbs,
                     const std::string& ns);

// ---- pure verdicts on what was read ----

// GET /version answered (`version` = its JSON) or failed (`error`).
Check CheckApiServer(const std::optional<nlohmann::json>& version, const std::string& error,
                     const std::string& server);
// SelfSubjectReview's status (null when the server does not serve it).
Check CheckIdentity(const nlohmann::json& review);
// `denied`: rule → its verbs the SelfSubjectAccessReviews refused; `errors`: reviews that failed.
Check CheckPermissions(const std::vector<std::pair<Rule, std::vector<std::string>>>& denied,
                       const std::vector<std::string>& errors, const std::string& ns);
// The discovery document of ray.io/v1 (null: not served) and the operator pods found.
Check CheckKubeRayCrds(const nlohmann::json& discovery, const std::string& error);
Check CheckOperator(const std::vector<nlohmann::json>& operator_pods, const std::string& error);
// The node list, per card series.
Check CheckGpuNodes(const nlohmann::json& nodes, const config::Config& cfg);
// A PVC (null: not found), for the storage or the corpus volume.
Check CheckStoragePvc(const nlohmann::json& pvc, const std::string& error,
                      const config::Config& cfg);
Check CheckCorpusPvc(const nlohmann::json& pvc, const std::string& error,
                     const config::Config& cfg);

// "MAJOR.MINOR.PATCH" from an image reference's tag ("quay.io/kuberay/operator:v1.4.2"), or
// nullopt.
std::optional<std::vector<int>> ImageVersion(const std::string& image);

// ---- reading ----

struct RunOptions {
  config::Config config;
  // The Kubernetes connection; nullopt with `kube_error` saying why there is none.
  std::optional<kube::ClientConfig> kube;
  std::string kube_error;
  objstore::ObjectStore* objects = nullptr;  // the capsule store (S3 for the kuberay fleet)
  bool objects_are_s3 = false;
  // Fetches a URL (the presigned probe) and returns its body; throws std::runtime_error. Tests
  // may replace it; default: libcurl.
  std::function<std::string(const std::string& url)> fetch;
};

// Every check, in order. Never throws: a failure to read is a check's verdict.
Report Run(const RunOptions& options);

nlohmann::json ToJson(const Report& report);
// One line per check: "✓ title: detail", "✗ title: detail\n    fix: …", "! title: …".
std::string ToText(const Report& report);
// The inverse of ToJson (the CLI renders the server's report).
Report FromJson(const nlohmann::json& json);

}  // namespace starforge::doctor
