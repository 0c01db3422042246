// deploy/: the manifests parse, bind what they define to the `forge` ServiceAccount, and
// deploy/rbac-kubesim.yaml (kubesim's closed loop) grants exactly what deploy/rbac.yaml grants.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <tuple>

#include "starforge/common/yaml_json.h"
#include "starforge/doctor/doctor.h"
#include "test_support.h"

namespace starforge::kuberay {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kDeploy = fs::path(STARFORGE_SOURCE_DIR) / "deploy";
const std::string kNs = "starforge";
const std::string kUser = "system:serviceaccount:starforge:forge";

// Every document of a multi-document YAML file.
std::vector<json> Documents(const fs::path& file) {
  std::vector<json> docs;
  std::istringstream in(testing::ReadFile(file));
  std::string doc;
  auto flush = [&] {
    json d = ParseYaml(doc).value();
    if (!d.is_null()) docs.push_back(d);
    doc.clear();
  };
  for (std::string line; std::getline(in, line);) {
    if (line == "---") {
      flush();
    } else {
      doc += line + "\n";
    }
  }
  flush();
  return docs;
}

// The Kubernetes objects of deploy/ (every *.yaml but the kubesim table and kustomization).
std::vector<json> Objects() {
  std::vector<json> out;
  for (const auto& entry : fs::directory_iterator(kDeploy)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".yaml" || name == "rbac-kubesim.yaml" ||
        name == "kustomization.yaml") {
      continue;
    }
    for (json& d : Documents(entry.path())) {
      EXPECT_TRUE(d.contains("apiVersion") && d.contains("kind")) << name << ": " << d.dump();
      out.push_back(std::move(d));
    }
  }
  return out;
}

const json* Find(const std::vector<json>& objects, const std::string& kind,
                 const std::string& name) {
  for (const json& o : objects) {
    if (o.value("kind", "") == kind && o["metadata"].value("name", "") == name) return &o;
  }
  return nullptr;
}

// (scope, apiGroup, resource, verb); scope = a namespace, or "*" for a ClusterRole binding
// (every namespace and the cluster scope).
using Grant = std::tuple<std::string, std::string, std::string, std::string>;

void AddRules(const json& rules, const std::string& scope, std::set<Grant>* out,
              const std::string& where) {
  ASSERT_TRUE(rules.is_array()) << where;
  for (const json& r : rules) {
    for (const std::string key : {"verbs", "apiGroups", "resources"}) {
      ASSERT_TRUE(r.contains(key) && r[key].is_array()) << where << ": " << key;
    }
    for (const auto& g : r["apiGroups"]) {
      for (const auto& res : r["resources"]) {
        for (const auto& v : r["verbs"]) {
          // Least privilege: no wildcards.
          EXPECT_NE(g, "*") << where;
          EXPECT_NE(res, "*") << where;
          EXPECT_NE(v, "*") << where;
          out->insert({scope, g.get<std::string>(), res.get<std::string>(), v.get<std::string>()});
        }
      }
    }
  }
}

bool BindsForge(const json& binding) {
  for (const json& s : binding["subjects"]) {
    if (s.value("kind", "") == "ServiceAccount" && s.value("name", "") == "forge" &&
        s.value("namespace", "") == kNs) {
      return true;
    }
  }
  return false;
}

// What the manifests grant the forge ServiceAccount, through its bindings.
std::set<Grant> ManifestGrants(const std::vector<json>& objects) {
  std::set<Grant> grants;
  for (const json& o : objects) {
    const std::string kind = o.value("kind", "");
    if (kind != "RoleBinding" && kind != "ClusterRoleBinding") continue;
    if (!BindsForge(o)) continue;
    const json& ref = o["roleRef"];
    const json* role = Find(objects, ref.value("kind", ""), ref.value("name", ""));
    EXPECT_NE(role, nullptr) << kind << " " << o["metadata"]["name"] << " refers to a missing "
                             << ref.dump();
    if (role == nullptr) continue;
    std::string scope = "*";
    if (kind == "RoleBinding") {
      scope = o["metadata"].value("namespace", "");
      if (ref.value("kind", "") == "Role") {
        EXPECT_EQ((*role)["metadata"].value("namespace", ""), scope);
      }
    }
    AddRules((*role)["rules"], scope, &grants, ref.dump());
  }
  return grants;
}

std::set<Grant> KubesimGrants() {
  const json table = ParseYaml(testing::ReadFile(kDeploy / "rbac-kubesim.yaml")).value();
  std::set<Grant> grants;
  EXPECT_EQ(table["users"].size(), 1u);
  const json& user = table["users"][0];
  EXPECT_EQ(user.value("name", ""), kUser);
  for (const json& rule : user["rules"]) {
    std::vector<std::string> scopes = {"*"};
    if (rule.contains("namespaces") && !rule["namespaces"].empty()) {
      scopes = rule["namespaces"].get<std::vector<std::string>>();
    }
    EXPECT_FALSE(rule.contains("resourceNames")) << rule.dump();
    for (const auto& scope : scopes)
      AddRules(json::array({rule}), scope, &grants, rule.dump());
  }
  return grants;
}

std::string Show(const std::set<Grant>& grants) {
  std::string out;
  for (const auto& [scope, group, res, verb] : grants)
    out += "  " + scope + " " + (group.empty() ? "core" : group) + " " + res + " " + verb + "\n";
  return out;
}

TEST(Deploy, KubesimTableGrantsExactlyTheManifestsRules) {
  const std::set<Grant> manifests = ManifestGrants(Objects());
  const std::set<Grant> kubesim = KubesimGrants();
  std::set<Grant> only_manifests, only_kubesim;
  std::set_difference(manifests.begin(), manifests.end(), kubesim.begin(), kubesim.end(),
                      std::inserter(only_manifests, only_manifests.end()));
  std::set_difference(kubesim.begin(), kubesim.end(), manifests.begin(), manifests.end(),
                      std::inserter(only_kubesim, only_kubesim.end()));
  EXPECT_TRUE(only_manifests.empty()) << "granted by deploy/ but not by rbac-kubesim.yaml:\n"
                                      << Show(only_manifests);
  EXPECT_TRUE(only_kubesim.empty()) << "granted by rbac-kubesim.yaml but not by deploy/:\n"
                                    << Show(only_kubesim);
}

TEST(Deploy, GrantsWhatTheKubeRayFleetCalls) {
  const std::set<Grant> g = ManifestGrants(Objects());
  auto has = [&](const std::string& scope, const std::string& group, const std::string& res,
                 const std::string& verb) {
    return g.count({scope, group, res, verb}) == 1;
  };
  for (const char* verb : {"create", "get", "list", "watch", "delete"})
    EXPECT_TRUE(has(kNs, "ray.io", "rayjobs", verb)) << verb;
  EXPECT_FALSE(has(kNs, "ray.io", "rayjobs", "update"));
  EXPECT_FALSE(has(kNs, "ray.io", "rayjobs", "patch"));
  EXPECT_TRUE(has(kNs, "ray.io", "rayjobs/status", "get"));
  EXPECT_TRUE(has(kNs, "ray.io", "rayclusters", "watch"));
  EXPECT_FALSE(has(kNs, "ray.io", "rayclusters", "delete"));
  EXPECT_TRUE(has(kNs, "", "pods/log", "get"));
  EXPECT_TRUE(has(kNs, "", "events", "watch"));
  EXPECT_TRUE(has(kNs, "events.k8s.io", "events", "watch"));
  EXPECT_TRUE(has(kNs, "batch", "jobs", "watch"));
  // A Ray job stop is a POST through the service proxy: `create` on services/proxy.
  EXPECT_TRUE(has(kNs, "", "services/proxy", "create"));
  EXPECT_TRUE(has(kNs, "", "services/proxy", "get"));
  // Capacity: nodes and pods of every namespace, read-only, through the ClusterRole.
  EXPECT_TRUE(has("*", "", "nodes", "list"));
  EXPECT_TRUE(has("*", "", "nodes", "watch"));
  EXPECT_TRUE(has("*", "", "pods", "list"));
  EXPECT_TRUE(has("*", "", "pods", "watch"));
  EXPECT_FALSE(has("*", "", "pods", "get"));
  // Playgrounds (docs/playground.md): their pod and service, in the namespace only.
  for (const char* verb : {"create", "delete"}) {
    EXPECT_TRUE(has(kNs, "", "pods", verb)) << verb;
    EXPECT_TRUE(has(kNs, "", "services", verb)) << verb;
    EXPECT_FALSE(has("*", "", "pods", verb)) << verb;
  }
  EXPECT_FALSE(has(kNs, "", "pods", "update"));
  EXPECT_FALSE(has(kNs, "", "pods", "patch"));
  // Nothing else that writes: the RayJob, the proxy, a playground's pod and service.
  for (const auto& [scope, group, res, verb] : g) {
    if (res == "rayjobs" || res == "services/proxy") continue;
    if (scope == kNs && group.empty() && (res == "pods" || res == "services") &&
        (verb == "create" || verb == "delete"))
      continue;
    EXPECT_TRUE(verb == "get" || verb == "list" || verb == "watch")
        << scope << " " << group << " " << res << " " << verb;
  }
  // No secrets, ever.
  for (const auto& grant : g)
    EXPECT_NE(std::get<2>(grant), "secrets");
}

// forge doctor asks (SelfSubjectAccessReview) for exactly what deploy/ grants: a rule added to
// one and not the other fails here.
TEST(Deploy, DoctorChecksExactlyTheGrantedRules) {
  std::set<Grant> checked;
  for (const doctor::Rule& r : doctor::RequiredRules()) {
    for (const auto& verb : r.verbs)
      checked.insert({r.cluster ? "*" : kNs, r.group, r.resource, verb});
  }
  EXPECT_EQ(checked, ManifestGrants(Objects()));
}

TEST(Deploy, DeploymentRunsForgeServeWithTheKuberayFleet) {
  const std::vector<json> objects = Objects();
  const json* dep = Find(objects, "Deployment", "forge");
  ASSERT_NE(dep, nullptr);
  EXPECT_EQ((*dep)["metadata"]["namespace"], kNs);
  EXPECT_EQ((*dep)["spec"]["replicas"], 1);
  EXPECT_EQ((*dep)["spec"]["strategy"]["type"], "Recreate");
  const json& pod = (*dep)["spec"]["template"]["spec"];
  EXPECT_EQ(pod["serviceAccountName"], "forge");
  ASSERT_NE(Find(objects, "ServiceAccount", "forge"), nullptr);
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["command"], json({"forge", "serve"}));
  std::map<std::string, json> env;
  for (const json& e : c["env"])
    env[e["name"]] = e;
  EXPECT_EQ(env["FORGE_DEFAULT_FLEET_KIND"]["value"], "kuberay");
  EXPECT_EQ(env["FORGE_K8S_NAMESPACE"]["value"], kNs);
  EXPECT_EQ(env["FORGE_LISTEN"]["value"], "0.0.0.0:8080");
  EXPECT_FALSE(env.count("FORGE_K8S_API_SERVER"));  // in-cluster service account
  EXPECT_FALSE(env.count("FORGE_K8S_TOKEN"));
  // Secrets only from a Secret, never inline.
  for (const char* key : {"FORGE_S3_ACCESS_KEY", "FORGE_S3_SECRET_KEY"}) {
    ASSERT_TRUE(env.count(key)) << key;
    EXPECT_FALSE(env[key].contains("value")) << key;
    EXPECT_EQ(env[key]["valueFrom"]["secretKeyRef"]["name"], "forge-s3") << key;
  }
  // The storage PVC is mounted at FORGE_STORAGE_ROOT, and it is the PVC the Ray pods mount.
  const std::string root = env["FORGE_STORAGE_ROOT"]["value"];
  const std::string pvc = env["FORGE_K8S_STORAGE_PVC"]["value"];
  std::string volume;
  for (const json& m : c["volumeMounts"]) {
    if (m["mountPath"] == root) volume = m["name"];
  }
  ASSERT_FALSE(volume.empty()) << "nothing mounted at " << root;
  bool found = false;
  for (const json& v : pod["volumes"]) {
    if (v["name"] == volume) {
      EXPECT_EQ(v["persistentVolumeClaim"]["claimName"], pvc);
      found = true;
    }
  }
  EXPECT_TRUE(found);
  // The store lives on a volume of its own, which is not the storage PVC and not under the root.
  const std::string state = env["FORGE_STATE_DIR"]["value"];
  ASSERT_FALSE(state.empty()) << "FORGE_STATE_DIR is not set";
  EXPECT_NE(state.rfind(root + "/", 0), 0u) << state << " is under " << root;
  std::string state_volume;
  for (const json& m : c["volumeMounts"]) {
    if (m["mountPath"] == state) state_volume = m["name"];
  }
  ASSERT_FALSE(state_volume.empty()) << "nothing mounted at " << state;
  for (const json& v : pod["volumes"]) {
    if (v["name"] == state_volume) {
      ASSERT_TRUE(v["persistentVolumeClaim"].is_object());
      EXPECT_NE(v["persistentVolumeClaim"]["claimName"], pvc);
      EXPECT_NE(Find(objects, "PersistentVolumeClaim",
                     v["persistentVolumeClaim"]["claimName"].get<std::string>()),
                nullptr);
    }
  }
  const json* claim = Find(objects, "PersistentVolumeClaim", pvc);
  ASSERT_NE(claim, nullptr);
  // RWX ⇔ FORGE_K8S_STORAGE_SHARED=true.
  EXPECT_EQ((*claim)["spec"]["accessModes"], json({"ReadWriteMany"}));
  EXPECT_EQ(env["FORGE_K8S_STORAGE_SHARED"]["value"], "true");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"], "/healthz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["port"], "http");
  EXPECT_EQ(c["ports"][0]["containerPort"], 8080);
}

TEST(Deploy, KustomizationListsEveryManifest) {
  const json k = ParseYaml(testing::ReadFile(kDeploy / "kustomization.yaml")).value();
  std::set<std::string> listed;
  for (const auto& r : k["resources"]) {
    listed.insert(r.get<std::string>());
    EXPECT_TRUE(fs::exists(kDeploy / r.get<std::string>())) << r;
  }
  for (const auto& entry : fs::directory_iterator(kDeploy)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".yaml" || name == "rbac-kubesim.yaml" ||
        name == "kustomization.yaml") {
      continue;
    }
    EXPECT_TRUE(listed.count(name)) << name << " is not in kustomization.yaml";
  }
  // Everything namespaced lives in starforge.
  for (const json& o : Objects()) {
    const std::string kind = o["kind"];
    if (kind == "Namespace" || kind == "ClusterRole" || kind == "ClusterRoleBinding") continue;
    EXPECT_EQ(o["metadata"].value("namespace", ""), kNs) << kind << " " << o["metadata"]["name"];
  }
}

}  // namespace
}  // namespace starforge::kuberay
