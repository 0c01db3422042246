#include "discovery.h"

#include <algorithm>

namespace kubesim {

using nlohmann::json;

namespace {

const std::vector<std::string> kVerbs = {"create", "delete", "deletecollection", "get",
                                         "list",   "patch",  "update",           "watch"};

std::vector<std::string> SubVerbs(const std::string& sub) {
  if (sub == "status") return {"get", "patch", "update"};
  if (sub == "log") return {"get"};
  if (sub == "binding") return {"create"};
  return {"create", "delete", "get", "patch", "update"};  // proxy
}

std::string SubKind(const ResourceInfo& r, const std::string& sub) {
  if (sub == "log") return "Pod";
  if (sub == "binding") return "Binding";
  if (sub == "proxy")
    return r.kind == "Pod" ? "PodProxyOptions"
                           : (r.kind == "Node" ? "NodeProxyOptions" : "ServiceProxyOptions");
  return r.kind;
}

std::string GvPath(const std::string& group, const std::string& version) {
  return group.empty() ? "api/" + version : "apis/" + group + "/" + version;
}

}  // namespace

json VersionDoc() {
  return {{"major", "1"},
          {"minor", "32"},
          {"gitVersion", "v1.32.0-kubesim"},
          {"gitCommit", "0000000000000000000000000000000000000000"},
          {"gitTreeState", "clean"},
          {"buildDate", "2025-01-01T00:00:00Z"},
          {"goVersion", "go1.23.0"},
          {"compiler", "gc"},
          {"platform", "linux/amd64"}};
}

bool WantsAggregated(const std::string& accept) {
  size_t start = 0;
  while (start <= accept.size()) {
    size_t comma = accept.find(',', start);
    std::string range =
        accept.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    range.erase(std::remove(range.begin(), range.end(), ' '), range.end());
    // Parameters of one media range, e.g. application/json;g=...;v=v2;as=...
    bool g = false;
    bool v = false;
    bool as = false;
    size_t p = range.find(';');
    while (p != std::string::npos) {
      size_t next = range.find(';', p + 1);
      const std::string param =
          range.substr(p + 1, next == std::string::npos ? std::string::npos : next - p - 1);
      g |= param == "g=apidiscovery.k8s.io";
      v |= param == "v=v2";
      as |= param == "as=APIGroupDiscoveryList";
      p = next;
    }
    if (g && v && as) return true;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return false;
}

json LegacyApi() {
  return {{"kind", "APIVersions"},
          {"versions", {"v1"}},
          {"serverAddressByClientCIDRs",
           json::array({{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", "127.0.0.1"}}})}};
}

json LegacyApis(const Registry& reg) {
  json groups = json::array();
  for (const auto& [g, v] : reg.GroupVersions()) {
    if (g.empty()) continue;
    json gv = {{"groupVersion", g + "/" + v}, {"version", v}};
    groups.push_back({{"name", g}, {"versions", json::array({gv})}, {"preferredVersion", gv}});
  }
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}};
}

json ResourceList(const Registry& reg, const std::string& group, const std::string& version) {
  json resources = json::array();
  for (const auto& r : reg.All()) {
    if (r.group != group || r.version != version) continue;
    json e = {{"name", r.plural},
              {"singularName", r.singular},
              {"namespaced", r.namespaced},
              {"kind", r.kind},
              {"verbs", r.verbs.empty() ? kVerbs : r.verbs}};
    if (!r.short_names.empty()) e["shortNames"] = r.short_names;
    if (!r.categories.empty()) e["categories"] = r.categories;
    resources.push_back(e);
    for (const auto& sub : r.subresources) {
      resources.push_back({{"name", r.plural + "/" + sub},
                           {"singularName", ""},
                           {"namespaced", r.namespaced},
                           {"kind", SubKind(r, sub)},
                           {"verbs", SubVerbs(sub)}});
    }
  }
  if (resources.empty()) return json();
  return {{"kind", "APIResourceList"},
          {"apiVersion", "v1"},
          {"groupVersion", group.empty() ? version : group + "/" + version},
          {"resources", resources}};
}

json Aggregated(const Registry& reg, bool core) {
  json items = json::array();
  for (const auto& [g, v] : reg.GroupVersions()) {
    if (g.empty() != core) continue;
    json resources = json::array();
    for (const auto& r : reg.All()) {
      if (r.group != g || r.version != v) continue;
      json e = {{"resource", r.plural},
                {"responseKind", {{"group", r.group}, {"version", r.version}, {"kind", r.kind}}},
                {"scope", r.namespaced ? "Namespaced" : "Cluster"},
                {"singularResource", r.singular},
                {"verbs", r.verbs.empty() ? kVerbs : r.verbs}};
      if (!r.short_names.empty()) e["shortNames"] = r.short_names;
      if (!r.categories.empty()) e["categories"] = r.categories;
      json subs = json::array();
      for (const auto& sub : r.subresources) {
        subs.push_back({{"subresource", sub},
                        {"responseKind",
                         {{"group", r.group}, {"version", r.version}, {"kind", SubKind(r, sub)}}},
                        {"verbs", SubVerbs(sub)}});
      }
      if (!subs.empty()) e["subresources"] = subs;
      resources.push_back(e);
    }
    items.push_back(
        {{"metadata", {{"name", g}}},
         {"versions",
          json::array({{{"version", v}, {"freshness", "Current"}, {"resources", resources}}})}});
  }
  return {{"kind", "APIGroupDiscoveryList"},
          {"apiVersion", "apidiscovery.k8s.io/v2"},
          {"metadata", json::object()},
          {"items", items}};
}

json OpenApiIndex(const Registry& reg) {
  json paths = json::object();
  for (const auto& [g, v] : reg.GroupVersions()) {
    const std::string p = GvPath(g, v);
    paths[p] = {{"serverRelativeURL", "/openapi/v3/" + p + "?hash=kubesim-" + v}};
  }
  return {{"paths", paths}};
}

json OpenApiDoc(const Registry& reg, const std::string& path) {
  json paths = json::object();
  json schemas = json::object();
  bool any = false;
  const json field_validation = {{"name", "fieldValidation"},
                                 {"in", "query"},
                                 {"schema", {{"type", "string"}}},
                                 {"uniqueItems", true}};
  for (const auto& r : reg.All()) {
    if (GvPath(r.group, r.version) != path) continue;
    any = true;
    const json gvk = {{"group", r.group}, {"version", r.version}, {"kind", r.kind}};
    const std::string base =
        "/" + path + (r.namespaced ? "/namespaces/{namespace}/" : "/") + r.plural;
    auto op = [&](const char* action) {
      return json{{"x-kubernetes-action", action},
                  {"x-kubernetes-group-version-kind", gvk},
                  {"parameters", json::array({field_validation})},
                  {"responses", {{"200", {{"description", "OK"}}}}}};
    };
    if (!r.verbs.empty()) {  // create-only (SelfSubjectAccessReview)
      paths[base] = {{"post", op("post")}};
      continue;
    }
    paths[base] = {{"get", op("list")}, {"post", op("post")}};
    paths[base + "/{name}"] = {
        {"get", op("get")}, {"put", op("put")}, {"patch", op("patch")}, {"delete", op("delete")}};
    if (r.HasSub("status")) {
      paths[base + "/{name}/status"] = {
          {"get", op("get")}, {"put", op("put")}, {"patch", op("patch")}};
    }
    if (r.crd != nullptr) {
      json s = r.crd->openapi;
      s["x-kubernetes-group-version-kind"] = json::array({gvk});
      schemas[r.group + "." + r.version + "." + r.kind] = s;
    }
  }
  if (!any) return json();
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "Kubernetes"}, {"version", "v1.32.0"}}},
          {"paths", paths},
          {"components", {{"schemas", schemas}}}};
}

}  // namespace kubesim
