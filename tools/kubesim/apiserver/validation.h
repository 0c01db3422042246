// What kube-apiserver checks before it stores an object: ObjectMeta rules (names, labels,
// annotations, finalizers, ownerReferences) and, for custom resources, the CRD's structural
// schema — null pruning, defaulting, unknown-field pruning (or rejection with
// fieldValidation=Strict), OpenAPI validation via CrdValidator and the RayJob CRD's CEL rules.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "status.h"

namespace kubesim {

struct ResourceInfo;

// ObjectMeta checks; `old` is null on create. Name/namespace presence is checked too.
FieldErrs ValidateMeta(const ResourceInfo& r, const nlohmann::json& obj, const nlohmann::json* old);

// Removes fields the schema does not declare (never below x-kubernetes-preserve-unknown-fields)
// and unknown ObjectMeta fields; returns their paths, e.g. "spec.foo", "metadata.bar".
std::vector<std::string> PruneUnknown(const nlohmann::json& schema, nlohmann::json& obj);

// apimachinery's IsDNS1123Subdomain: the problems with V as a subdomain (empty when valid).
std::vector<std::string> IsDns1123Subdomain(const std::string& v);

// Applies `default`s from the schema, recursively, where a field is absent.
void ApplyDefaults(const nlohmann::json& schema, nlohmann::json& obj);

// Schema + CEL validation of a custom resource (after pruning and defaulting).
FieldErrs ValidateCustom(const ResourceInfo& r, const nlohmann::json& obj,
                         const nlohmann::json* old);

}  // namespace kubesim
