#include "auth.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "parse_yaml.h"

namespace kubesim {

using nlohmann::json;

namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, sep)) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

bool HasOrStar(const std::vector<std::string>& v, const std::string& s) {
  return Has(v, "*") || Has(v, s);
}

std::string Lower(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The name a field selector pins with metadata.name=X (requestinfo.go does the same).
std::string NameFromFieldSelector(const std::string& selector) {
  for (const auto& term : Split(selector, ',')) {
    for (const char* op : {"==", "="}) {
      const std::string prefix = std::string("metadata.name") + op;
      if (term.rfind(prefix, 0) == 0) return term.substr(prefix.size());
    }
  }
  return "";
}

std::vector<std::string> Strings(const json& rule, const char* key, const std::string& where,
                                 bool required) {
  if (!rule.contains(key) || rule[key].is_null()) {
    if (required) throw std::runtime_error(where + ": `" + key + "` is required");
    return {};
  }
  if (!rule[key].is_array()) throw std::runtime_error(where + ": `" + key + "` must be a list");
  std::vector<std::string> out;
  for (const auto& v : rule[key]) {
    if (!v.is_string()) {
      throw std::runtime_error(where + ": `" + key + "` must be a list of strings");
    }
    out.push_back(v.get<std::string>());
  }
  if (required && out.empty()) throw std::runtime_error(where + ": `" + key + "` is empty");
  return out;
}

void CheckKeys(const json& obj, const std::set<std::string>& allowed, const std::string& where) {
  for (const auto& [k, v] : obj.items()) {
    if (allowed.count(k) == 0) throw std::runtime_error(where + ": unknown field `" + k + "`");
  }
}

}  // namespace

RequestAttrs ParseRequestAttrs(const std::string& method, const std::string& path, bool watch,
                               const std::string& field_selector) {
  RequestAttrs a;
  a.path = path;
  a.verb = Lower(method);
  std::vector<std::string> parts = Split(path, '/');
  if (parts.size() < 3 || (parts[0] != "api" && parts[0] != "apis")) return a;
  size_t i = 1;
  if (parts[0] == "apis") {
    if (parts.size() < 4) return a;
    a.group = parts[1];
    i = 2;
  }
  a.resource_request = true;
  a.version = parts[i++];
  std::vector<std::string> rest(parts.begin() + static_cast<std::ptrdiff_t>(i), parts.end());
  if (method == "GET" || method == "HEAD") {
    a.verb = "get";
  } else if (method == "POST") {
    a.verb = "create";
  } else if (method == "PUT") {
    a.verb = "update";
  } else if (method == "PATCH") {
    a.verb = "patch";
  } else if (method == "DELETE") {
    a.verb = "delete";
  }
  if (rest[0] == "namespaces" && rest.size() > 1) {
    a.ns = rest[1];
    // namespaces/{ns}/status and /finalize are subresources of the namespace itself.
    if (rest.size() > 2 && rest[2] != "status" && rest[2] != "finalize") {
      rest.erase(rest.begin(), rest.begin() + 2);
    }
  }
  a.resource = rest[0];
  if (rest.size() >= 2) a.name = rest[1];
  if (rest.size() >= 3) a.subresource = rest[2];
  if (a.name.empty() && a.verb == "get") {
    a.verb = watch ? "watch" : "list";
    a.name = NameFromFieldSelector(field_selector);
  }
  if (a.name.empty() && a.verb == "delete") a.verb = "deletecollection";
  return a;
}

bool RbacRule::Matches(const RequestAttrs& a) const {
  if (!HasOrStar(verbs, a.verb)) return false;
  if (!HasOrStar(api_groups, a.group)) return false;
  const std::string combined =
      a.subresource.empty() ? a.resource : a.resource + "/" + a.subresource;
  bool resource_ok = false;
  for (const auto& r : resources) {
    if (r == "*" || r == combined ||
        (!a.subresource.empty() && r.size() > 2 && r.rfind("*/", 0) == 0 &&
         r.substr(2) == a.subresource)) {
      resource_ok = true;
      break;
    }
  }
  if (!resource_ok) return false;
  if (!namespaces.empty() && (a.ns.empty() || !HasOrStar(namespaces, a.ns))) return false;
  if (!resource_names.empty() && !Has(resource_names, a.name)) return false;
  return true;
}

Rbac Rbac::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read RBAC table " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return FromJson(kubesim::ParseYamlOrThrow(ss.str()));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("RBAC table " + path + ": " + e.what());
  }
}

Rbac Rbac::FromJson(const json& doc) {
  if (!doc.is_object() || !doc.contains("users") || !doc["users"].is_array()) {
    throw std::runtime_error("expected a mapping with a `users` list");
  }
  CheckKeys(doc, {"users"}, "top level");
  Rbac out;
  for (size_t i = 0; i < doc["users"].size(); ++i) {
    const json& u = doc["users"][i];
    const std::string where = "users[" + std::to_string(i) + "]";
    if (!u.is_object()) throw std::runtime_error(where + ": expected a mapping");
    CheckKeys(u, {"name", "token", "rules"}, where);
    RbacUser user;
    user.name = u.value("name", "");
    user.token = u.value("token", "");
    if (user.name.empty()) throw std::runtime_error(where + ": `name` is required");
    if (user.token.empty()) throw std::runtime_error(where + ": `token` is required");
    if (out.FindToken(user.token) != nullptr) {
      throw std::runtime_error(where + ": the token is used by an earlier user");
    }
    if (u.contains("rules") && !u["rules"].is_null()) {
      if (!u["rules"].is_array()) throw std::runtime_error(where + ": `rules` must be a list");
      for (size_t j = 0; j < u["rules"].size(); ++j) {
        const json& r = u["rules"][j];
        const std::string rwhere = where + ".rules[" + std::to_string(j) + "]";
        if (!r.is_object()) throw std::runtime_error(rwhere + ": expected a mapping");
        CheckKeys(r, {"verbs", "apiGroups", "resources", "namespaces", "resourceNames"}, rwhere);
        RbacRule rule;
        rule.verbs = Strings(r, "verbs", rwhere, true);
        rule.api_groups = Strings(r, "apiGroups", rwhere, true);
        rule.resources = Strings(r, "resources", rwhere, true);
        rule.namespaces = Strings(r, "namespaces", rwhere, false);
        rule.resource_names = Strings(r, "resourceNames", rwhere, false);
        user.rules.push_back(std::move(rule));
      }
    }
    out.users_.push_back(std::move(user));
  }
  return out;
}

const RbacUser* Rbac::FindToken(const std::string& token) const {
  for (const auto& u : users_) {
    if (u.token == token) return &u;
  }
  return nullptr;
}

AuthDecision Rbac::Authorize(const Identity& who, const RequestAttrs& a) const {
  if (who.admin) return {true, "kubesim: the --token user is an administrator"};
  if (!a.resource_request) {
    // system:public-info-viewer (everyone) and system:discovery (authenticated users).
    static const std::set<std::string> kPublic = {"/version", "/version/", "/healthz", "/livez",
                                                  "/readyz"};
    if (a.verb == "get" && kPublic.count(a.path) != 0) return {true, ""};
    if (!who.anonymous && a.verb == "get") return {true, ""};
    return {false, ""};
  }
  // system:basic-user: every authenticated user may ask what it may do.
  if (!who.anonymous && a.group == "authorization.k8s.io" && a.verb == "create" &&
      (a.resource == "selfsubjectaccessreviews" || a.resource == "selfsubjectrulesreviews")) {
    return {true,
            "RBAC: allowed by ClusterRoleBinding \"system:basic-user\" of ClusterRole "
            "\"system:basic-user\" to Group \"system:authenticated\""};
  }
  if (who.user == nullptr) return {false, ""};
  for (size_t i = 0; i < who.user->rules.size(); ++i) {
    if (who.user->rules[i].Matches(a)) {
      return {true, "kubesim RBAC: allowed by rule " + std::to_string(i) + " of User \"" +
                        who.user->name + "\""};
    }
  }
  // The RBAC authorizer has no opinion on what no rule grants: no reason, and not `denied`.
  return {false, ""};
}

ApiError ForbiddenError(const std::string& user, const RequestAttrs& a) {
  std::string reason;
  if (!a.resource_request) {
    reason = "User \"" + user + "\" cannot " + a.verb + " path \"" + a.path + "\"";
    ApiError e(403, "Forbidden", "forbidden: " + reason);
    return e;
  }
  const std::string resource =
      a.subresource.empty() ? a.resource : a.resource + "/" + a.subresource;
  reason = "User \"" + user + "\" cannot " + a.verb + " resource \"" + resource +
           "\" in API group \"" + a.group + "\"" +
           (a.ns.empty() ? " at the cluster scope" : " in the namespace \"" + a.ns + "\"");
  const std::string gr = a.group.empty() ? a.resource : a.resource + "." + a.group;
  ApiError e(403, "Forbidden",
             gr + (a.name.empty() ? "" : " \"" + a.name + "\"") + " is forbidden: " + reason);
  e.details = json::object();
  if (!a.name.empty()) e.details["name"] = a.name;
  if (!a.group.empty()) e.details["group"] = a.group;
  e.details["kind"] = a.resource;
  return e;
}

}  // namespace kubesim
