// starforge::ParseYaml for kubesim, whose handlers and loaders report failure by exception: the
// HTTP front turns YamlError into a 400 "error decoding body", the loaders' callers stop.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "starforge/common/yaml_json.h"

namespace kubesim {

// Malformed YAML or JSON; what() is ParseYaml's "line L, column C: reason".
class YamlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One YAML (or JSON) document; throws YamlError.
inline nlohmann::json ParseYamlOrThrow(std::string_view text,
                                       const starforge::YamlLimits& limits = {}) {
  starforge::StatusOr<nlohmann::json> doc = starforge::ParseYaml(text, limits);
  if (!doc.ok()) throw YamlError(doc.status().message());
  return std::move(doc).value();
}

}  // namespace kubesim
