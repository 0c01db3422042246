#include "starforge/api/handler.h"

#include <strings.h>

#include <string_view>

#include "starforge/api/body.h"
#include "starforge/api/convert.h"
#include "starforge/capsule/capsule.h"
#include "starforge/common/api_errors.h"
#include "starforge/common/format.h"

namespace starforge::api {

namespace {

FrontOptions FrontOptionsOf(const ServerOptions& o) {
  FrontOptions f;
  f.max_connections = o.max_connections;
  f.max_connections_per_client = o.max_connections_per_client;
  f.max_workers = o.max_workers;
  f.head_timeout = std::chrono::seconds(o.head_timeout_s);
  f.read_timeout = std::chrono::seconds(o.read_timeout_s);
  return f;
}

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string s;
  for (const auto& i : items)
    s += (s.empty() ? "" : sep) + i;
  return s;
}

}  // namespace

ServerState::ServerState(ServerOptions o, store::Store& s, controller::Controller& c,
                         std::map<std::string, fleet::Fleet*> f)
    : options(std::move(o)),
      store(s),
      controller(c),
      fleets(std::move(f)),
      http(FrontOptionsOf(options)),
      uploads(options.state_dir / "uploads"),
      epoch(std::to_string(NowMs())),
      own_budget(
          options.disk_budget != nullptr
              ? nullptr
              : std::make_unique<DiskBudget>(
                    options.upload_space_bytes > 0
                        ? std::function<int64_t()>([n = options.upload_space_bytes] { return n; })
                        : DiskBudget::FreeSpaceOf(options.state_dir),
                    options.upload_keep_free_bytes)),
      upload_budget(options.disk_budget != nullptr ? options.disk_budget : own_budget.get()) {}

std::optional<int> StreamSlots::Take(const std::string& user, int max) {
  std::lock_guard<std::mutex> lock(mu_);
  int& n = open_[user];
  if (n >= max) return n;
  ++n;
  return std::nullopt;
}

void StreamSlots::Release(const std::string& user) {
  std::lock_guard<std::mutex> lock(mu_);
  if (--open_[user] <= 0) open_.erase(user);
}

ApiError BadRequest(std::string message, std::string field) {
  return {400, api_errors::kBadRequest, std::move(message), std::move(field), {}};
}

ApiError ErrorFor(const Status& s) {
  int status = 500;
  const char* kind = api_errors::kInternal;
  switch (s.code()) {
    case Code::kInvalidArgument:
      status = 422;
      kind = api_errors::kInvalid;
      break;
    case Code::kNotFound:
      status = 404;
      kind = api_errors::kNotFound;
      break;
    case Code::kAlreadyExists:
    case Code::kFailedPrecondition:
    case Code::kAborted:
      status = 409;
      kind = api_errors::kConflict;
      break;
    case Code::kUnauthenticated:
      status = 401;
      kind = api_errors::kUnauthorized;
      break;
    case Code::kPermissionDenied:
      status = 403;
      kind = api_errors::kForbidden;
      break;
    case Code::kResourceExhausted:
      status = 429;
      kind = api_errors::kTooManyRequests;
      break;
    case Code::kUnavailable:
    case Code::kDeadlineExceeded:
      status = 503;
      kind = api_errors::kUnavailable;
      break;
    case Code::kOk:
    case Code::kInternal:
    case Code::kUnknown:
      break;
  }
  return {status, s.reason().empty() ? kind : s.reason(), s.message(), s.field(), s.errors()};
}

void SetJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                  "application/json");
}

void SetError(httplib::Response& res, const ApiError& e) {
  if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  SetJson(res, e.status, ErrorJson(e.kind, e.message, e.field, e.errors));
}

std::string Param(const Call& c, const char* name) {
  return c.req.has_param(name) ? c.req.get_param_value(name) : std::string();
}

void OnlyParams(const Call& c, std::initializer_list<const char*> known) {
  for (const auto& [k, v] : c.req.params) {
    bool ok = false;
    for (const char* n : known)
      ok = ok || k == n;
    if (!ok) {
      std::vector<std::string> names(known.begin(), known.end());
      throw BadRequest("unknown query parameter \"" + k + "\"" +
                           (names.empty() ? std::string("; this route takes none")
                                          : "; known: " + Join(names, ", ")),
                       k);
    }
  }
}

bool BoolParam(const Call& c, const char* name) {
  if (!c.req.has_param(name)) return false;
  const std::string v = Param(c, name);
  if (v == "1" || v == "true" || v.empty()) return true;
  if (v == "0" || v == "false") return false;
  throw BadRequest(std::string(name) + " must be 1 or 0", name);
}

std::optional<int64_t> CountParam(const Call& c, const char* name) {
  if (!c.req.has_param(name)) return std::nullopt;
  auto v = ParseCount(Param(c, name));
  if (!v) throw BadRequest(std::string(name) + " must be a non-negative integer", name);
  return v;
}

bool Drain(Call& c, size_t limit) {
  c.body_read = true;
  if (!HasBody(c.req)) return true;
  const int status = c.res.status;
  size_t total = 0;
  auto count = [&total, limit](const char*, size_t n) {
    total += n;
    return total <= limit;
  };
  const bool ok = c.req.is_multipart_form_data()
                      ? (*c.reader)([](const httplib::MultipartFormData&) { return true; }, count)
                      : (*c.reader)(count);
  // When that fails after an answer was chosen, the answer stays (httplib would turn its status
  // into 413/400 under the body already set) and the connection is closed, since the rest of
  // the body is unread.
  if (!ok && status > 0 && !c.res.body.empty()) {
    c.res.status = status;
    c.res.set_header("Connection", "close");
  }
  return ok;
}

void NoBody(Call& c) {
  if (!Drain(c, kMaxSmallBody))
    throw ApiError{413, api_errors::kPayloadTooLarge, "this route takes no body", {}, {}};
}

ApiError TooLarge(const ServerOptions& options) {
  return {413, api_errors::kPayloadTooLarge,
          "the upload is larger than the " + capsule::FormatBytes(options.max_upload_bytes) +
              " this server accepts (FORGE_CAPSULE_MAX_BYTES): leave large data out of the code "
              "directory (.forgeignore) and read it from the storage root instead"};
}

void RequireAdmin(const Call& c, const char* what) {
  if (!c.user.admin)
    throw ApiError{403, api_errors::kForbidden, std::string("only an admin may ") + what};
}

store::User Authenticate(store::Store& store, const httplib::Request& req) {
  const std::string header = req.get_header_value("Authorization");
  if (header.empty())
    throw ApiError{401,
                   api_errors::kUnauthorized,
                   "missing bearer token: send \"Authorization: Bearer <token>\" (forge login, "
                   "or FORGE_TOKEN)",
                   {},
                   {}};
  constexpr std::string_view kScheme = "bearer ";
  std::string token;
  if (header.size() > kScheme.size() &&
      strncasecmp(header.c_str(), kScheme.data(), kScheme.size()) == 0) {
    token = header.substr(kScheme.size());
    while (!token.empty() && token.front() == ' ')
      token.erase(0, 1);
    while (!token.empty() && token.back() == ' ')
      token.pop_back();
  }
  if (token.empty())
    throw ApiError{401,
                   api_errors::kUnauthorized,
                   "the Authorization header must be \"Bearer <token>\"",
                   {},
                   {}};
  auto user = store.Authenticate(token);
  if (!user)
    throw ApiError{401,
                   api_errors::kUnauthorized,
                   "the token is not valid: check FORGE_TOKEN or run forge login again, or ask "
                   "an admin for a new one (forge token create)",
                   {},
                   {}};
  return *user;
}

store::Job VisibleJob(const Call& c, const std::string& id) {
  auto job = c.server.store.GetJob(id);
  if (!job || (!c.user.admin && job->owner != c.user.name))
    throw ApiError{404, api_errors::kNotFound, "job " + id + " not found", {}, {}};
  return *job;
}

StreamLimit FollowLimit(ServerState& s) {
  return {s.follows, s.options.max_follows_per_user, "you are following ",
          " logs or metrics already, the most one user may; close one (or read without "
          "follow=1) and retry"};
}

StreamLimit WatchLimit(ServerState& s) {
  return {s.watches, s.options.max_watches_per_user, "you are watching ",
          " times already, the most one user may; close a watch (a console tab) and retry"};
}

void StreamEvents(Call& c, StreamLimit limit, std::function<std::string()> poll,
                  std::function<bool()> done) {
  ServerState& s = c.server;
  if (std::optional<int> open = limit.slots.Take(c.user.name, limit.max)) {
    c.res.set_header("Retry-After", "5");
    throw ApiError{429, api_errors::kTooManyRequests,
                   limit.what + std::to_string(*open) + limit.rest};
  }
  struct State {
    std::function<std::string()> poll;
    std::function<bool()> done;
    std::string authorization;  // checked again as the stream goes on
    bool admin;
    Clock::time_point last_check = Clock::now();
    Clock::time_point last_write = Clock::now();
  };
  auto state = std::make_shared<State>(State{
      std::move(poll), std::move(done), c.req.get_header_value("Authorization"), c.user.admin});
  // A token revoked or expired (or admin rights taken away) while a stream is open ends it
  // within sse_keepalive, so revocation takes effect on streams too.
  auto still_allowed = [&s](State& st) {
    if (Clock::now() - st.last_check < s.options.sse_keepalive) return true;
    st.last_check = Clock::now();
    httplib::Request again;
    again.headers.emplace("Authorization", st.authorization);
    try {
      return Authenticate(s.store, again).admin || !st.admin;
    } catch (const ApiError&) {
      return false;
    }
  };
  c.res.set_header("Cache-Control", "no-cache");
  c.res.set_header("X-Accel-Buffering", "no");
  // Exactly "text/event-stream": httplib compresses other text types, which would hold events
  // back in the compressor.
  c.res.set_chunked_content_provider(
      "text/event-stream",
      [&s, state, still_allowed](size_t, httplib::DataSink& sink) {
        if (s.stopping) return false;
        if (!sink.is_writable()) return false;  // the client went away
        if (!still_allowed(*state)) return false;
        const std::string chunk = state->poll();
        if (!chunk.empty()) {
          state->last_write = Clock::now();
          if (!sink.write(chunk.data(), chunk.size())) return false;
        }
        if (state->done()) {
          sink.done();
          return true;
        }
        if (!chunk.empty()) return true;  // there may be more at once (a long log)
        if (Clock::now() - state->last_write >= s.options.sse_keepalive) {
          state->last_write = Clock::now();
          if (!sink.write(kSseKeepAlive.data(), kSseKeepAlive.size())) return false;
        }
        std::unique_lock lock(s.stop_mu);
        s.stop_cv.wait_for(lock, s.options.sse_poll, [&s] { return s.stopping.load(); });
        return !s.stopping;
      },
      [&slots = limit.slots, user = c.user.name](bool) { slots.Release(user); });
}

}  // namespace starforge::api
