// The `error` names of the HTTP API's answers (docs/api.md), spelled once. They are API surface
// (the CLI and the console branch on them); kube-apiserver's Status reasons are their model.
// The playgrounds (playground/) answer through the same API, so this lives below both.
#pragma once

namespace starforge::api_errors {

inline constexpr const char* kBadRequest = "BadRequest";
inline constexpr const char* kUnauthorized = "Unauthorized";
inline constexpr const char* kForbidden = "Forbidden";
inline constexpr const char* kNotFound = "NotFound";
inline constexpr const char* kMethodNotAllowed = "MethodNotAllowed";
inline constexpr const char* kConflict = "Conflict";
inline constexpr const char* kPayloadTooLarge = "PayloadTooLarge";
inline constexpr const char* kUnsupportedMediaType = "UnsupportedMediaType";  // 415
inline constexpr const char* kInvalid = "Invalid";
inline constexpr const char* kTooManyRequests = "TooManyRequests";
inline constexpr const char* kInternal = "Internal";
inline constexpr const char* kBadGateway = "BadGateway";  // 502: a playground's server failed
inline constexpr const char* kUnavailable = "Unavailable";
inline constexpr const char* kInsufficientStorage = "InsufficientStorage";
inline constexpr const char* kCapsuleNotFound = "CapsuleNotFound";
inline constexpr const char* kExpired = "Expired";  // 410: a watch's resourceVersion is too old

}  // namespace starforge::api_errors
