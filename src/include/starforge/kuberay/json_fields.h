// Reads of Kubernetes objects (nlohmann::json) that never throw on what a cluster returns: a
// missing key, or a value of another type, reads as null, "", [] or the fallback.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace starforge::kuberay::json_fields {

// obj[key]; null when obj is not an object or has no `key`.
inline const nlohmann::json& Field(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

// obj[key] when it is a string, else "".
inline std::string Str(const nlohmann::json& obj, const char* key) {
  const nlohmann::json& v = Field(obj, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

// obj[key] when it is an array, else [].
inline const nlohmann::json& Arr(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::array();
  const nlohmann::json& v = Field(obj, key);
  return v.is_array() ? v : kEmpty;
}

// obj[key] when it is an integer, else `fallback`.
inline int64_t Int(const nlohmann::json& obj, const char* key, int64_t fallback) {
  const nlohmann::json& v = Field(obj, key);
  return v.is_number_integer() ? v.get<int64_t>() : fallback;
}

// metadata.name, metadata.namespace and metadata.labels[key] of an object ("" when absent).
inline std::string Name(const nlohmann::json& obj) {
  return Str(Field(obj, "metadata"), "name");
}
inline std::string Namespace(const nlohmann::json& obj) {
  return Str(Field(obj, "metadata"), "namespace");
}
inline std::string Label(const nlohmann::json& obj, const std::string& key) {
  return Str(Field(Field(obj, "metadata"), "labels"), key.c_str());
}

}  // namespace starforge::kuberay::json_fields
