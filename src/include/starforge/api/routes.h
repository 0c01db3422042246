// The routes `forge serve` answers and the OpenAPI document that describes them. The server
// registers exactly Routes(); a test checks that they and the document's paths are the same set.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace starforge::api {

enum class RouteId {
  kCreateJob,
  kListJobs,
  kGetJob,
  kCancelJob,
  kJobEvents,
  kJobLogs,
  kJobArtifacts,
  kJobMetrics,  // GET /api/v1/jobs/{id}/metrics: the scalars of <job dir>/metrics.jsonl
  kJobCapsule,
  kDoctor,
  kCapacity,
  kGetCapsule,
  kCreateUpload,  // POST /api/v1/uploads: the JobSpec of a job whose capsule follows
  kPutUpload,     // PUT /api/v1/uploads/{id}: that capsule, as a plain body
  kWhoami,
  kListTokens,
  kCreateToken,
  kRevokeToken,
  kConsoleLoginCode,
  kConsoleLogin,
  kOpenApi,
  kHealthz,
  kReadyz,
  kMetrics,
  // Playgrounds (playground_routes.h).
  kCreatePlayground,
  kListPlaygrounds,
  kGetPlayground,
  kDeletePlayground,
  kExtendPlayground,
  kPlaygroundLogs,
  kPlaygroundEvents,
  kPlaygroundModels,
  kPlaygroundChatCompletions,
  kPlaygroundCompletions,
};

struct RouteInfo {
  RouteId id;
  std::string method;  // "GET", "POST", "PUT", "DELETE"
  std::string path;    // OpenAPI template, e.g. "/api/v1/jobs/{id}"
  bool auth = true;    // needs a bearer token
};

const std::vector<RouteInfo>& Routes();

// The path template as a regular expression: each {param} matches one non-empty segment and is
// captured in order.
std::string PathRegex(std::string_view path_template);

// The OpenAPI 3.0 document (src/api/openapi.json, compiled in).
std::string_view OpenApiDocument();

}  // namespace starforge::api
