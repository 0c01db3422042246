#include "node/pod_env.h"

#include <openssl/evp.h>

#include <algorithm>

#include "starforge/common/json_read.h"
#include "starforge/common/quantity.h"

namespace kubesim::node {

using nlohmann::json;

namespace {

// Never-throwing reads (common/json_read.h); Obj is this file's name for Field.
constexpr auto& Obj = starforge::json_read::Field;
using starforge::json_read::Str;

bool Optional(const json& ref) {
  return Obj(ref, "optional") == json(true);
}

std::string Base64Decode(const std::string& in) {
  std::string clean;
  for (char c : in) {
    if (c != '\n' && c != '\r' && c != ' ') clean += c;
  }
  if (clean.empty()) return "";
  std::string out(clean.size() * 3 / 4 + 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(clean.data()),
                                static_cast<int>(clean.size()));
  if (n < 0) return "";
  size_t len = static_cast<size_t>(n);
  // EVP_DecodeBlock keeps the padding bytes as zeros.
  if (!clean.empty() && clean.back() == '=') --len;
  if (clean.size() > 1 && clean[clean.size() - 2] == '=') --len;
  out.resize(len);
  return out;
}

// metadata.labels['key'] -> ("labels", "key").
bool SubscriptPath(const std::string& path, const std::string& field, std::string* key) {
  const std::string prefix = "metadata." + field + "['";
  if (path.rfind(prefix, 0) != 0 || path.size() < prefix.size() + 2) return false;
  if (path.compare(path.size() - 2, 2, "']") != 0) return false;
  *key = path.substr(prefix.size(), path.size() - prefix.size() - 2);
  return true;
}

std::string FieldRefValue(const json& pod, const std::string& path, const PodFacts& facts) {
  const json& md = Obj(pod, "metadata");
  const json& spec = Obj(pod, "spec");
  std::string key;
  if (path == "metadata.name") return Str(md, "name");
  if (path == "metadata.namespace") return Str(md, "namespace");
  if (path == "metadata.uid") return Str(md, "uid");
  if (path == "spec.nodeName") return Str(spec, "nodeName");
  if (path == "spec.serviceAccountName") return Str(spec, "serviceAccountName");
  if (path == "status.podIP" || path == "status.podIPs") return facts.pod_ip;
  if (path == "status.hostIP" || path == "status.hostIPs") return facts.host_ip;
  if (SubscriptPath(path, "labels", &key)) return Str(Obj(md, "labels"), key.c_str());
  if (SubscriptPath(path, "annotations", &key)) return Str(Obj(md, "annotations"), key.c_str());
  if (path == "metadata.labels" || path == "metadata.annotations") {
    // The downward API's "key=\"value\"" lines.
    const json& m = Obj(md, path == "metadata.labels" ? "labels" : "annotations");
    std::string out;
    if (m.is_object()) {
      for (const auto& [k, v] : m.items()) {
        out += (out.empty() ? "" : "\n") + k + "=" +
               json(v.is_string() ? v.get<std::string>() : "").dump();
      }
    }
    return out;
  }
  throw ConfigError("unsupported fieldPath: " + path);
}

std::string ResourceFieldValue(const json& container, const json& ref) {
  const std::string resource = Str(ref, "resource");
  const auto dot = resource.find('.');
  if (dot == std::string::npos) throw ConfigError("unsupported container resource : " + resource);
  const std::string kind = resource.substr(0, dot);  // limits | requests
  const std::string name = resource.substr(dot + 1);
  const json& amounts = Obj(Obj(container, "resources"), kind.c_str());
  int64_t milli = 0;
  if (amounts.is_object() && amounts.contains(name) && amounts[name].is_string()) {
    auto q = starforge::Quantity::Parse(amounts[name].get<std::string>());
    if (q) milli = q->MilliValue();
  }
  int64_t divisor = 1000;
  if (Obj(ref, "divisor").is_string()) {
    auto q = starforge::Quantity::Parse(ref["divisor"].get<std::string>());
    if (q && q->MilliValue() > 0) divisor = q->MilliValue();
  }
  return std::to_string((milli + divisor - 1) / divisor);
}

}  // namespace

std::map<std::string, std::string> ConfigMapData(const json& cm) {
  std::map<std::string, std::string> out;
  if (Obj(cm, "data").is_object()) {
    for (const auto& [k, v] : cm["data"].items())
      out[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  if (Obj(cm, "binaryData").is_object()) {
    for (const auto& [k, v] : cm["binaryData"].items())
      out[k] = Base64Decode(v.is_string() ? v.get<std::string>() : "");
  }
  return out;
}

std::map<std::string, std::string> SecretData(const json& secret) {
  std::map<std::string, std::string> out;
  if (Obj(secret, "data").is_object()) {
    for (const auto& [k, v] : secret["data"].items())
      out[k] = Base64Decode(v.is_string() ? v.get<std::string>() : "");
  }
  if (Obj(secret, "stringData").is_object()) {  // kubesim does not fold stringData into data
    for (const auto& [k, v] : secret["stringData"].items())
      out[k] = v.is_string() ? v.get<std::string>() : "";
  }
  return out;
}

std::string ExpandVars(const std::string& s, const std::map<std::string, std::string>& env) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] != '$' || i + 1 >= s.size()) {
      out += s[i++];
      continue;
    }
    if (s[i + 1] == '$') {
      out += '$';
      i += 2;
      continue;
    }
    if (s[i + 1] == '(') {
      const size_t close = s.find(')', i + 2);
      if (close == std::string::npos) {
        out += "$(";  // an incomplete reference stays as it is; scanning goes on after it
        i += 2;
        continue;
      }
      const std::string name = s.substr(i + 2, close - i - 2);
      auto it = env.find(name);
      out += it != env.end() ? it->second : "$(" + name + ")";
      i = close + 1;
      continue;
    }
    out += s[i++];
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> ContainerEnv(const json& pod,
                                                              const json& container,
                                                              const PodFacts& facts,
                                                              const ObjectLookup& lookup) {
  const std::string ns = Str(Obj(pod, "metadata"), "namespace");
  std::vector<std::pair<std::string, std::string>> out;
  std::map<std::string, std::string> seen;
  auto set = [&](const std::string& k, const std::string& v) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == k; });
    if (it == out.end()) {
      out.emplace_back(k, v);
    } else {
      it->second = v;
    }
    seen[k] = v;
  };
  std::map<std::string, std::map<std::string, std::string>> cms;
  std::map<std::string, std::map<std::string, std::string>> secrets;
  auto config_map = [&](const std::string& name,
                        bool optional) -> const std::map<std::string, std::string>* {
    auto it = cms.find(name);
    if (it != cms.end()) return &it->second;
    auto obj = lookup("configmaps", ns, name);
    if (!obj) {
      if (optional) return nullptr;
      throw ConfigError("configmap \"" + name + "\" not found");
    }
    return &(cms[name] = ConfigMapData(*obj));
  };
  auto secret = [&](const std::string& name,
                    bool optional) -> const std::map<std::string, std::string>* {
    auto it = secrets.find(name);
    if (it != secrets.end()) return &it->second;
    auto obj = lookup("secrets", ns, name);
    if (!obj) {
      if (optional) return nullptr;
      throw ConfigError("secret \"" + name + "\" not found");
    }
    return &(secrets[name] = SecretData(*obj));
  };
  const json& env_from = Obj(container, "envFrom");
  if (env_from.is_array()) {
    for (const auto& src : env_from) {
      const std::string prefix = Str(src, "prefix");
      const std::map<std::string, std::string>* data = nullptr;
      if (Obj(src, "configMapRef").is_object()) {
        data = config_map(Str(src["configMapRef"], "name"), Optional(src["configMapRef"]));
      } else if (Obj(src, "secretRef").is_object()) {
        data = secret(Str(src["secretRef"], "name"), Optional(src["secretRef"]));
      }
      if (data == nullptr) continue;
      for (const auto& [k, v] : *data)
        set(prefix + k, v);
    }
  }
  const json& env = Obj(container, "env");
  if (env.is_array()) {
    for (const auto& e : env) {
      const std::string name = Str(e, "name");
      if (name.empty()) continue;
      const json& from = Obj(e, "valueFrom");
      if (!from.is_object()) {
        set(name, ExpandVars(Str(e, "value"), seen));
        continue;
      }
      if (Obj(from, "fieldRef").is_object()) {
        set(name, FieldRefValue(pod, Str(from["fieldRef"], "fieldPath"), facts));
      } else if (Obj(from, "resourceFieldRef").is_object()) {
        set(name, ResourceFieldValue(container, from["resourceFieldRef"]));
      } else if (Obj(from, "configMapKeyRef").is_object()) {
        const json& ref = from["configMapKeyRef"];
        const std::string cm_name = Str(ref, "name");
        const std::string key = Str(ref, "key");
        const auto* data = config_map(cm_name, Optional(ref));
        if (data == nullptr) continue;
        auto it = data->find(key);
        if (it == data->end()) {
          if (Optional(ref)) continue;
          throw ConfigError("couldn't find key " + key + " in ConfigMap " + ns + "/" + cm_name);
        }
        set(name, it->second);
      } else if (Obj(from, "secretKeyRef").is_object()) {
        const json& ref = from["secretKeyRef"];
        const std::string s_name = Str(ref, "name");
        const std::string key = Str(ref, "key");
        const auto* data = secret(s_name, Optional(ref));
        if (data == nullptr) continue;
        auto it = data->find(key);
        if (it == data->end()) {
          if (Optional(ref)) continue;
          throw ConfigError("couldn't find key " + key + " in Secret " + ns + "/" + s_name);
        }
        set(name, it->second);
      }
    }
  }
  return out;
}

std::vector<std::string> ContainerArgv(const json& container,
                                       const std::map<std::string, std::string>& env) {
  std::vector<std::string> argv;
  for (const char* part : {"command", "args"}) {
    const json& list = Obj(container, part);
    if (!list.is_array()) continue;
    for (const auto& a : list) {
      if (a.is_string()) argv.push_back(ExpandVars(a.get<std::string>(), env));
    }
  }
  const json& command = Obj(container, "command");
  if (!command.is_array() || command.empty()) return {};
  return argv;
}

}  // namespace kubesim::node
