// Reads along a path of keys in an API object (nlohmann::json) that never throw on a wrong shape:
// what the API server, its printers and the controllers all need.
#pragma once

#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

namespace kubesim {

// obj[a][b]…, or null json when a key is absent or a step is not an object.
inline const nlohmann::json& At(const nlohmann::json& obj,
                                std::initializer_list<const char*> path) {
  static const nlohmann::json kNull;
  const nlohmann::json* cur = &obj;
  for (const char* p : path) {
    if (!cur->is_object()) return kNull;
    auto it = cur->find(p);
    if (it == cur->end()) return kNull;
    cur = &*it;
  }
  return *cur;
}

// obj[a][b]… as a string ("" when absent or not a string).
inline std::string Str(const nlohmann::json& obj, std::initializer_list<const char*> path) {
  const nlohmann::json& v = At(obj, path);
  return v.is_string() ? v.get<std::string>() : std::string();
}

}  // namespace kubesim
