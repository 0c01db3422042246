// Classification of API error responses (apimachinery pkg/api/errors; docs/kube-client.md).
#include "starforge/kube/errors.h"

#include <array>
#include <cctype>
#include <charconv>
#include <utility>

#include <fmt/format.h>

namespace starforge::kube {
namespace {

struct ReasonName {
  Reason reason;
  std::string_view name;
};

constexpr std::array kReasonNames = {
    ReasonName{Reason::kUnknown, "Unknown"},
    ReasonName{Reason::kTransport, "Transport"},
    ReasonName{Reason::kBadRequest, "BadRequest"},
    ReasonName{Reason::kUnauthorized, "Unauthorized"},
    ReasonName{Reason::kForbidden, "Forbidden"},
    ReasonName{Reason::kNotFound, "NotFound"},
    ReasonName{Reason::kMethodNotAllowed, "MethodNotAllowed"},
    ReasonName{Reason::kNotAcceptable, "NotAcceptable"},
    ReasonName{Reason::kAlreadyExists, "AlreadyExists"},
    ReasonName{Reason::kConflict, "Conflict"},
    ReasonName{Reason::kExpired, "Expired"},
    ReasonName{Reason::kRequestEntityTooLarge, "RequestEntityTooLarge"},
    ReasonName{Reason::kUnsupportedMediaType, "UnsupportedMediaType"},
    ReasonName{Reason::kInvalid, "Invalid"},
    ReasonName{Reason::kTooManyRequests, "TooManyRequests"},
    ReasonName{Reason::kInternalError, "InternalError"},
    ReasonName{Reason::kServerTimeout, "ServerTimeout"},
    ReasonName{Reason::kServiceUnavailable, "ServiceUnavailable"},
    ReasonName{Reason::kTimeout, "Timeout"},
};

std::optional<Reason> ParseReason(std::string_view text) {
  if (text == "Gone") return Reason::kExpired;  // pre-1.x servers' spelling of 410
  for (const auto& r : kReasonNames) {
    if (r.name == text && r.reason != Reason::kTransport) return r.reason;
  }
  return std::nullopt;
}

// client-go's wording when a response carries no usable message (apimachinery errors.go
// NewGenericServerResponse), so users see the same text as with kubectl.
std::string GenericMessage(int code) {
  switch (code) {
    case 400:
      return "the server rejected our request for an unknown reason";
    case 401:
      return "the server has asked for the client to provide credentials";
    case 403:
      return "the server does not allow access to the requested resource";
    case 404:
      return "the server could not find the requested resource";
    case 405:
      return "the server does not allow this method on the requested resource";
    case 406:
      return "the server was unable to respond with a content type that the client supports";
    case 409:
      return "the server reported a conflict";
    case 410:
      return "the resource version is too old";
    case 413:
      return "the server has rejected the request because it is too large";
    case 415:
      return "the server was unable to handle the provided media type";
    case 422:
      return "the server rejected our request due to an error in our request";
    case 429:
      return "the server has received too many requests and has asked us to try again later";
    case 500:
      return "an error on the server has prevented the request from succeeding";
    case 503:
      return "the server is currently unable to handle the request";
    case 504:
      return "the server was unable to return a response in the time allotted";
    default:
      return fmt::format("the server responded with HTTP status {}", code);
  }
}

std::string Trim(std::string_view s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
    --e;
  return std::string(s.substr(b, e - b));
}

std::optional<std::chrono::seconds> ParseRetryAfter(std::string_view header) {
  std::string v = Trim(header);
  if (v.empty()) return std::nullopt;
  int64_t seconds = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
  if (ec != std::errc() || ptr != v.data() + v.size() || seconds < 0) return std::nullopt;
  return std::chrono::seconds(seconds);
}

bool IsStatusObject(const nlohmann::json& j) {
  return j.is_object() && j.value("kind", "") == "Status" && j.contains("status");
}

std::string StringField(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string_view ToString(Reason reason) {
  for (const auto& r : kReasonNames) {
    if (r.reason == reason) return r.name;
  }
  return "Unknown";
}

ApiError::ApiError(Reason reason, int code, std::string message, std::string context)
    : std::runtime_error(
          context.empty()
              ? fmt::format("{} ({}): {}", ToString(reason), code, message)
              : fmt::format("{}: {} ({}): {}", context, ToString(reason), code, message)),
      reason_(reason),
      code_(code),
      message_(std::move(message)),
      status_reason_(ToString(reason)) {}

ApiError& ApiError::set_status_reason(std::string r) {
  status_reason_ = std::move(r);
  return *this;
}
ApiError& ApiError::set_causes(std::vector<StatusCause> c) {
  causes_ = std::move(c);
  return *this;
}
ApiError& ApiError::set_retry_after(std::optional<std::chrono::seconds> s) {
  retry_after_ = s;
  return *this;
}
ApiError& ApiError::set_details(nlohmann::json d) {
  details_ = std::move(d);
  return *this;
}
ApiError& ApiError::set_nothing_sent(bool v) {
  nothing_sent_ = v;
  return *this;
}

Reason ReasonForCode(int code) {
  switch (code) {
    case 400:
      return Reason::kBadRequest;
    case 401:
      return Reason::kUnauthorized;
    case 403:
      return Reason::kForbidden;
    case 404:
      return Reason::kNotFound;
    case 405:
      return Reason::kMethodNotAllowed;
    case 406:
      return Reason::kNotAcceptable;
    case 409:
      return Reason::kConflict;
    case 410:
      return Reason::kExpired;
    case 413:
      return Reason::kRequestEntityTooLarge;
    case 415:
      return Reason::kUnsupportedMediaType;
    case 422:
      return Reason::kInvalid;
    case 429:
      return Reason::kTooManyRequests;
    case 500:
      return Reason::kInternalError;
    case 503:
      return Reason::kServiceUnavailable;
    case 504:
      return Reason::kTimeout;
    default:
      return Reason::kUnknown;
  }
}

ApiError ErrorFromStatus(const nlohmann::json& status, std::string context) {
  int code = 0;
  if (auto it = status.find("code"); it != status.end() && it->is_number_integer()) {
    code = it->get<int>();
  }
  std::string reason_text = StringField(status, "reason");
  Reason reason = ParseReason(reason_text).value_or(ReasonForCode(code));
  std::string message = StringField(status, "message");
  if (message.empty()) message = GenericMessage(code);
  std::vector<StatusCause> causes;
  nlohmann::json details;
  std::optional<std::chrono::seconds> retry_after;
  if (auto d = status.find("details"); d != status.end() && d->is_object()) {
    details = *d;
    if (auto c = d->find("causes"); c != d->end() && c->is_array()) {
      for (const auto& cause : *c) {
        if (!cause.is_object()) continue;
        causes.push_back({StringField(cause, "reason"), StringField(cause, "message"),
                          StringField(cause, "field")});
      }
    }
    if (auto r = d->find("retryAfterSeconds");
        r != d->end() && r->is_number_integer() && r->get<int64_t>() > 0) {
      retry_after = std::chrono::seconds(r->get<int64_t>());
    }
  }
  ApiError error(reason, code, std::move(message), std::move(context));
  if (!reason_text.empty()) error.set_status_reason(reason_text);
  error.set_causes(std::move(causes)).set_details(std::move(details)).set_retry_after(retry_after);
  return error;
}

ApiError ErrorFromResponse(int http_status, std::string_view body,
                           std::string_view retry_after_header, std::string context) {
  std::optional<std::chrono::seconds> header_delay = ParseRetryAfter(retry_after_header);
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (IsStatusObject(parsed)) {
    // The HTTP code is authoritative when the Status omits its own (it should not, but proxies
    // and hand-written servers do).
    if (!parsed.contains("code") || !parsed["code"].is_number_integer()) {
      parsed["code"] = http_status;
    }
    ApiError error = ErrorFromStatus(parsed, std::move(context));
    if (header_delay) error.set_retry_after(header_delay);
    return error;
  }
  // Not a Status: plain text (APF's 429), an HTML page from a proxy, or nothing at all. Keep a
  // bounded prefix of the text so a misbehaving proxy cannot flood logs.
  std::string text = Trim(body);
  constexpr size_t kMaxText = 512;
  if (text.size() > kMaxText) text = text.substr(0, kMaxText) + "...";
  std::string message = text.empty() ? GenericMessage(http_status) : text;
  ApiError error(ReasonForCode(http_status), http_status, std::move(message), std::move(context));
  error.set_retry_after(header_delay);
  return error;
}

std::string Scrub(std::string text, std::string_view secret) {
  if (secret.empty()) return text;
  size_t pos = 0;
  while ((pos = text.find(secret, pos)) != std::string::npos) {
    text.replace(pos, secret.size(), "***");
    pos += 3;
  }
  return text;
}

RetryDecision ShouldRetry(const ApiError& error, bool idempotent) {
  RetryDecision d;
  auto server_delay = [&]() -> std::optional<std::chrono::milliseconds> {
    if (!error.retry_after()) return std::nullopt;
    return std::chrono::duration_cast<std::chrono::milliseconds>(*error.retry_after());
  };
  const int code = error.code();
  if (error.reason() == Reason::kTransport) {
    d.retry = error.nothing_sent() || idempotent;
    return d;
  }
  if (code == 429) {
    d.retry = true;
    d.server_delay = server_delay().value_or(std::chrono::milliseconds(1000));
    return d;
  }
  if (code >= 500) {
    if (error.retry_after() || error.reason() == Reason::kServerTimeout) {
      d.retry = true;
      d.server_delay = server_delay();
      return d;
    }
    d.retry = idempotent && (code == 500 || code == 502 || code == 503 || code == 504);
    return d;
  }
  return d;
}

namespace {

Code CodeFor(Reason reason) {
  switch (reason) {
    case Reason::kNotFound:
      return Code::kNotFound;
    case Reason::kAlreadyExists:
      return Code::kAlreadyExists;
    case Reason::kConflict:
      return Code::kAborted;
    case Reason::kForbidden:
      return Code::kPermissionDenied;
    case Reason::kUnauthorized:
      return Code::kUnauthenticated;
    case Reason::kExpired:
      return Code::kFailedPrecondition;
    case Reason::kTooManyRequests:
      return Code::kResourceExhausted;
    case Reason::kBadRequest:
    case Reason::kMethodNotAllowed:
    case Reason::kNotAcceptable:
    case Reason::kRequestEntityTooLarge:
    case Reason::kUnsupportedMediaType:
    case Reason::kInvalid:
      return Code::kInvalidArgument;
    case Reason::kTransport:
    case Reason::kServerTimeout:
    case Reason::kServiceUnavailable:
      return Code::kUnavailable;
    case Reason::kInternalError:
      return Code::kInternal;
    case Reason::kTimeout:
      return Code::kDeadlineExceeded;
    case Reason::kUnknown:
      break;
  }
  return Code::kUnknown;
}

// Failures that go away by themselves (or by waiting).
bool Transient(const ApiError& e) {
  switch (e.reason()) {
    case Reason::kTransport:
    case Reason::kTooManyRequests:
    case Reason::kInternalError:
    case Reason::kServerTimeout:
    case Reason::kServiceUnavailable:
    case Reason::kTimeout:
    case Reason::kConflict:
      return true;
    default:
      return e.code() >= 500;
  }
}

}  // namespace

Status ToStatus(const ApiError& error) {
  const std::string_view reason = ToString(error.reason());
  std::string message = error.code() > 0
                            ? fmt::format("{} ({}): {}", reason, error.code(), error.message())
                            : fmt::format("{}: {}", reason, error.message());
  return Status(CodeFor(error.reason()), std::move(message))
      .WithReason(std::string(reason))
      .WithRetryable(Transient(error));
}

Reason ReasonOf(const Status& status) {
  if (status.ok()) return Reason::kUnknown;
  for (const auto& r : kReasonNames) {
    if (r.name == status.reason()) return r.reason;
  }
  return Reason::kUnknown;
}

}  // namespace starforge::kube
