// Conversion between YAML text and JSON values, with the YAML 1.2 core schema: plain scalars
// become null/bool/int/float where they look like one, quoted scalars always stay strings.
// Also the single YAML emitter used for everything StarForge prints (deterministic output).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "starforge/common/status_or.h"

namespace starforge {

// What one document may expand to: aliases can multiply a small document into a huge one
// ("billion laughs"), so values and bytes (keys and scalars, each alias counting what it copies)
// are counted as if every alias were written out.
struct YamlLimits {
  size_t max_nodes = 1'000'000;
  size_t max_bytes = size_t{256} << 20;
  size_t max_depth = 1000;  // collections nested in collections
};

// Parses one YAML document (JSON is a subset of YAML). Malformed text is a kInvalidArgument Status
// whose message is "line L, column C: reason" when the place is known. Duplicate mapping keys
// are an error (as in kubectl), naming the key. Non-scalar mapping keys are an error. An empty
// document yields null. A document larger than `limits` once expanded is an error.
StatusOr<nlohmann::json> ParseYaml(std::string_view text, const YamlLimits& limits = {});

// Emits `value` as block-style YAML, keys in the json object's (sorted) order, ending in "\n".
// Strings that a YAML reader would take for another type ("8", "true", "null", "1e3", "") are
// double-quoted; multi-line strings use literal block style ("|"). ParseYaml(EmitYaml(v)) == v.
std::string EmitYaml(const nlohmann::json& value);

}  // namespace starforge
