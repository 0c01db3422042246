// What every route handler of `forge serve` works with (routes.h maps routes to handlers): the
// server's shared state, the request being answered (Call), the checks of its parameters, the
// error a handler throws, and Server-Sent Event streams. Handlers live in one file per resource,
// src/api/*_routes.cc.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "starforge/api/front.h"
#include "starforge/api/login_codes.h"
#include "starforge/api/server.h"
#include "starforge/common/disk_budget.h"
#include "starforge/common/field_error.h"
#include "starforge/common/status.h"
#include "starforge/common/status_or.h"

namespace starforge::api {

using Clock = std::chrono::steady_clock;

// Bodies of POSTs other than a job submission are at most this long.
constexpr size_t kMaxSmallBody = 64 << 10;
// Room in a job submission's body beyond the code archive: the JobSpec part and the multipart
// framing.
constexpr int64_t kBodySlack = 2 << 20;

// A request that ends with an error answer ({"error", "message", "field"?, "errors"?}): thrown
// by handlers, answered by the server.
struct ApiError {
  ApiError(int s, std::string k, std::string m, std::string f = {}, FieldErrors e = {})
      : status(s),
        kind(std::move(k)),
        message(std::move(m)),
        field(std::move(f)),
        errors(std::move(e)) {}
  int status;
  std::string kind;
  std::string message;
  std::string field;
  FieldErrors errors;
};

// 400 bad_request about `field` (optional).
ApiError BadRequest(std::string message, std::string field = {});

// The answer to a failed Status: the only place a Status code becomes an HTTP status.
// kInvalidArgument 422 Invalid, kNotFound 404 NotFound, kAlreadyExists/kFailedPrecondition/
// kAborted 409 Conflict, kUnauthenticated 401 Unauthorized, kPermissionDenied 403 Forbidden,
// kResourceExhausted 429 TooManyRequests, kUnavailable/kDeadlineExceeded 503 Unavailable, else
// 500 Internal. The error name is the Status's reason when it has one (e.g. Rejected); its
// field and field errors go along.
ApiError ErrorFor(const Status& s);
// The value of `r`, or throws ErrorFor(r.status()).
template <typename T>
T ValueOrThrow(StatusOr<T> r) {
  if (!r.ok()) throw ErrorFor(r.status());
  return std::move(r).value();
}

// Open streams per user, bounded: each holds a connection (and a thread) while it lasts.
class StreamSlots {
 public:
  // Counts one more stream of `user`, or returns the number open when there are `max` already.
  std::optional<int> Take(const std::string& user, int max);
  void Release(const std::string& user);

 private:
  std::mutex mu_;
  std::map<std::string, int> open_;
};

// POST /api/v1/uploads sessions: a checked JobSpec waiting for its capsule (upload_routes.cc).
struct UploadSession {
  std::string owner;
  std::string spec;
  Clock::time_point expires;
};

// The state the handlers share: one per server.
struct ServerState {
  ServerState(ServerOptions o, store::Store& s, controller::Controller& c,
              std::map<std::string, fleet::Fleet*> f);

  ServerOptions options;
  store::Store& store;
  controller::Controller& controller;
  std::map<std::string, fleet::Fleet*> fleets;

  Front http;  // httplib's routing over an event-driven front (front.h)
  std::atomic<bool> stopping{false};
  std::mutex stop_mu;  // with stop_cv: streams wait on it between turns
  std::condition_variable stop_cv;
  std::filesystem::path uploads;  // <state dir>/uploads: code and capsules being received
  StreamSlots follows;            // log and metrics follows (max_follows_per_user)
  StreamSlots watches;            // ?watch=1 streams (max_watches_per_user)
  // Names this process in resourceVersions: another server's change numbers are not ours.
  const std::string epoch;
  // Disk space held by uploads (and the controller's packagings, when serve shares it): the
  // options' budget, or this server's own.
  std::unique_ptr<DiskBudget> own_budget;
  DiskBudget* upload_budget;
  LoginCodes login_codes;  // forge console --login

  std::mutex capacity_mu;
  nlohmann::json capacity_cache;  // the fleets' last capacity answers (capacity_mu)
  Clock::time_point capacity_read;

  std::mutex sessions_mu;
  std::map<std::string, UploadSession> sessions;  // by upload id (sessions_mu)
};

// One request being answered.
struct Call {
  ServerState& server;
  const httplib::Request& req;
  httplib::Response& res;
  const httplib::ContentReader* reader;  // routes with a body (POST, PUT, DELETE)
  store::User user;                      // the caller; empty on routes without auth
  bool body_read = false;                // else the server drains it after the answer
  std::string Path(size_t i = 1) const { return req.matches[i].str(); }  // the i-th {param}
};

// The answer `body` with `status`; a client's invalid UTF-8 echoed back is replaced, not thrown.
void SetJson(httplib::Response& res, int status, const nlohmann::json& body);
void SetError(httplib::Response& res, const ApiError& e);

// The query parameter `name`, "" when absent.
std::string Param(const Call& c, const char* name);
// Throws 400 for a query parameter not in `known`.
void OnlyParams(const Call& c, std::initializer_list<const char*> known);
// A flag: absent → false; "", "1", "true" → true; "0", "false" → false; else 400.
bool BoolParam(const Call& c, const char* name);
// A non-negative integer or nullopt when absent; else 400.
std::optional<int64_t> CountParam(const Call& c, const char* name);

// Reads and discards the body (up to `limit` bytes; more → false, the connection then closes).
bool Drain(Call& c, size_t limit);
// Drain for a route that takes no body: 413 when it has one over kMaxSmallBody.
void NoBody(Call& c);
// 413: an upload over the server's FORGE_CAPSULE_MAX_BYTES.
ApiError TooLarge(const ServerOptions& options);
// 403 unless the caller is an admin; `what` completes "only an admin may ".
void RequireAdmin(const Call& c, const char* what);

// The user the request's "Authorization: Bearer <token>" names, or 401.
store::User Authenticate(store::Store& store, const httplib::Request& req);
// Job `id` if it exists and the caller may see it; another user's job is as missing (404) as
// one that does not exist, so ids of others' jobs cannot be probed.
store::Job VisibleJob(const Call& c, const std::string& id);

// Answers with a Server-Sent Events stream while `poll` has events ("" for none now) and
// until `done`: `poll` is called again at once after news, else after sse_poll, with a
// keep-alive comment after sse_keepalive of silence. It ends when `done`, when the client goes,
// when the server stops, or when the token that opened it no longer authenticates (revoked,
// expired, admin rights taken). Each stream takes one of the caller's `slots` (at most `max`;
// beyond: 429 "<what N><rest>"), released when it ends.
struct StreamLimit {
  StreamSlots& slots;
  int max;
  const char* what;  // "you are following "
  const char* rest;  // " logs already, …"
};
void StreamEvents(Call& c, StreamLimit limit, std::function<std::string()> poll,
                  std::function<bool()> done);

// StreamEvents for a source with Poll() and done(), such as the watches of watch.h.
template <typename Source>
void StreamEvents(Call& c, StreamLimit limit, std::shared_ptr<Source> source) {
  StreamEvents(
      c, limit, [source] { return source->Poll(); }, [source] { return source->done(); });
}

// The limits of a log or metrics follow and of a watch.
StreamLimit FollowLimit(ServerState& s);
StreamLimit WatchLimit(ServerState& s);

}  // namespace starforge::api
