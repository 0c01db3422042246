#include "starforge/api/routes.h"

namespace starforge::api {

const std::vector<RouteInfo>& Routes() {
  static const std::vector<RouteInfo> routes = {
      {RouteId::kCreateJob, "POST", "/api/v1/jobs"},
      {RouteId::kListJobs, "GET", "/api/v1/jobs"},
      {RouteId::kGetJob, "GET", "/api/v1/jobs/{id}"},
      {RouteId::kCancelJob, "POST", "/api/v1/jobs/{id}/cancel"},
      {RouteId::kJobEvents, "GET", "/api/v1/jobs/{id}/events"},
      {RouteId::kJobLogs, "GET", "/api/v1/jobs/{id}/logs"},
      {RouteId::kJobArtifacts, "GET", "/api/v1/jobs/{id}/artifacts"},
      {RouteId::kJobMetrics, "GET", "/api/v1/jobs/{id}/metrics"},
      {RouteId::kJobCapsule, "GET", "/api/v1/jobs/{id}/capsule"},
      {RouteId::kDoctor, "GET", "/api/v1/doctor"},
      {RouteId::kCapacity, "GET", "/api/v1/capacity"},
      {RouteId::kGetCapsule, "GET", "/api/v1/capsules/{sha256}"},
      {RouteId::kCreateUpload, "POST", "/api/v1/uploads"},
      {RouteId::kPutUpload, "PUT", "/api/v1/uploads/{id}"},
      {RouteId::kWhoami, "GET", "/api/v1/whoami"},
      {RouteId::kListTokens, "GET", "/api/v1/tokens"},
      {RouteId::kCreateToken, "POST", "/api/v1/tokens"},
      {RouteId::kRevokeToken, "POST", "/api/v1/tokens/{id}/revoke"},
      {RouteId::kConsoleLoginCode, "POST", "/api/v1/console/login-codes"},
      {RouteId::kConsoleLogin, "POST", "/api/v1/console/login", false},
      {RouteId::kOpenApi, "GET", "/api/v1/openapi.json", false},
      {RouteId::kHealthz, "GET", "/healthz", false},
      {RouteId::kReadyz, "GET", "/readyz", false},
      {RouteId::kMetrics, "GET", "/metrics", false},
      {RouteId::kCreatePlayground, "POST", "/api/v1/playgrounds"},
      {RouteId::kListPlaygrounds, "GET", "/api/v1/playgrounds"},
      {RouteId::kGetPlayground, "GET", "/api/v1/playgrounds/{id}"},
      {RouteId::kDeletePlayground, "DELETE", "/api/v1/playgrounds/{id}"},
      {RouteId::kExtendPlayground, "POST", "/api/v1/playgrounds/{id}/extend"},
      {RouteId::kPlaygroundLogs, "GET", "/api/v1/playgrounds/{id}/logs"},
      {RouteId::kPlaygroundEvents, "GET", "/api/v1/playgrounds/{id}/events"},
      {RouteId::kPlaygroundModels, "GET", "/api/v1/playgrounds/{id}/openai/v1/models"},
      {RouteId::kPlaygroundChatCompletions, "POST",
       "/api/v1/playgrounds/{id}/openai/v1/chat/completions"},
      {RouteId::kPlaygroundCompletions, "POST", "/api/v1/playgrounds/{id}/openai/v1/completions"},
  };
  return routes;
}

std::string PathRegex(std::string_view path_template) {
  std::string re;
  for (size_t i = 0; i < path_template.size(); ++i) {
    const char c = path_template[i];
    if (c == '{') {
      const size_t close = path_template.find('}', i);
      re += "([^/]+)";
      i = close == std::string_view::npos ? path_template.size() : close;
    } else if (c == '.' || c == '+' || c == '*' || c == '?' || c == '(' || c == ')' || c == '[' ||
               c == ']' || c == '^' || c == '$' || c == '|' || c == '\\') {
      re += '\\';
      re += c;
    } else {
      re += c;
    }
  }
  return re;
}

}  // namespace starforge::api
