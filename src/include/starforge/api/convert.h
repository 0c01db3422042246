// Pure pieces of the REST API (docs/api.md, the contract with the CLI): Job/Event JSON, error
// bodies, times, paging cursors, listen addresses, Prometheus text and Server-Sent Events.
// No I/O here, so every format is unit-tested without a server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/common/field_error.h"
#include "starforge/store/job.h"

namespace starforge::api {

// RFC 3339 UTC with milliseconds, e.g. "2026-11-29T12:00:00.123Z".
std::string FormatTime(int64_t unix_ms);
// FormatTime, or JSON null for 0 ("not yet").
nlohmann::json TimeOrNull(int64_t unix_ms);

// The Job JSON of the contract. `spec` adds the canonical JobSpec (GET one, POST response);
// `timeline` (GET one) adds the transitions, oldest first.
nlohmann::json JobJson(const store::Job& job, bool with_spec = false,
                       const std::vector<store::Transition>* timeline = nullptr);
nlohmann::json TransitionJson(const store::Transition& t);
nlohmann::json EventJson(const store::Event& e);

// {"error": kind, "message": message, "field"?: field, "errors"?: [{"field","message"}]}.
nlohmann::json ErrorJson(std::string_view kind, std::string_view message,
                         std::string_view field = {}, const FieldErrors& errors = {});

// Paging cursors are opaque to clients; inside they are the seq of the last item returned.
std::string EncodeCursor(int64_t seq);
std::optional<int64_t> DecodeCursor(std::string_view cursor);

// "HOST:PORT" (also "[v6]:PORT"); port 0..65535. nullopt when malformed.
struct ListenAddress {
  std::string host;
  int port = 0;
};
std::optional<ListenAddress> ParseListen(std::string_view text);

// A non-negative decimal integer (query parameters), or nullopt.
std::optional<int64_t> ParseCount(std::string_view text);

// What /metrics reports, as plain numbers.
struct MetricsSnapshot {
  std::vector<std::pair<store::Phase, int64_t>> jobs_by_phase;  // missing phases count 0
  int64_t transitions = 0;
  int64_t reconciles = 0;
  int64_t reconcile_errors = 0;
  int64_t fleet_errors = 0;
  std::vector<double> bucket_bounds;   // seconds, ascending
  std::vector<int64_t> bucket_counts;  // cumulative: reconciles ≤ bound
  int64_t latency_count = 0;
  double latency_sum_seconds = 0;
};
// Prometheus text exposition format 0.0.4.
std::string MetricsText(const MetricsSnapshot& m);

// One SSE "log" event for `text` (complete lines, each ending in '\n', or a final partial
// line): "id: <offset_after>\nevent: log\ndata: <line>\n…\n". A CR inside a line (progress
// bars) starts a new data line, because SSE readers treat CR as a line end.
std::string SseLogEvent(std::string_view text, int64_t offset_after);
// "event: end\ndata: {"phase",…}\n\n".
std::string SseEndEvent(const store::Job& job);
inline constexpr std::string_view kSseKeepAlive = ": keep-alive\n\n";

}  // namespace starforge::api
