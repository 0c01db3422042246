// Typed Kubernetes API errors, built from the server's metav1.Status (or, for bodies that are not
// a Status, such as the plain-text 429 of API priority and fairness, from the HTTP status code),
// and the retry rules of client-go (rest/request.go, rest/with_retry.go). Every kube call reports
// failure by throwing ApiError; nothing in an ApiError ever contains a credential. Code outside
// kube/ never sees an ApiError: it makes its calls through Try, which gives the ToStatus Status.
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/common/status.h"
#include "starforge/common/status_or.h"

namespace starforge::kube {

enum class Reason {
  kUnknown,
  kTransport,  // no HTTP response: connection refused/reset, DNS, TLS, client-side timeout
  kBadRequest,
  kUnauthorized,
  kForbidden,
  kNotFound,
  kMethodNotAllowed,
  kNotAcceptable,
  kAlreadyExists,
  kConflict,
  kExpired,  // 410: reason "Expired" or the older "Gone"; the caller must relist
  kRequestEntityTooLarge,
  kUnsupportedMediaType,
  kInvalid,
  kTooManyRequests,
  kInternalError,
  kServerTimeout,  // 500 with reason ServerTimeout: the operation may be retried
  kServiceUnavailable,
  kTimeout,  // 504
};

// The Status reason spelling ("NotFound", ...); "Transport" and "Unknown" for the two extras.
std::string_view ToString(Reason reason);

// One entry of `details.causes` (e.g. a 422 Invalid's field errors).
struct StatusCause {
  std::string reason;   // e.g. "FieldValueInvalid"
  std::string message;  // e.g. "Invalid value: ..."
  std::string field;    // e.g. "metadata.name"
  friend bool operator==(const StatusCause&, const StatusCause&) = default;
};

class ApiError : public std::runtime_error {
 public:
  // `what()` is "<context>: <Reason> (<code>): <message>" (context omitted when empty).
  ApiError(Reason reason, int code, std::string message, std::string context = {});

  Reason reason() const { return reason_; }
  int code() const { return code_; }  // HTTP status; 0 for kTransport
  // The server's message, or a description of the failure when there was no Status.
  const std::string& message() const { return message_; }
  // The Status `reason` string as sent ("Gone" stays "Gone" although reason() is kExpired).
  const std::string& status_reason() const { return status_reason_; }
  const std::vector<StatusCause>& causes() const { return causes_; }
  // From the Retry-After header or details.retryAfterSeconds (the header wins).
  std::optional<std::chrono::seconds> retry_after() const { return retry_after_; }
  const nlohmann::json& details() const { return details_; }  // Status.details or null
  // True when the request provably reached no server (nothing was sent); see ShouldRetry.
  bool nothing_sent() const { return nothing_sent_; }

  // Builder-style setters used by the classifiers below and the transport.
  ApiError& set_status_reason(std::string r);
  ApiError& set_causes(std::vector<StatusCause> c);
  ApiError& set_retry_after(std::optional<std::chrono::seconds> s);
  ApiError& set_details(nlohmann::json d);
  ApiError& set_nothing_sent(bool v);

 private:
  Reason reason_;
  int code_;
  std::string message_;
  std::string status_reason_;
  std::vector<StatusCause> causes_;
  std::optional<std::chrono::seconds> retry_after_;
  nlohmann::json details_;
  bool nothing_sent_ = false;
};

inline bool IsNotFound(const ApiError& e) {
  return e.reason() == Reason::kNotFound;
}
inline bool IsAlreadyExists(const ApiError& e) {
  return e.reason() == Reason::kAlreadyExists;
}
inline bool IsConflict(const ApiError& e) {
  return e.reason() == Reason::kConflict;
}
inline bool IsExpired(const ApiError& e) {
  return e.reason() == Reason::kExpired;
}

// Classifies an HTTP error response. `body` may be a metav1.Status JSON, another JSON value, plain
// text or empty; `retry_after_header` is the raw Retry-After value ("" when absent; only the
// delta-seconds form is understood). `context` (e.g. "GET /api/v1/namespaces/x/pods/y") prefixes
// what(). A Status's `reason` wins over the HTTP code when both are known.
ApiError ErrorFromResponse(int http_status, std::string_view body,
                           std::string_view retry_after_header, std::string context = {});

// Converts a metav1.Status object (e.g. the object of a watch ERROR event) to an ApiError.
ApiError ErrorFromStatus(const nlohmann::json& status, std::string context = {});

// The reason kube-apiserver uses for an HTTP status code when the body says nothing.
Reason ReasonForCode(int http_status);

// Replaces every occurrence of `secret` in `text` with "***" (a no-op for an empty secret).
std::string Scrub(std::string text, std::string_view secret);

// Whether a failed request may be sent again, following client-go (docs/kube-client.md):
//  - 429: always, after Retry-After (default 1 s);
//  - 5xx carrying Retry-After, and 500 ServerTimeout: always (the server asked for it);
//  - other 500/502/503/504: only for idempotent reads (`idempotent` = GET);
//  - transport errors: when nothing was sent, always; otherwise only for idempotent reads;
//  - everything else (400, 401, 403, 404, 409, 410, 422 ...): never.
struct RetryDecision {
  bool retry = false;
  // The server-imposed wait, if any; otherwise the caller's jittered exponential backoff applies.
  std::optional<std::chrono::milliseconds> server_delay;
};
RetryDecision ShouldRetry(const ApiError& error, bool idempotent);

// The Status of a failed call, as StarForge outside kube/ sees it (after the client's own retries
// gave up):
//  - code() by kind: NotFound, AlreadyExists, Conflict -> kAborted, Forbidden ->
//    kPermissionDenied, Unauthorized -> kUnauthenticated, Expired -> kFailedPrecondition, 429 ->
//    kResourceExhausted, other 4xx -> kInvalidArgument, transport, ServerTimeout and 503 ->
//    kUnavailable, other 500 -> kInternal, 504 -> kDeadlineExceeded, else kUnknown;
//  - reason() the Reason's spelling ("NotFound", "Transport", ...: ReasonOf reads it back);
//  - message() "<Reason> (<HTTP code>): <the server's message>" (no code for a transport
//    error, no request line: callers say what they were doing);
//  - retryable() when a later attempt may pass: transport, 429, 5xx, Conflict.
Status ToStatus(const ApiError& error);

// The Reason of a Status made by ToStatus (kUnknown for any other).
Reason ReasonOf(const Status& status);

// Runs `call` (Client calls, which throw ApiError) and returns its value (ok for a call that
// returns nothing), or the ToStatus of the ApiError it threw: the one place where a Kubernetes
// failure becomes a Status. Other exceptions pass through.
template <typename F>
auto Try(F&& call) {
  using T = std::invoke_result_t<F>;
  if constexpr (std::is_void_v<T>) {
    try {
      std::forward<F>(call)();
      return Status();
    } catch (const ApiError& e) {
      return ToStatus(e);
    }
  } else {
    try {
      return StatusOr<T>(std::forward<F>(call)());
    } catch (const ApiError& e) {
      return StatusOr<T>(ToStatus(e));
    }
  }
}

}  // namespace starforge::kube
