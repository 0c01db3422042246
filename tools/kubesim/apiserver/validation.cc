#include "validation.h"

#include <regex>
#include <set>

#include "resources.h"

namespace kubesim {

using nlohmann::json;

namespace {

const std::regex kDns1123Label("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
const std::regex kDns1123Subdomain(
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
const std::regex kDns1035Label("[a-z]([-a-z0-9]*[a-z0-9])?");
const std::regex kQualifiedName("([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]");
const std::regex kLabelValue("(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?");

const char* kSubdomainMsg =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const char* kLabelMsg =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const char* kDns1035Msg =
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const char* kQualifiedMsg =
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const char* kLabelValueMsg =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

std::vector<std::string> CheckSubdomain(const std::string& v) {
  std::vector<std::string> out;
  if (v.size() > 253) out.push_back("must be no more than 253 characters");
  if (!std::regex_match(v, kDns1123Subdomain)) out.push_back(kSubdomainMsg);
  return out;
}
std::vector<std::string> CheckLabel(const std::string& v) {
  std::vector<std::string> out;
  if (v.size() > 63) out.push_back("must be no more than 63 characters");
  if (!std::regex_match(v, kDns1123Label)) out.push_back(kLabelMsg);
  return out;
}
std::vector<std::string> Check1035(const std::string& v) {
  std::vector<std::string> out;
  if (v.size() > 63) out.push_back("must be no more than 63 characters");
  if (!std::regex_match(v, kDns1035Label)) out.push_back(kDns1035Msg);
  return out;
}

// IsQualifiedName: [prefix/]name.
std::vector<std::string> CheckQualifiedName(const std::string& v) {
  std::vector<std::string> out;
  std::string name = v;
  auto slash = v.find('/');
  if (slash != std::string::npos) {
    std::string prefix = v.substr(0, slash);
    name = v.substr(slash + 1);
    if (prefix.empty()) {
      out.push_back("prefix part must be non-empty");
    } else {
      for (const auto& m : CheckSubdomain(prefix))
        out.push_back("prefix part " + m);
    }
    if (name.find('/') != std::string::npos) {
      out.push_back(
          "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
          "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
          "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') "
          "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
      return out;
    }
  }
  if (name.empty()) {
    out.push_back("name part must be non-empty");
  } else {
    if (name.size() > 63) out.push_back("name part must be no more than 63 characters");
    if (!std::regex_match(name, kQualifiedName)) out.push_back(kQualifiedMsg);
  }
  return out;
}

std::vector<std::string> NameCheck(const ResourceInfo& r, const std::string& name) {
  if (r.plural == "namespaces") return CheckLabel(name);
  if (r.plural == "services") return Check1035(name);
  return CheckSubdomain(name);
}

}  // namespace

std::vector<std::string> IsDns1123Subdomain(const std::string& v) {
  return CheckSubdomain(v);
}

FieldErrs ValidateMeta(const ResourceInfo& r, const json& obj, const json* old) {
  FieldErrs errs;
  const json& md =
      obj.contains("metadata") && obj["metadata"].is_object() ? obj["metadata"] : json::object();
  const std::string name = md.value("name", "");
  if (name.empty()) {
    errs.push_back(Required("metadata.name", "name or generateName is required"));
  } else {
    for (const auto& m : NameCheck(r, name))
      errs.push_back(Invalid("metadata.name", name, m));
  }
  const std::string ns = md.value("namespace", "");
  if (r.namespaced) {
    if (ns.empty()) {
      errs.push_back(Required("metadata.namespace", ""));
    } else {
      for (const auto& m : CheckLabel(ns))
        errs.push_back(Invalid("metadata.namespace", ns, m));
    }
  } else if (!ns.empty()) {
    errs.push_back(Forbidden("metadata.namespace", "not allowed on this type"));
  }
  if (md.contains("labels") && md["labels"].is_object()) {
    for (const auto& [k, v] : md["labels"].items()) {
      for (const auto& m : CheckQualifiedName(k))
        errs.push_back(Invalid("metadata.labels", k, m));
      const std::string val = v.is_string() ? v.get<std::string>() : v.dump();
      if (val.size() > 63)
        errs.push_back(Invalid("metadata.labels", val, "must be no more than 63 characters"));
      if (!std::regex_match(val, kLabelValue))
        errs.push_back(Invalid("metadata.labels", val, kLabelValueMsg));
    }
  }
  if (md.contains("annotations") && md["annotations"].is_object()) {
    size_t total = 0;
    for (const auto& [k, v] : md["annotations"].items()) {
      std::string lower = k;
      for (char& c : lower)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      for (const auto& m : CheckQualifiedName(lower)) {
        errs.push_back(Invalid("metadata.annotations", k, m));
      }
      total += k.size() + (v.is_string() ? v.get<std::string>().size() : v.dump().size());
    }
    if (total > 262144) {
      FieldErr fe{"FieldValueTooLong", "metadata.annotations", "must have at most 262144 bytes",
                  json(), false};
      errs.push_back(fe);
    }
  }
  if (md.contains("finalizers") && md["finalizers"].is_array()) {
    bool orphan = false;
    bool foreground = false;
    for (size_t i = 0; i < md["finalizers"].size(); ++i) {
      const json& f = md["finalizers"][i];
      const std::string fs = f.is_string() ? f.get<std::string>() : f.dump();
      const std::string path = "metadata.finalizers[" + std::to_string(i) + "]";
      orphan |= fs == "orphan";
      foreground |= fs == "foregroundDeletion";
      if (fs != "orphan" && fs != "foregroundDeletion") {
        for (const auto& m : CheckQualifiedName(fs))
          errs.push_back(Invalid(path, fs, m));
        if (fs.find('/') == std::string::npos && r.crd == nullptr && fs != "kubernetes") {
          // Built-in kinds accept only standard or domain-qualified finalizers (a warning for
          // CRs); keep it permissive: no error.
        }
      }
    }
    if (orphan && foreground) {
      errs.push_back(Invalid("metadata.finalizers", md["finalizers"],
                             "finalizer orphan and foregroundDeletion cannot be both set"));
    }
    if (old != nullptr && (*old)["metadata"].contains("deletionTimestamp")) {
      const json& before = (*old)["metadata"].value("finalizers", json::array());
      for (const auto& f : md["finalizers"]) {
        if (std::find(before.begin(), before.end(), f) == before.end()) {
          errs.push_back(Forbidden("metadata.finalizers",
                                   "no new finalizers can be added if the object is being deleted, "
                                   "found new finalizers [" +
                                       f.get<std::string>() + "]"));
        }
      }
    }
  }
  if (md.contains("ownerReferences") && md["ownerReferences"].is_array()) {
    int controllers = 0;
    for (size_t i = 0; i < md["ownerReferences"].size(); ++i) {
      const json& o = md["ownerReferences"][i];
      const std::string p = "metadata.ownerReferences[" + std::to_string(i) + "]";
      for (const char* f : {"apiVersion", "kind", "name", "uid"}) {
        if (!o.is_object() || o.value(f, "").empty()) {
          if (std::string(f) == "uid") {
            errs.push_back(Invalid(p + ".uid", "", "uid must not be empty"));
          } else {
            errs.push_back(Invalid(p + "." + f, "", std::string(f) + " must not be empty"));
          }
        }
      }
      if (o.is_object() && o.value("controller", false)) ++controllers;
    }
    if (controllers > 1) {
      errs.push_back(Invalid("metadata.ownerReferences", md["ownerReferences"],
                             "Only one reference can have Controller set to true"));
    }
  }
  if (old != nullptr) {
    const json& om = (*old)["metadata"];
    if (md.value("uid", om.value("uid", "")) != om.value("uid", "")) {
      errs.push_back(Invalid("metadata.uid", md["uid"], "field is immutable"));
    }
  }
  return errs;
}

namespace {

const std::set<std::string> kObjectMetaFields = {"name",
                                                 "generateName",
                                                 "namespace",
                                                 "selfLink",
                                                 "uid",
                                                 "resourceVersion",
                                                 "generation",
                                                 "creationTimestamp",
                                                 "deletionTimestamp",
                                                 "deletionGracePeriodSeconds",
                                                 "labels",
                                                 "annotations",
                                                 "ownerReferences",
                                                 "finalizers",
                                                 "managedFields"};

void Prune(const json& schema, json& v, const std::string& path, std::vector<std::string>& out) {
  if (!schema.is_object() || schema.value("x-kubernetes-preserve-unknown-fields", false)) return;
  if (v.is_object()) {
    const json* props = schema.contains("properties") ? &schema["properties"] : nullptr;
    const json* ap =
        schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
    for (auto it = v.begin(); it != v.end();) {
      const std::string child = path.empty() ? it.key() : path + "." + it.key();
      if (props != nullptr && props->contains(it.key())) {
        Prune((*props)[it.key()], *it, child, out);
        ++it;
      } else if (ap != nullptr && ap->is_object()) {
        Prune(*ap, *it, child, out);
        ++it;
      } else if (ap != nullptr && ap->is_boolean() && ap->get<bool>()) {
        ++it;
      } else {
        out.push_back(child);
        it = v.erase(it);
      }
    }
  } else if (v.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < v.size(); ++i) {
      Prune(schema["items"], v[i], path + "[" + std::to_string(i) + "]", out);
    }
  }
}

void Default(const json& schema, json& v) {
  if (!schema.is_object()) return;
  if (v.is_object()) {
    if (schema.contains("properties")) {
      for (const auto& [k, sub] : schema["properties"].items()) {
        if (!v.contains(k) && sub.is_object() && sub.contains("default")) v[k] = sub["default"];
      }
      for (auto& [k, child] : v.items()) {
        if (schema["properties"].contains(k)) Default(schema["properties"][k], child);
      }
    } else if (schema.contains("additionalProperties") &&
               schema["additionalProperties"].is_object()) {
      for (auto& [k, child] : v.items())
        Default(schema["additionalProperties"], child);
    }
  } else if (v.is_array() && schema.contains("items")) {
    for (auto& item : v)
      Default(schema["items"], item);
  }
}

// The CEL rules of the KubeRay CRDs that matter, recognised by their rule text.
void CheckCel(const json& schema, const json& v, const json* old, const std::string& path,
              FieldErrs& out) {
  if (!schema.is_object()) return;
  if (schema.contains("x-kubernetes-validations") &&
      schema["x-kubernetes-validations"].is_array()) {
    for (const auto& rule : schema["x-kubernetes-validations"]) {
      const std::string r = rule.value("rule", "");
      const std::string msg = rule.value("message", r);
      bool ok = true;
      auto has = [&](const char* f) { return v.is_object() && v.contains(f); };
      if (r == "!((has(self.onSuccess) || has(self.onFailure)) && has(self.deletionRules))") {
        ok = !((has("onSuccess") || has("onFailure")) && has("deletionRules"));
      } else if (r == "((has(self.onSuccess) && has(self.onFailure)) || has(self.deletionRules))") {
        ok = (has("onSuccess") && has("onFailure")) || has("deletionRules");
      } else if (r == "!(has(self.jobStatus) && has(self.jobDeploymentStatus))") {
        ok = !(has("jobStatus") && has("jobDeploymentStatus"));
      } else if (r == "has(self.jobStatus) || has(self.jobDeploymentStatus)") {
        ok = has("jobStatus") || has("jobDeploymentStatus");
      } else if (r == "self == oldSelf") {
        ok = old == nullptr || *old == v;
      } else if (r.rfind("self in [", 0) == 0) {
        std::string list = r.substr(9, r.size() - 10);
        ok = v.is_string() && list.find("'" + v.get<std::string>() + "'") != std::string::npos;
      }
      if (!ok) {
        json shown = v.is_object() ? json("object") : (v.is_array() ? json("array") : v);
        out.push_back(Invalid(path, shown, msg));
      }
    }
  }
  if (v.is_object() && schema.contains("properties")) {
    for (const auto& [k, child] : v.items()) {
      if (!schema["properties"].contains(k)) continue;
      const json* oc =
          old != nullptr && old->is_object() && old->contains(k) ? &(*old)[k] : nullptr;
      CheckCel(schema["properties"][k], child, oc, path.empty() ? k : path + "." + k, out);
    }
  } else if (v.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < v.size(); ++i) {
      CheckCel(schema["items"], v[i], nullptr, path + "[" + std::to_string(i) + "]", out);
    }
  }
}

}  // namespace

std::vector<std::string> PruneUnknown(const json& schema, json& obj) {
  std::vector<std::string> out;
  if (!obj.is_object()) return out;
  for (auto it = obj.begin(); it != obj.end();) {
    const std::string& k = it.key();
    if (k == "apiVersion" || k == "kind") {
      ++it;
    } else if (k == "metadata") {
      if (it->is_object()) {
        for (auto m = it->begin(); m != it->end();) {
          if (kObjectMetaFields.count(m.key()) == 0) {
            out.push_back("metadata." + m.key());
            m = it->erase(m);
          } else {
            ++m;
          }
        }
      }
      ++it;
    } else if (schema.contains("properties") && schema["properties"].contains(k)) {
      Prune(schema["properties"][k], *it, k, out);
      ++it;
    } else {
      out.push_back(k);
      it = obj.erase(it);
    }
  }
  return out;
}

void ApplyDefaults(const json& schema, json& obj) {
  if (!obj.is_object() || !schema.contains("properties")) return;
  for (const auto& [k, sub] : schema["properties"].items()) {
    if (k == "metadata" || k == "apiVersion" || k == "kind") continue;
    if (!obj.contains(k) && sub.is_object() && sub.contains("default")) obj[k] = sub["default"];
    if (obj.contains(k)) Default(sub, obj[k]);
  }
}

FieldErrs ValidateCustom(const ResourceInfo& r, const json& obj, const json* old) {
  FieldErrs out;
  if (r.crd == nullptr) return out;
  static const std::regex kTypeMsg("^expected (\\w+), got (\\w+).*");
  for (const auto& fe : r.crd->validator->Validate(obj)) {
    const std::string path = fe.path.empty() ? "<root>" : fe.path;
    std::smatch m;
    if (std::regex_match(fe.message, m, kTypeMsg)) {
      // kube-openapi's wording: `spec.x: Invalid value: "integer": spec.x in body must be of
      // type string: "integer"`.
      const std::string got = m[2].str();
      out.push_back(Invalid(path, got,
                            path + " in body must be of type " + m[1].str() + ": \"" + got + "\""));
      continue;
    }
    // CrdValidator's messages are complete sentences; keep them as the detail.
    out.push_back(FieldErr{"FieldValueInvalid", path, fe.message, json(), false});
  }
  CheckCel(r.crd->openapi, obj, old, "", out);
  return out;
}

}  // namespace kubesim
