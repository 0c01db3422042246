// Discovery documents kubectl 1.32 needs: /version, legacy /api, /apis, /api/v1, /apis/g/v,
// aggregated discovery v2 (when the Accept header asks for it), and an OpenAPI v3 stub whose
// per-group-version documents declare, for every kind, a PATCH operation with
// x-kubernetes-group-version-kind and the fieldValidation parameter (so kubectl leaves
// validation to the server). /openapi/v2 is deliberately absent (404).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "resources.h"

namespace kubesim {

inline constexpr const char* kAggregatedContentType =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

nlohmann::json VersionDoc();
// True when an Accept header lists the aggregated discovery v2 media type.
bool WantsAggregated(const std::string& accept);
nlohmann::json LegacyApi();
nlohmann::json LegacyApis(const Registry& reg);
// Null when the group/version is not served.
nlohmann::json ResourceList(const Registry& reg, const std::string& group,
                            const std::string& version);
// core = true: the /api document (group ""), else /apis (all named groups).
nlohmann::json Aggregated(const Registry& reg, bool core);
nlohmann::json OpenApiIndex(const Registry& reg);
// Null when the group/version is not served. `path` is "api/v1" or "apis/<g>/<v>".
nlohmann::json OpenApiDoc(const Registry& reg, const std::string& path);

}  // namespace kubesim
