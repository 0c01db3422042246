#include "starforge/api/routes.h"

#include "starforge/api/handlers.h"

namespace starforge::api {

const std::vector<Route>& Routes() {
  static const std::vector<Route> routes = {
      // upload_routes.cc (first: an Allow header lists POST before GET)
      {"POST", "/api/v1/jobs", CreateJob},
      {"POST", "/api/v1/uploads", CreateUpload},
      {"PUT", "/api/v1/uploads/{id}", PutUpload},
      {"GET", "/api/v1/capsules/{sha256}", GetCapsule},
      // job_routes.cc
      {"GET", "/api/v1/jobs", ListJobs},
      {"GET", "/api/v1/jobs/{id}", GetJob},
      {"POST", "/api/v1/jobs/{id}/cancel", CancelJob},
      {"GET", "/api/v1/jobs/{id}/events", JobEvents},
      {"GET", "/api/v1/jobs/{id}/capsule", JobCapsule},
      // log_routes.cc
      {"GET", "/api/v1/jobs/{id}/logs", JobLogs},
      {"GET", "/api/v1/jobs/{id}/artifacts", JobArtifacts},
      {"GET", "/api/v1/jobs/{id}/metrics", JobMetrics},
      // capacity_routes.cc
      {"GET", "/api/v1/capacity", Capacity},
      {"GET", "/api/v1/doctor", Doctor},
      // token_routes.cc
      {"GET", "/api/v1/whoami", Whoami},
      {"GET", "/api/v1/tokens", ListTokens},
      {"POST", "/api/v1/tokens", CreateToken},
      {"POST", "/api/v1/tokens/{id}/revoke", RevokeToken},
      // console_routes.cc
      {"POST", "/api/v1/console/login-codes", ConsoleLoginCode},
      {"POST", "/api/v1/console/login", ConsoleLogin, /*auth=*/false},
      // health_routes.cc
      {"GET", "/healthz", Healthz, /*auth=*/false},
      {"GET", "/readyz", Readyz, /*auth=*/false},
      {"GET", "/metrics", Metrics, /*auth=*/false},
      {"GET", "/api/v1/openapi.json", OpenApi, /*auth=*/false},
      // playground_routes.cc
      {"POST", "/api/v1/playgrounds", CreatePlayground},
      {"GET", "/api/v1/playgrounds", ListPlaygrounds},
      {"GET", "/api/v1/playgrounds/{id}", GetPlayground},
      {"DELETE", "/api/v1/playgrounds/{id}", DeletePlayground},
      {"POST", "/api/v1/playgrounds/{id}/extend", ExtendPlayground},
      {"GET", "/api/v1/playgrounds/{id}/logs", PlaygroundLogs},
      {"GET", "/api/v1/playgrounds/{id}/events", PlaygroundEvents},
      {"GET", "/api/v1/playgrounds/{id}/openai/v1/models", PlaygroundModels},
      {"POST", "/api/v1/playgrounds/{id}/openai/v1/chat/completions", PlaygroundChatCompletions},
      {"POST", "/api/v1/playgrounds/{id}/openai/v1/completions", PlaygroundCompletions},
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
