// The `forge` side of the REST API (docs/cli.md): a client (net/http.h) with bearer auth, JSON in
// and out, multipart upload with progress, and Server-Sent Events with resume. Every failure
// becomes an ApiError whose text tells the user what to do; the token never appears in any of it.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/net/http.h"

namespace starforge::cli {

// Exit codes of the client commands, beside kExitOk (0), kExitInvalid (1: a job failed, or the
// API refused the request) and kExitUsage (2) of forge.h.
inline constexpr int kExitCancelled = 2;    // `submit --follow`: the job was cancelled
inline constexpr int kExitNotFound = 4;     // no such job (or not yours)
inline constexpr int kExitUnreachable = 5;  // no server, or it refused the token

struct ApiError {
  enum class Kind {
    kNone,
    kUnreachable,   // no TCP connection / DNS / TLS / timeout
    kUnauthorized,  // 401: no token, or the server rejected it
    kNotFound,      // 404
    kApi,           // any other non-2xx answer with the server's message
    kProtocol,      // a 2xx answer that is not what the contract says
  };
  Kind kind = Kind::kNone;
  int status = 0;       // HTTP status (0 when no answer)
  std::string error;    // the body's "error" (CamelCase kind), when any
  std::string message;  // one line for people, without the "forge: " prefix
  std::vector<std::pair<std::string, std::string>> details;  // (field, message)

  bool ok() const { return kind == Kind::kNone; }
  int ExitCode() const;
  // "forge: <message>\n" then "  <field>: <message>\n" per detail.
  std::string ToString() const;
};

// The ApiError for a non-2xx answer: the contract's {"error","message","field"?,"errors"?} body,
// or (for anything else, e.g. a proxy's HTML page) the status line and the body's first line.
// `server` names the server in 401 messages; `had_token` says whether a token was sent.
ApiError ErrorFromResponse(int status, std::string_view body, const std::string& server,
                           bool had_token);

// One Server-Sent Event (https://html.spec.whatwg.org/multipage/server-sent-events.html).
struct SseEvent {
  std::string id;  // the last event id in effect (persists across events)
  std::string event = "message";
  std::string data;  // data lines joined by '\n'
};

// Incremental SSE parser: bytes may be split anywhere (inside a line, between \r and \n).
class SseParser {
 public:
  // Consumes `bytes` and calls `on_event` for each complete event, in order.
  void Feed(std::string_view bytes, const std::function<void(const SseEvent&)>& on_event);
  // The `id:` of the last dispatched event ("" before any): what to send as Last-Event-ID.
  const std::string& last_event_id() const { return last_id_; }
  // Forgets a partly received event (after a dropped connection); keeps last_event_id().
  void Reset();

 private:
  void Line(std::string_view line, const std::function<void(const SseEvent&)>& on_event);

  std::string line_;
  bool after_cr_ = false;
  std::string data_;
  bool has_data_ = false;
  std::string event_;
  std::string id_;       // the id field of the event being parsed
  std::string last_id_;  // of the last dispatched event
};

// A part of a multipart/form-data body: inline `data`, or the contents of `file`.
using FormPart = net::FormPart;

// Called as bytes go out: (sent, total).
using UploadProgress = std::function<void(uint64_t sent, uint64_t total)>;

struct StreamOptions {
  // A stream that drops is reopened with Last-Event-ID after `retry_delay` (doubling up to
  // `max_retry_delay`); after this many consecutive failed attempts to reopen it, Stream gives
  // up with kUnreachable. (A stream that cannot be opened in the first place fails at once.)
  int max_reconnects = 10;
  std::chrono::milliseconds retry_delay{500};
  std::chrono::milliseconds max_retry_delay{5000};
  // No bytes (not even the server's 15 s heartbeat) for this long: the stream is dead; reopen.
  std::chrono::seconds idle_timeout{45};
  // Told when the stream breaks, once per outage, before the first attempt to reopen it.
  std::function<void(const ApiError& why)> on_reconnect;
};

class ApiClient {
 public:
  // `server`: "http(s)://host:port" (NormalizeServer'd); `token`: "" = send none.
  ApiClient(std::string server, std::string token);

  const std::string& server() const { return server_; }

  struct Request;  // one HTTP exchange (api_client.cc)

  // GET server+path (path with its query) expecting JSON.
  ApiError GetJson(const std::string& path, nlohmann::json* out);
  // GET expecting text (any content type).
  ApiError GetText(const std::string& path, std::string* out);
  // POST a JSON body (null = empty body) expecting JSON; `*status` gets the 2xx status.
  ApiError PostJson(const std::string& path, const nlohmann::json& body, nlohmann::json* out,
                    int* status = nullptr);
  // POST multipart/form-data expecting JSON.
  ApiError PostForm(const std::string& path, const std::vector<FormPart>& parts,
                    const UploadProgress& progress, nlohmann::json* out, int* status = nullptr);
  // POST `text` as a body of `content_type` expecting JSON.
  ApiError PostText(const std::string& path, const std::string& content_type,
                    const std::string& text, nlohmann::json* out);
  // PUT a body of `content_type` expecting JSON: the file `file`, or (file empty) the bytes
  // `reader` produces, sent chunked (their length is not known in advance).
  ApiError PutBody(const std::string& path, const std::string& content_type,
                   const std::filesystem::path& file, net::BodyReader reader,
                   const UploadProgress& progress, nlohmann::json* out);
  // DELETE expecting JSON.
  ApiError DeleteJson(const std::string& path, nlohmann::json* out);
  // POST a JSON body and hand the events of the event-stream answer to `on_event` until the
  // stream ends or `on_event` returns false. Never reopened (a POST is not repeated).
  ApiError PostStream(const std::string& path, const nlohmann::json& body,
                      const std::function<bool(const SseEvent&)>& on_event);
  // GET an event stream and hand each event to `on_event` until it returns false (→ ok) or
  // the server refuses (→ that error). A dropped stream is reopened with Last-Event-ID =
  // `*last_event_id` (updated as events arrive; "" = from the start).
  ApiError Stream(const std::string& path, std::string* last_event_id,
                  const std::function<bool(const SseEvent&)>& on_event,
                  const StreamOptions& options = {});

 private:
  ApiError Perform(Request& request);
  std::string Scrub(std::string text) const;

  std::string server_;
  std::string token_;
  std::shared_ptr<net::Transport> transport_;  // shared by copies of the client
};

// Percent-encodes a query value or path segment.
std::string UrlEncode(std::string_view text);

}  // namespace starforge::cli
