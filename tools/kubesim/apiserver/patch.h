// PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and a strategic merge patch
// that covers what kubectl sends for built-in kinds (lists merged by their patch merge key,
// `$patch: delete|replace`, `$setElementOrder/…`, `$deleteFromPrimitiveList/…`, `$retainKeys`).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kubesim {

nlohmann::json MergePatch(const nlohmann::json& target, const nlohmann::json& patch);
// Throws ApiError 422 when an operation fails (e.g. a `test` op or a missing path).
nlohmann::json JsonPatch(const nlohmann::json& target, const nlohmann::json& patch);
nlohmann::json StrategicMergePatch(const nlohmann::json& target, const nlohmann::json& patch);

}  // namespace kubesim
