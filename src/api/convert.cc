#include "starforge/api/convert.h"

#include <ctime>

#include <fmt/format.h>

#include "starforge/capsule/capsule.h"

namespace starforge::api {

std::string FormatTime(int64_t unix_ms) {
  int64_t secs = unix_ms / 1000;
  int64_t ms = unix_ms % 1000;
  if (ms < 0) {  // floor for times before 1970, so the fraction stays in 0..999
    ms += 1000;
    secs -= 1;
  }
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:03d}Z", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

nlohmann::json TimeOrNull(int64_t unix_ms) {
  return unix_ms == 0 ? nlohmann::json(nullptr) : nlohmann::json(FormatTime(unix_ms));
}

nlohmann::json TransitionJson(const store::Transition& t) {
  return {{"at", FormatTime(t.at)},
          {"from", t.from ? nlohmann::json(std::string(store::ToString(*t.from)))
                          : nlohmann::json(nullptr)},
          {"to", std::string(store::ToString(t.to))},
          {"reason", t.reason},
          {"message", t.message},
          {"cause", t.cause}};
}

nlohmann::json JobJson(const store::Job& job, bool with_spec,
                       const std::vector<store::Transition>* timeline) {
  nlohmann::json j = {
      {"id", job.id},
      {"name", job.name},
      {"owner", job.owner},
      {"fleet", job.fleet},
      {"phase", std::string(store::ToString(job.phase))},
      {"reason", job.reason},
      {"message", job.message},
      {"exitCode", job.exit_code ? nlohmann::json(*job.exit_code) : nlohmann::json(nullptr)},
      {"capsule", job.capsule_sha256.empty()
                      ? nlohmann::json(nullptr)
                      : nlohmann::json({{"sha256", job.capsule_sha256},
                                        {"key", capsule::ObjectKey(job.capsule_sha256)}})},
      {"cancelRequested", job.cancel_requested},
      {"cleanup", {{"logsArchived", job.logs_archived}, {"released", job.released}}},
      {"createdAt", FormatTime(job.created_at)},
      {"updatedAt", FormatTime(job.updated_at)},
      {"startedAt", TimeOrNull(job.started_at)},
      {"finishedAt", TimeOrNull(job.finished_at)},
  };
  if (with_spec) {
    // The store holds the canonical text it was given; a row that does not parse (a bug, or a
    // hand-edited database) must not turn a GET into a 500.
    j["spec"] = nlohmann::json::parse(job.spec_json, nullptr, /*allow_exceptions=*/false);
    if (j["spec"].is_discarded()) j["spec"] = nullptr;
  }
  if (timeline) {
    nlohmann::json items = nlohmann::json::array();
    for (const auto& t : *timeline)
      items.push_back(TransitionJson(t));
    j["timeline"] = std::move(items);
  }
  return j;
}

nlohmann::json EventJson(const store::Event& e) {
  return {{"type", e.type},
          {"reason", e.reason},
          {"message", e.message},
          {"source", e.source},
          {"count", e.count},
          {"firstAt", FormatTime(e.first_at)},
          {"lastAt", FormatTime(e.last_at)}};
}

nlohmann::json ErrorJson(std::string_view kind, std::string_view message, std::string_view field,
                         const FieldErrors& errors) {
  nlohmann::json j = {{"error", kind}, {"message", message}};
  if (!field.empty()) j["field"] = field;
  if (!errors.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : errors)
      list.push_back({{"field", e.path}, {"message", e.message}});
    j["errors"] = std::move(list);
  }
  return j;
}

std::string EncodeCursor(int64_t seq) {
  return "s" + std::to_string(seq);
}

std::optional<int64_t> DecodeCursor(std::string_view cursor) {
  if (cursor.size() < 2 || cursor[0] != 's') return std::nullopt;
  auto n = ParseCount(cursor.substr(1));
  if (!n || *n == 0) return std::nullopt;
  return n;
}

std::optional<int64_t> ParseCount(std::string_view text) {
  if (text.empty() || text.size() > 18) return std::nullopt;  // 18 digits cannot overflow
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::optional<ListenAddress> ParseListen(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  else if (host.find(':') != std::string_view::npos)
    return std::nullopt;  // an IPv6 address needs brackets
  if (host.empty()) return std::nullopt;
  auto port = ParseCount(text.substr(colon + 1));
  if (!port || *port > 65535) return std::nullopt;
  return ListenAddress{std::string(host), static_cast<int>(*port)};
}

std::string MetricsText(const MetricsSnapshot& m) {
  std::string out;
  out += "# HELP starforge_jobs Jobs in the store by phase.\n# TYPE starforge_jobs gauge\n";
  for (int p = 0; p <= static_cast<int>(store::Phase::kCancelled); ++p) {
    const auto phase = static_cast<store::Phase>(p);
    int64_t n = 0;
    for (const auto& [ph, count] : m.jobs_by_phase)
      if (ph == phase) n += count;
    out += fmt::format("starforge_jobs{{phase=\"{}\"}} {}\n", store::ToString(phase), n);
  }
  auto counter = [&out](const char* name, const char* help, int64_t v) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n{0} {2}\n", name, help, v);
  };
  counter("starforge_transitions_total", "Phase transitions recorded.", m.transitions);
  out +=
      "# HELP starforge_reconcile_duration_seconds Time one reconcile of one job took.\n"
      "# TYPE starforge_reconcile_duration_seconds histogram\n";
  for (size_t i = 0; i < m.bucket_bounds.size(); ++i) {
    const int64_t c = i < m.bucket_counts.size() ? m.bucket_counts[i] : 0;
    out += fmt::format("starforge_reconcile_duration_seconds_bucket{{le=\"{}\"}} {}\n",
                       m.bucket_bounds[i], c);
  }
  out += fmt::format("starforge_reconcile_duration_seconds_bucket{{le=\"+Inf\"}} {}\n",
                     m.latency_count);
  out += fmt::format("starforge_reconcile_duration_seconds_sum {}\n", m.latency_sum_seconds);
  out += fmt::format("starforge_reconcile_duration_seconds_count {}\n", m.latency_count);
  counter("starforge_reconciles_total", "Reconciles run since start.", m.reconciles);
  counter("starforge_reconcile_errors_total", "Reconciles that failed and were retried.",
          m.reconcile_errors);
  counter("starforge_fleet_errors_total", "Fleet calls that failed.", m.fleet_errors);
  return out;
}

std::string SseLogEvent(std::string_view text, int64_t offset_after) {
  std::string out = "id: " + std::to_string(offset_after) + "\nevent: log\n";
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  size_t start = 0;
  while (true) {
    size_t nl = text.find('\n', start);
    std::string_view line =
        text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF line ends
    size_t seg = 0;
    while (true) {
      const size_t cr = line.find('\r', seg);
      out += "data: ";
      out += line.substr(seg, cr == std::string_view::npos ? std::string_view::npos : cr - seg);
      out += '\n';
      if (cr == std::string_view::npos) break;
      seg = cr + 1;
    }
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  out += '\n';
  return out;
}

std::string SseEndEvent(const store::Job& job) {
  const nlohmann::json data = {
      {"phase", std::string(store::ToString(job.phase))},
      {"reason", job.reason},
      {"message", job.message},
      {"exitCode", job.exit_code ? nlohmann::json(*job.exit_code) : nlohmann::json(nullptr)}};
  return "event: end\ndata: " + data.dump() + "\n\n";
}

}  // namespace starforge::api
