// `forge metrics ID [-f]`: the last value of each of a job's training series (GET
// /api/v1/jobs/{id}/metrics: its metrics.jsonl and TensorBoard event files), or, with --follow,
// each series' newest point as the job writes them until it ends.
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "command.h"
#include "starforge/cli/forge.h"

namespace starforge::cli {

namespace {

using nlohmann::json;

// Reading a finished job's whole history page by page: at most this many answers (4 MiB each on
// the server, more than its 64 MiB per file of every file together).
constexpr int kMaxPages = 1000;

struct Last {
  bool has_step = false;  // the job may write points without a step
  double step = 0;
  double value = 0;
  int64_t points = 0;
};

std::string Value(double v) {
  return fmt::format("{:.6g}", v);
}

std::string Step(const Last& l) {
  if (!l.has_step) return "-";
  const double s = l.step;
  return s == std::floor(s) && std::abs(s) < 1e15 ? fmt::format("{}", static_cast<int64_t>(s))
                                                  : Value(s);
}

// Folds an answer's series into `last` (kept in the order the series first came).
void Fold(const json& answer, std::vector<std::string>& order, std::map<std::string, Last>& last) {
  for (const json& s : answer.value("series", json::array())) {
    const std::string name = s.value("name", std::string());
    const json& points = s.contains("points") ? s["points"] : json::array();
    if (name.empty() || !points.is_array() || points.empty()) continue;
    auto [it, fresh] = last.try_emplace(name);
    if (fresh) order.push_back(name);
    for (const json& p : points) {
      if (!p.is_array() || p.size() != 2 || !p[1].is_number()) continue;
      it->second.has_step = p[0].is_number();
      it->second.step = it->second.has_step ? p[0].get<double>() : 0;
      it->second.value = p[1].get<double>();
      ++it->second.points;
    }
  }
}

void Warn(Context& c, const json& answer, std::string* said) {
  if (!answer.contains("warning") || !answer["warning"].is_string()) return;
  const std::string w = answer["warning"].get<std::string>();
  if (w == *said) return;
  *said = w;
  c.err << "forge: warning: " << w << "\n";
}

int Metrics(Context& c, const std::string& server, const std::string& id, bool follow) {
  int exit = 0;
  std::optional<ApiClient> client = ConnectClient(c, server, &exit);
  if (!client) return exit;
  const std::string path = "/api/v1/jobs/" + UrlEncode(id) + "/metrics";
  std::vector<std::string> order;
  std::map<std::string, Last> last;
  std::string warned;
  int64_t skipped = 0;
  if (follow) {
    // Each batch's newest point per series, as "STEP  SERIES  VALUE" lines.
    std::string last_event_id;
    StreamOptions options;
    options.on_reconnect = [&c](const ApiError& why) {
      c.err << "forge: warning: " << why.message << "; resuming the metrics stream\n" << std::flush;
    };
    const ApiError e = client->Stream(
        path + "?follow=1", &last_event_id,
        [&](const SseEvent& ev) {
          if (ev.event == "end") return false;
          if (ev.event != "metrics") return true;
          const json a = json::parse(ev.data, nullptr, /*allow_exceptions=*/false);
          if (!a.is_object()) return true;
          Warn(c, a, &warned);
          std::vector<std::string> batch_order;
          std::map<std::string, Last> batch;
          Fold(a, batch_order, batch);
          for (const std::string& name : batch_order)
            c.out << Step(batch[name]) << "\t" << name << "\t" << Value(batch[name].value) << "\n";
          c.out << std::flush;
          return true;
        },
        options);
    if (!e.ok()) return ReportApiError(c, e);
    return kExitOk;
  }
  std::string cursor = "0";
  for (int page = 0; page < kMaxPages; ++page) {
    json a;
    const ApiError e = client->GetJson(path + "?cursor=" + UrlEncode(cursor), &a);
    if (!e.ok()) return ReportApiError(c, e);
    Fold(a, order, last);
    Warn(c, a, &warned);
    skipped += a.value("skipped", int64_t{0});
    const std::string next = a.value("cursor", cursor);
    if (!a.value("more", false) || next == cursor) break;
    cursor = next;
  }
  if (skipped > 0)
    c.err << "forge: " << skipped
          << " line(s) of metrics.jsonl were not a JSON object of numbers and were skipped\n";
  if (order.empty()) {
    c.err << "forge: job " << id
          << " has written no metrics (yet): JSON lines to $FORGE_JOB_DIR/metrics.jsonl or "
             "TensorBoard event files under $FORGE_JOB_DIR (docs/api.md)\n";
    return kExitOk;
  }
  size_t width = 6;
  for (const std::string& name : order)
    width = std::max(width, name.size());
  std::ostringstream table;
  table << std::left << std::setw(static_cast<int>(width) + 2) << "SERIES" << std::setw(10)
        << "STEP" << std::setw(14) << "LAST"
        << "POINTS\n";
  for (const std::string& name : order) {
    const Last& l = last[name];
    table << std::setw(static_cast<int>(width) + 2) << name << std::setw(10) << Step(l)
          << std::setw(14) << Value(l.value) << l.points << "\n";
  }
  c.out << table.str() << std::flush;
  return kExitOk;
}

}  // namespace

void RegisterMetricsCommands(Registry& registry) {
  struct Options {
    std::string server;
    std::string id;
    bool follow = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* metrics = registry.Add(
      "metrics",
      "Print the last value of each of a job's training series (its metrics.jsonl and "
      "TensorBoard event files); -f prints each series' newest points as they come until the "
      "job ends",
      [opts](Context& c) { return Metrics(c, opts->server, opts->id, opts->follow); });
  metrics->add_option("ID", opts->id, "Job id")->required();
  metrics->add_flag("-f,--follow", opts->follow, "Keep printing new points until the job ends");
  AddServer(metrics, &opts->server);
}

}  // namespace starforge::cli
