// Request bodies in Kubernetes' protobuf encoding (application/vnd.kubernetes.protobuf), as
// kube-apiserver accepts them: "k8s\0" + runtime.Unknown{typeMeta, raw} with raw the kind's
// message. kubectl and client-go's generated clients send built-in kinds this way and never fall
// back to JSON (docs/kubesim.md, "Differences found"), so kubesim decodes them into the JSON
// object the same request would have carried, for the kinds of k8s.proto (libprotobuf's
// reflection; the upstream schema files are named there).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kubesim {

inline constexpr const char* kProtobufMediaType = "application/vnd.kubernetes.protobuf";

// Whether a Content-Type header (parameters ignored) names the protobuf encoding.
bool IsProtobufContentType(const std::string& content_type);

// The object in `body` as JSON (apiVersion and kind from the envelope). `api_version` and `kind`
// are what the endpoint serves: the envelope must name that kind (or none). Throws ApiError: 400
// for a malformed envelope or message, or another kind; 415 UnsupportedMediaType for a kind
// without a message in k8s.proto or a field it lacks (naming what to send instead), never
// dropping data.
nlohmann::json DecodeProtobufBody(const std::string& body, const std::string& api_version,
                                  const std::string& kind);

}  // namespace kubesim
