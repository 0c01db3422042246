// The resource registry: which group/version/resources kubesim serves, their scope, kinds,
// subresources and field-selector allow-lists, and the CRD schemas of the custom resources.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apiserver/crd_schema.h"

namespace kubesim {

struct CrdSchema {
  nlohmann::json crd;      // the whole CustomResourceDefinition
  nlohmann::json openapi;  // spec.versions[v1].schema.openAPIV3Schema
  std::unique_ptr<CrdValidator> validator;
};

struct ResourceInfo {
  std::string group;  // "" = core
  std::string version;
  std::string plural;
  std::string singular;
  std::string kind;
  bool namespaced = true;
  std::vector<std::string> subresources;  // "status", "log", "proxy"
  std::string storage;                    // shared storage key (core and events.k8s.io events)
  std::vector<std::string> field_labels;  // besides metadata.name / metadata.namespace
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  bool returns_deleted_object = true;      // false for CRs (Status Success instead)
  bool allow_unconditional_update = true;  // false for CRs
  bool has_generation = false;
  std::vector<std::string> verbs;  // empty = the usual eight (create ... watch)
  std::shared_ptr<CrdSchema> crd;  // custom resources only

  bool HasSub(const std::string& s) const;
  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  // "pods", "rayjobs.ray.io", "jobs.batch"
  std::string GroupResource() const { return group.empty() ? plural : plural + "." + group; }
  // "Pod", "RayJob.ray.io"
  std::string QualifiedKind() const { return group.empty() ? kind : kind + "." + group; }
};

class Registry {
 public:
  // Loads the built-in resources and the KubeRay CRDs from `crd_dir` (files ray.io_rayjobs.yaml,
  // ray.io_rayclusters.yaml). Throws std::runtime_error when a CRD cannot be loaded.
  static Registry Build(const std::string& crd_dir);

  const ResourceInfo* Find(const std::string& group, const std::string& version,
                           const std::string& plural) const;
  const std::vector<ResourceInfo>& All() const { return resources_; }
  // Group/versions in discovery order, e.g. {"", "v1"}, {"batch", "v1"}, ...
  std::vector<std::pair<std::string, std::string>> GroupVersions() const;

 private:
  std::vector<ResourceInfo> resources_;
};

}  // namespace kubesim
