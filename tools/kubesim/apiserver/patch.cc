#include "patch.h"

#include <algorithm>
#include <map>

#include "status.h"

namespace kubesim {

using nlohmann::json;

json MergePatch(const json& target, const json& patch) {
  json out = target;
  out.merge_patch(patch);
  return out;
}

json JsonPatch(const json& target, const json& patch) {
  try {
    return target.patch(patch);
  } catch (const json::exception& e) {
    throw ApiError(422, "Invalid",
                   std::string("the server rejected our request due to an error in "
                               "our request: ") +
                       e.what());
  }
}

namespace {

// Patch merge keys of the core/v1 and batch/v1 lists kubectl apply touches.
std::string MergeKey(const std::string& field, const json& sample) {
  static const std::map<std::string, std::string> keys = {
      {"containers", "name"},          {"initContainers", "name"},
      {"ephemeralContainers", "name"}, {"env", "name"},
      {"volumeMounts", "mountPath"},   {"volumes", "name"},
      {"imagePullSecrets", "name"},    {"conditions", "type"},
      {"ownerReferences", "uid"},      {"hostAliases", "ip"},
      {"volumeDevices", "devicePath"}, {"resourceClaims", "name"}};
  if (field == "ports") {
    if (sample.is_object() && sample.contains("containerPort")) return "containerPort";
    return "port";
  }
  auto it = keys.find(field);
  return it == keys.end() ? "" : it->second;
}

bool IsMergedPrimitiveList(const std::string& field) {
  return field == "finalizers";
}

json Smp(const json& target, const json& patch);

json MergeList(const std::string& field, const json& target, const json& patch, const json* order) {
  if (!patch.is_array()) return patch;
  const json& base = target.is_array() ? target : json::array();
  const json& sample = !patch.empty() ? patch[0] : (!base.empty() ? base[0] : json());
  if (IsMergedPrimitiveList(field)) {
    json out = base;
    for (const auto& v : patch) {
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    }
    return out;
  }
  const std::string key = MergeKey(field, sample);
  if (key.empty() || !sample.is_object()) return patch;
  for (const auto& item : patch) {
    if (item.is_object() && item.value("$patch", "") == "replace") {
      json out = json::array();
      for (const auto& i : patch) {
        if (i.is_object() && i.contains("$patch")) continue;
        out.push_back(i);
      }
      return out;
    }
  }
  json out = base;
  for (const auto& item : patch) {
    if (!item.is_object() || !item.contains(key)) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const json& o) {
      return o.is_object() && o.contains(key) && o[key] == item[key];
    });
    if (item.value("$patch", "") == "delete") {
      if (it != out.end()) out.erase(it);
      continue;
    }
    if (it == out.end()) {
      out.push_back(Smp(json::object(), item));
    } else {
      *it = Smp(*it, item);
    }
  }
  if (order != nullptr && order->is_array()) {
    json sorted = json::array();
    for (const auto& k : *order) {
      const json& kv = k.is_object() && k.contains(key) ? k[key] : k;
      for (const auto& o : out) {
        if (o.is_object() && o.contains(key) && o[key] == kv) sorted.push_back(o);
      }
    }
    for (const auto& o : out) {
      if (std::find(sorted.begin(), sorted.end(), o) == sorted.end()) sorted.push_back(o);
    }
    out = sorted;
  }
  return out;
}

json Smp(const json& target, const json& patch) {
  if (!patch.is_object()) return patch;
  if (patch.value("$patch", "") == "delete") return json();
  json out = target.is_object() ? target : json::object();
  if (patch.value("$patch", "") == "replace") {
    json r = patch;
    r.erase("$patch");
    return r;
  }
  if (patch.contains("$retainKeys") && patch["$retainKeys"].is_array()) {
    for (auto it = out.begin(); it != out.end();) {
      const auto& keep = patch["$retainKeys"];
      if (std::find(keep.begin(), keep.end(), it.key()) == keep.end()) {
        it = out.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [k, v] : patch.items()) {
    if (k == "$patch" || k == "$retainKeys" || k.rfind("$setElementOrder/", 0) == 0) continue;
    if (k.rfind("$deleteFromPrimitiveList/", 0) == 0) {
      const std::string field = k.substr(25);
      if (out.contains(field) && out[field].is_array() && v.is_array()) {
        json kept = json::array();
        for (const auto& e : out[field]) {
          if (std::find(v.begin(), v.end(), e) == v.end()) kept.push_back(e);
        }
        out[field] = kept;
      }
      continue;
    }
    if (v.is_null()) {
      out.erase(k);
      continue;
    }
    const json* order = nullptr;
    if (patch.contains("$setElementOrder/" + k)) order = &patch["$setElementOrder/" + k];
    if (v.is_array()) {
      out[k] = MergeList(k, out.contains(k) ? out[k] : json(), v, order);
    } else if (v.is_object()) {
      json merged = Smp(out.contains(k) ? out[k] : json::object(), v);
      if (merged.is_null()) {
        out.erase(k);
      } else {
        out[k] = merged;
      }
    } else {
      out[k] = v;
    }
  }
  return out;
}

}  // namespace

json StrategicMergePatch(const json& target, const json& patch) {
  return Smp(target, patch);
}

}  // namespace kubesim
