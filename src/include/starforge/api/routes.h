// The routes `forge serve` answers: one table (routes.cc) of method, path, handler and whether a
// token is needed. The server registers exactly this table and dispatches through it; a test
// checks it against the OpenAPI document (src/api/openapi.json) both ways. A new route is one
// entry here, its handler in the resource's src/api/<resource>_routes.cc, and its description in
// openapi.json.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace starforge::api {

struct Call;  // handler.h

using Handler = void (*)(Call&);

struct Route {
  std::string method;  // "GET", "POST", "PUT", "DELETE"
  std::string path;    // OpenAPI template, e.g. "/api/v1/jobs/{id}"
  Handler handler;
  bool auth = true;  // needs a bearer token
};

// Every route, each (method, path) once.
const std::vector<Route>& Routes();

// The path template as a regular expression: each {param} matches one non-empty segment and is
// captured in order.
std::string PathRegex(std::string_view path_template);

// The OpenAPI 3.0 document (src/api/openapi.json, compiled in).
std::string_view OpenApiDocument();

}  // namespace starforge::api
