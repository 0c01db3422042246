// Conversion between YAML text and JSON values, with the YAML 1.2 core schema: plain scalars
// become null/bool/int/float where they look like one, quoted scalars always stay strings.
// Also the single YAML emitter used for everything StarForge prints (deterministic output).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace starforge {

// Thrown for malformed YAML/JSON; what() carries "line L, column C: reason" when known.
class SyntaxError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses one YAML document (JSON is a subset of YAML). Throws SyntaxError. Duplicate mapping keys
// are an error (as in kubectl), naming the key. Non-scalar mapping keys are an error. An empty
// document yields null.
nlohmann::json ParseYaml(std::string_view text);

// Emits `value` as block-style YAML, keys in the json object's (sorted) order, ending in "\n".
// Strings that a YAML reader would take for another type ("8", "true", "null", "1e3", "") are
// double-quoted; multi-line strings use literal block style ("|"). ParseYaml(EmitYaml(v)) == v.
std::string EmitYaml(const nlohmann::json& value);

}  // namespace starforge
