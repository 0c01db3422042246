// Reads of API objects (nlohmann::json) that never throw on what a server returns: a missing
// key, a step that is not an object, or a value of another type reads as null, "", [] or the
// fallback. Shared by src/ (kuberay, the fleets) and kubesim (its API server, printers,
// controllers and node).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

namespace starforge::json_read {

// obj[key]; null when obj is not an object or has no `key`.
inline const nlohmann::json& Field(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

// obj[a][b]…; null when a key is absent or a step is not an object.
inline const nlohmann::json& At(const nlohmann::json& obj,
                                std::initializer_list<const char*> path) {
  static const nlohmann::json kNull;
  const nlohmann::json* cur = &obj;
  for (const char* key : path) {
    cur = &Field(*cur, key);
    if (cur->is_null()) return kNull;
  }
  return *cur;
}

// obj[key] (or obj[a][b]…) when it is a string, else "".
inline std::string Str(const nlohmann::json& obj, const char* key) {
  const nlohmann::json& v = Field(obj, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}
inline std::string Str(const nlohmann::json& obj, std::initializer_list<const char*> path) {
  const nlohmann::json& v = At(obj, path);
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
  return Str(obj, {"metadata", "name"});
}
inline std::string Namespace(const nlohmann::json& obj) {
  return Str(obj, {"metadata", "namespace"});
}
inline std::string Label(const nlohmann::json& obj, const std::string& key) {
  return Str(At(obj, {"metadata", "labels"}), key.c_str());
}

}  // namespace starforge::json_read
