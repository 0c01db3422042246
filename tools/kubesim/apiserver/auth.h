// Authentication and authorization as kube-apiserver does them, for `--token` and `--rbac`:
// the request attributes (k8s.io/apiserver requestinfo.go), an RBAC-like table mapping bearer
// tokens to a user and its rules, and the Forbidden Status with the authorizer's wording
// (`rayjobs.ray.io "x" is forbidden: User "u" cannot delete resource "rayjobs" in API group
// "ray.io" in the namespace "ns"`). See docs/kubesim.md for the table's format.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "status.h"

namespace kubesim {

// What the authorizer sees of a request (authorizer.Attributes).
struct RequestAttrs {
  bool resource_request = false;
  std::string verb;  // get, list, watch, create, update, patch, delete, deletecollection
  std::string group;
  std::string version;
  std::string resource;
  std::string subresource;
  std::string ns;
  std::string name;
  std::string path;  // non-resource requests
};

// Parses a request path the way requestinfo.go does: /api/v1 and /apis/<g>/<v> themselves, and
// anything outside /api and /apis, are non-resource requests (verb = lower-case method). A list
// whose field selector pins metadata.name carries that name.
RequestAttrs ParseRequestAttrs(const std::string& method, const std::string& path, bool watch,
                               const std::string& field_selector);

struct RbacRule {
  std::vector<std::string> verbs;
  std::vector<std::string> api_groups;
  std::vector<std::string> resources;       // "pods", "pods/log", "*", "*/status"
  std::vector<std::string> namespaces;      // empty = every namespace and the cluster scope
  std::vector<std::string> resource_names;  // empty = any name
  bool Matches(const RequestAttrs& a) const;
};

struct RbacUser {
  std::string name;
  std::string token;
  std::vector<RbacRule> rules;
};

struct AuthDecision {
  bool allowed = false;
  std::string reason;
};

// Who made a request.
struct Identity {
  std::string name;                // "system:anonymous" when no token was sent
  const RbacUser* user = nullptr;  // null: anonymous or the --token administrator
  bool admin = false;              // the --token token when --rbac is also given
  bool anonymous = false;
};

class Rbac {
 public:
  // Loads the table (YAML or JSON); throws std::runtime_error naming the problem.
  static Rbac Load(const std::string& path);
  static Rbac FromJson(const nlohmann::json& doc);

  const RbacUser* FindToken(const std::string& token) const;
  AuthDecision Authorize(const Identity& who, const RequestAttrs& a) const;

 private:
  std::vector<RbacUser> users_;
};

// 403 Forbidden as the apiserver writes it for a denied request.
ApiError ForbiddenError(const std::string& user, const RequestAttrs& a);

}  // namespace kubesim
