#include "starforge/api/server.h"

#include <chrono>
#include <regex>
#include <vector>

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "starforge/api/console_assets.h"
#include "starforge/api/convert.h"
#include "starforge/api/handler.h"
#include "starforge/api/handlers.h"
#include "starforge/api/routes.h"
#include "starforge/common/api_errors.h"
#include "starforge/playground/manager.h"

namespace starforge::api {

namespace fs = std::filesystem;

namespace {

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string s;
  for (const auto& i : items)
    s += (s.empty() ? "" : sep) + i;
  return s;
}

Clock::time_point& RequestStart() {
  // One request is handled start to end on one thread of the pool.
  thread_local Clock::time_point start = Clock::now();
  return start;
}

}  // namespace

// Routing and everything around the handlers: authentication, errors, bodies left unread.
struct Server::Impl {
  ServerState state;
  bool started = false;

  struct CompiledRoute {
    const Route* route;
    std::regex re;
  };
  std::vector<CompiledRoute> routes;

  Impl(ServerOptions o, store::Store& s, controller::Controller& c,
       std::map<std::string, fleet::Fleet*> f)
      : state(std::move(o), s, c, std::move(f)) {
    for (const Route& r : Routes())
      routes.push_back({&r, std::regex(PathRegex(r.path))});
  }

  void Register() {
    Front& http = state.http;
    for (const Route& r : Routes()) {
      const Route* route = &r;
      const std::string pattern = PathRegex(r.path);
      if (r.method == "GET") {
        http.Get(pattern, [this, route](const httplib::Request& req, httplib::Response& res) {
          Run(*route, req, res, nullptr);
        });
      } else if (r.method == "PUT") {
        http.Put(pattern, [this, route](const httplib::Request& req, httplib::Response& res,
                                        const httplib::ContentReader& reader) {
          Run(*route, req, res, &reader);
        });
      } else if (r.method == "DELETE") {
        http.Delete(pattern, [this, route](const httplib::Request& req, httplib::Response& res,
                                           const httplib::ContentReader& reader) {
          Run(*route, req, res, &reader);
        });
      } else {
        // Every POST reads its own body, so that nothing unbounded is buffered in memory.
        http.Post(pattern, [this, route](const httplib::Request& req, httplib::Response& res,
                                         const httplib::ContentReader& reader) {
          Run(*route, req, res, &reader);
        });
      }
    }
    // Anything else: 404, or 405 when the path exists with another method. Bodies are read
    // (and dropped, within the small-body limit) so the connection stays in step.
    // GETs outside the API are the web console's (console_assets.cc).
    http.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      if (!ServeConsole(req, res)) NoRoute(req, res, nullptr);
    });
    http.Options(".*", [this](const httplib::Request& req, httplib::Response& res) {
      NoRoute(req, res, nullptr);
    });
    auto no_route = [this](const httplib::Request& req, httplib::Response& res,
                           const httplib::ContentReader& reader) { NoRoute(req, res, &reader); };
    http.Post(".*", no_route);
    http.Put(".*", no_route);
    http.Patch(".*", no_route);
    http.Delete(".*", no_route);
    http.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
      RequestStart() = Clock::now();
      return httplib::Server::HandlerResponse::Unhandled;
    });
    // Errors httplib answers itself (malformed requests, a body over the limit).
    http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request&,
                                                                       httplib::Response& res) {
      if (!res.body.empty() || res.content_provider_)
        return httplib::Server::HandlerResponse::Unhandled;
      switch (res.status) {
        case 413:
          SetError(res, TooLarge(state.options));
          break;
        case 414:
          SetError(res, {414, api_errors::kBadRequest, "the request URI is too long"});
          break;
        case 404:
          SetError(res, {404, api_errors::kNotFound, "not found"});
          break;
        default:
          SetError(res,
                   {res.status, res.status >= 500 ? api_errors::kInternal : api_errors::kBadRequest,
                    res.status >= 500 ? "internal error" : "malformed HTTP request"});
      }
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const httplib::Request& req, httplib::Response& res,
                                  const std::exception_ptr&) {
      spdlog::error("{} {}: unexpected exception", req.method, req.path);
      SetError(res, {500, api_errors::kInternal, "internal error; the server's log has details"});
    });
    http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - RequestStart());
      spdlog::info("{} {} {} {}ms", req.method, req.path, res.status, ms.count());
    });
  }

  void NoRoute(const httplib::Request& req, httplib::Response& res,
               const httplib::ContentReader* reader) {
    if (reader) {
      Call c{state, req, res, reader, {}, false};
      Drain(c, kMaxSmallBody);
    }
    std::vector<std::string> allowed;
    for (const CompiledRoute& r : routes) {
      if (std::regex_match(req.path, r.re)) allowed.push_back(r.route->method);
    }
    if (allowed.empty()) {
      SetError(res, {404,
                     api_errors::kNotFound,
                     "no such route: " + req.path + " (see /api/v1/openapi.json)",
                     {},
                     {}});
    } else {
      res.set_header("Allow", Join(allowed, ", "));
      SetError(res,
               {405,
                api_errors::kMethodNotAllowed,
                req.method + " is not allowed on " + req.path + "; use " + Join(allowed, " or "),
                {},
                {}});
    }
  }

  void Run(const Route& route, const httplib::Request& req, httplib::Response& res,
           const httplib::ContentReader* reader) {
    Call c{state, req, res, reader, {}, false};
    try {
      if (state.stopping) {
        res.set_header("Retry-After", "5");
        throw ApiError{503, api_errors::kUnavailable, "the server is shutting down", {}, {}};
      }
      if (route.auth) c.user = Authenticate(state.store, req);
      route.handler(c);
      return;
    } catch (const ApiError& e) {
      SetError(res, e);
    } catch (const std::exception& e) {
      // The log gets the detail; the client only learns that it was our fault.
      spdlog::error("{} {}: {}", req.method, req.path, e.what());
      SetError(res, {500, api_errors::kInternal, "internal error; the server's log has details"});
    } catch (...) {
      spdlog::error("{} {}: unexpected exception", req.method, req.path);
      SetError(res, {500, api_errors::kInternal, "internal error; the server's log has details"});
    }
    // An unread body would be taken for the next request on this connection.
    if (reader && !c.body_read) Drain(c, kMaxSmallBody);
  }
};

Server::Server(ServerOptions options, store::Store& store, controller::Controller& controller,
               std::map<std::string, fleet::Fleet*> fleets)
    : impl_(std::make_unique<Impl>(std::move(options), store, controller, std::move(fleets))) {}

Server::~Server() {
  Stop();
}

std::string Server::Start() {
  ServerState& s = impl_->state;
  auto addr = ParseListen(s.options.listen);
  if (!addr)
    return "cannot listen on \"" + s.options.listen +
           "\": expected HOST:PORT such as 127.0.0.1:8080";
  std::error_code ec;
  fs::create_directories(s.uploads, ec);
  if (ec) return "cannot create " + s.uploads.string() + ": " + ec.message();
  CleanUploads(s);

  impl_->Register();
  s.http.set_read_timeout(std::chrono::seconds(s.options.read_timeout_s));
  s.http.set_payload_max_length(static_cast<size_t>(s.options.max_upload_bytes + kBodySlack));
  if (std::string err = s.http.Bind(addr->host, addr->port); !err.empty())
    return "cannot listen on " + s.options.listen + ": " + err +
           " (another process may be using the port: choose another with FORGE_LISTEN or --listen)";
  s.http.Start();
  impl_->started = true;
  return "";
}

int Server::port() const {
  return impl_->state.http.port();
}

void Server::Stop() {
  if (!impl_->started) return;
  impl_->started = false;
  ServerState& s = impl_->state;
  {
    std::lock_guard lock(s.stop_mu);
    s.stopping = true;
  }
  s.stop_cv.notify_all();
  s.http.Shutdown();
}

}  // namespace starforge::api
