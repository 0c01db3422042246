// REST addressing (apimachinery: /api/v1 for the core group, /apis/{group}/{version} else).
#include "starforge/kube/resource.h"

#include <fmt/format.h>

namespace starforge::kube {

std::string ResourceRef::Prefix() const {
  return group.empty() ? fmt::format("/api/{}", version)
                       : fmt::format("/apis/{}/{}", group, version);
}

std::string ResourceRef::CollectionPath(std::string_view ns) const {
  if (!namespaced || ns.empty()) return fmt::format("{}/{}", Prefix(), plural);
  return fmt::format("{}/namespaces/{}/{}", Prefix(), EncodePathSegment(ns), plural);
}

std::string ResourceRef::ObjectPath(std::string_view ns, std::string_view name,
                                    std::string_view subresource) const {
  std::string path =
      fmt::format("{}/{}", CollectionPath(namespaced ? ns : ""), EncodePathSegment(name));
  if (!subresource.empty()) path += fmt::format("/{}", subresource);
  return path;
}

std::string ResourceRef::Qualified() const {
  return group.empty() ? plural : fmt::format("{}.{}", plural, group);
}

std::string ResourceRef::ApiVersion() const {
  return group.empty() ? version : fmt::format("{}/{}", group, version);
}

namespace resources {
const ResourceRef kPods{"", "v1", "pods", true, "Pod"};
const ResourceRef kServices{"", "v1", "services", true, "Service"};
const ResourceRef kEvents{"", "v1", "events", true, "Event"};
const ResourceRef kEventsV1{"events.k8s.io", "v1", "events", true, "Event"};
const ResourceRef kNodes{"", "v1", "nodes", false, "Node"};
const ResourceRef kNamespaces{"", "v1", "namespaces", false, "Namespace"};
const ResourceRef kConfigMaps{"", "v1", "configmaps", true, "ConfigMap"};
const ResourceRef kSecrets{"", "v1", "secrets", true, "Secret"};
const ResourceRef kPersistentVolumeClaims{"", "v1", "persistentvolumeclaims", true,
                                          "PersistentVolumeClaim"};
const ResourceRef kJobs{"batch", "v1", "jobs", true, "Job"};
}  // namespace resources

namespace {
bool Unreserved(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}
}  // namespace

std::string UrlEncode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (Unreserved(c)) {
      out.push_back(c);
    } else {
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

std::string EncodeQuery(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [k, v] : params) {
    if (!out.empty()) out.push_back('&');
    out += UrlEncode(k);
    out.push_back('=');
    out += UrlEncode(v);
  }
  return out;
}

std::string EncodePathSegment(std::string_view segment) {
  // ':' stays literal: the proxy's "[scheme:]name[:port]" segment depends on it.
  std::string out;
  for (char c : segment) {
    if (Unreserved(c) || c == ':') {
      out.push_back(c);
    } else {
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

std::string ObjectKey(std::string_view ns, std::string_view name) {
  return ns.empty() ? std::string(name) : fmt::format("{}/{}", ns, name);
}

}  // namespace starforge::kube
