#include "resources.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "parse_yaml.h"

namespace kubesim {

using nlohmann::json;

bool ResourceInfo::HasSub(const std::string& s) const {
  return std::find(subresources.begin(), subresources.end(), s) != subresources.end();
}

namespace {

ResourceInfo Core(std::string plural, std::string singular, std::string kind, bool namespaced,
                  std::vector<std::string> subs, std::vector<std::string> fields,
                  std::vector<std::string> short_names = {}) {
  ResourceInfo r;
  r.version = "v1";
  r.plural = std::move(plural);
  r.singular = std::move(singular);
  r.kind = std::move(kind);
  r.namespaced = namespaced;
  r.subresources = std::move(subs);
  r.storage = r.plural;
  r.field_labels = std::move(fields);
  r.short_names = std::move(short_names);
  return r;
}

std::shared_ptr<CrdSchema> LoadCrd(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read CRD " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto schema = std::make_shared<CrdSchema>();
  schema->crd = kubesim::ParseYamlOrThrow(ss.str());
  for (const auto& v : schema->crd["spec"]["versions"]) {
    if (v.value("name", "") == "v1") schema->openapi = v["schema"]["openAPIV3Schema"];
  }
  if (schema->openapi.is_null()) throw std::runtime_error("CRD " + path + " has no v1 schema");
  schema->validator = CrdValidator::FromCrd(schema->crd, "v1");
  return schema;
}

}  // namespace

Registry Registry::Build(const std::string& crd_dir) {
  Registry reg;
  auto& rs = reg.resources_;
  rs.push_back(
      Core("namespaces", "namespace", "Namespace", false, {"status"}, {"status.phase"}, {"ns"}));
  rs.push_back(
      Core("nodes", "node", "Node", false, {"status", "proxy"}, {"spec.unschedulable"}, {"no"}));
  rs.push_back(Core("pods", "pod", "Pod", true, {"status", "log", "proxy", "binding"},
                    {"spec.nodeName", "spec.host", "spec.restartPolicy", "spec.schedulerName",
                     "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
                     "status.podIPs", "status.nominatedNodeName"},
                    {"po"}));
  rs.push_back(Core("services", "service", "Service", true, {"status", "proxy"},
                    {"spec.clusterIP", "spec.type"}, {"svc"}));
  rs.push_back(
      Core("events", "event", "Event", true, {},
           {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
            "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
            "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"},
           {"ev"}));
  rs.push_back(Core("configmaps", "configmap", "ConfigMap", true, {}, {}, {"cm"}));
  rs.push_back(Core("secrets", "secret", "Secret", true, {}, {"type"}));
  rs.push_back(Core("serviceaccounts", "serviceaccount", "ServiceAccount", true, {}, {}, {"sa"}));
  rs.push_back(Core("persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim",
                    true, {"status"}, {}, {"pvc"}));
  for (auto& r : rs)
    r.categories = r.plural == "pods" || r.plural == "services" ? std::vector<std::string>{"all"}
                                                                : std::vector<std::string>{};

  ResourceInfo jobs = Core("jobs", "job", "Job", true, {"status"}, {"status.successful"});
  jobs.group = "batch";
  jobs.has_generation = true;
  jobs.categories = {"all"};
  rs.push_back(jobs);

  ResourceInfo ev = Core("events", "event", "Event", true, {},
                         {"regarding.kind", "regarding.namespace", "regarding.name",
                          "regarding.uid", "regarding.apiVersion", "regarding.resourceVersion",
                          "regarding.fieldPath", "reason", "reportingController", "source", "type"},
                         {"ev"});
  ev.group = "events.k8s.io";
  rs.push_back(ev);

  // Served only as POST (access_review.cc); never stored.
  ResourceInfo ssar = Core("selfsubjectaccessreviews", "selfsubjectaccessreview",
                           "SelfSubjectAccessReview", false, {}, {});
  ssar.group = "authorization.k8s.io";
  ssar.verbs = {"create"};
  rs.push_back(ssar);

  for (const char* file : {"ray.io_rayjobs.yaml", "ray.io_rayclusters.yaml"}) {
    auto schema = LoadCrd(crd_dir + "/" + file);
    const json& names = schema->crd["spec"]["names"];
    ResourceInfo r;
    r.group = schema->crd["spec"].value("group", "ray.io");
    r.version = "v1";
    r.plural = names.value("plural", "");
    r.singular = names.value("singular", "");
    r.kind = names.value("kind", "");
    r.namespaced = schema->crd["spec"].value("scope", "Namespaced") == "Namespaced";
    r.subresources = {"status"};
    r.storage = r.plural;
    if (names.contains("shortNames"))
      r.short_names = names["shortNames"].get<std::vector<std::string>>();
    if (names.contains("categories"))
      r.categories = names["categories"].get<std::vector<std::string>>();
    r.returns_deleted_object = false;
    r.allow_unconditional_update = false;
    r.has_generation = true;
    r.crd = schema;
    rs.push_back(std::move(r));
  }
  return reg;
}

const ResourceInfo* Registry::Find(const std::string& group, const std::string& version,
                                   const std::string& plural) const {
  for (const auto& r : resources_) {
    if (r.group == group && r.version == version && r.plural == plural) return &r;
  }
  return nullptr;
}

std::vector<std::pair<std::string, std::string>> Registry::GroupVersions() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& r : resources_) {
    std::pair<std::string, std::string> gv{r.group, r.version};
    if (std::find(out.begin(), out.end(), gv) == out.end()) out.push_back(gv);
  }
  return out;
}

}  // namespace kubesim
