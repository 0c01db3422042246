// How a kind of object is addressed over REST (apimachinery's group/version/resource paths), and
// the URL pieces built from it.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace starforge::kube {

struct ResourceRef {
  std::string group;    // "" = the core group (/api/v1)
  std::string version;  // "v1"
  std::string plural;   // "pods"
  bool namespaced = true;
  std::string kind;  // "Pod": used for messages and for the SelfSubjectAccessReview

  // "/api/v1" or "/apis/{group}/{version}".
  std::string Prefix() const;
  // The collection: ".../namespaces/{ns}/{plural}" or, for "" or cluster-scoped, ".../{plural}".
  std::string CollectionPath(std::string_view ns) const;
  // One object, optionally a subresource: ".../{plural}/{name}[/{sub}]".
  std::string ObjectPath(std::string_view ns, std::string_view name,
                         std::string_view subresource = {}) const;
  // "pods", "rayjobs.ray.io": the qualified resource, as the server's messages spell it.
  std::string Qualified() const;
  // "v1", "ray.io/v1": the apiVersion of objects of this resource.
  std::string ApiVersion() const;
};

// The built-in resources StarForge uses (KubeRay's are in kuberay/resources.h).
namespace resources {
extern const ResourceRef kPods;
extern const ResourceRef kServices;
extern const ResourceRef kEvents;    // core/v1
extern const ResourceRef kEventsV1;  // events.k8s.io/v1
extern const ResourceRef kNodes;
extern const ResourceRef kNamespaces;
extern const ResourceRef kConfigMaps;
extern const ResourceRef kSecrets;
extern const ResourceRef kPersistentVolumeClaims;
extern const ResourceRef kJobs;  // batch/v1
}  // namespace resources

// Percent-encodes everything but RFC 3986 unreserved characters (so '/', '=', ',' are encoded).
std::string UrlEncode(std::string_view text);
// "a=1&b=x%3Dy": each key and value encoded; pairs with an empty value are kept ("k=").
std::string EncodeQuery(const std::vector<std::pair<std::string, std::string>>& params);
// Percent-encodes a path segment (a name); names are DNS labels, but a caller's typo must not
// change the path's shape.
std::string EncodePathSegment(std::string_view segment);

// "namespace/name", or "name" for cluster-scoped objects: the cache key of an object.
std::string ObjectKey(std::string_view ns, std::string_view name);

}  // namespace starforge::kube
