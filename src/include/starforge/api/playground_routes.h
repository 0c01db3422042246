// The playground routes of `forge serve` (docs/api.md "Playgrounds"): start, list, get, stop,
// extend, logs, events, and the OpenAI-compatible paths forwarded to the model server through
// the Kubernetes API proxy. The server authenticates and dispatches; these handlers throw
// playground::Error for every refusal.
#pragma once

#include <atomic>

#include <httplib.h>

#include "starforge/api/routes.h"
#include "starforge/playground/manager.h"
#include "starforge/store/store.h"

namespace starforge::api {

// Whether `id` is one of the playground routes.
bool IsPlaygroundRoute(RouteId id);

// Answers one playground route. `reader` reads the body (POST/DELETE); `stopping` ends streamed
// answers when the server stops.
void HandlePlaygroundRoute(RouteId id, playground::Manager& manager, const store::User& user,
                           const httplib::Request& req, httplib::Response& res,
                           const httplib::ContentReader* reader, const std::atomic<bool>& stopping);

}  // namespace starforge::api
