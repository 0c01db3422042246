// Validating objects against a CustomResourceDefinition's structural OpenAPI v3 schema with a
// JSON Schema validator (valijson). The OpenAPI v3 dialect of CRDs is translated to JSON Schema
// draft 4 first; the translation rules are documented in crd_schema.cc and docs/crd-validation.md.
// Used by kubesim's API server and by the tests that check rendered RayJobs against the CRDs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/common/field_error.h"

namespace kubesim {

// Translates one `openAPIV3Schema` node (recursively) to JSON Schema draft 4:
//  - `nullable: true` adds "null" to `type`;
//  - `x-kubernetes-int-or-string: true` becomes anyOf integer|string (without a `type`);
//  - an object schema with `properties` and no `additionalProperties` gets
//    `additionalProperties: false` (unknown fields are errors, as with kubectl --validate=strict),
//    unless `x-kubernetes-preserve-unknown-fields: true`;
//  - `format: int32` / `int64` add the integer's range as minimum/maximum;
//  - `x-kubernetes-*` extensions and `default` are dropped; CEL rules (`x-kubernetes-validations`)
//    cannot be expressed in JSON Schema and are not checked here.
nlohmann::json TranslateOpenApiV3(const nlohmann::json& openapi);

class CrdValidator {
 public:
  // Loads a CRD document (YAML) and selects `version` (e.g. "v1"). Throws std::runtime_error
  // naming the file when it cannot be read, parsed, or lacks that version's schema.
  static std::unique_ptr<CrdValidator> FromFile(const std::string& crd_path,
                                                const std::string& version);
  static std::unique_ptr<CrdValidator> FromCrd(const nlohmann::json& crd,
                                               const std::string& version);
  ~CrdValidator();

  // Every schema violation in `object`, each with a JSON path like `spec.rayClusterSpec.
  // headGroupSpec.template.spec.containers[0].name` and a message. Empty = valid.
  starforge::FieldErrors Validate(const nlohmann::json& object) const;

  const std::string& Kind() const { return kind_; }

 private:
  CrdValidator();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string kind_;
};

}  // namespace kubesim
