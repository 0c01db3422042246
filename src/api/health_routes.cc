// The health routes: liveness and readiness probes, Prometheus metrics, and the API's own
// description (src/api/openapi.json, compiled in).
#include "starforge/api/handlers.h"

#include <initializer_list>
#include <string>
#include <tuple>

#include <spdlog/spdlog.h>

#include "starforge/api/convert.h"
#include "starforge/api/routes.h"

namespace starforge::api {

void Healthz(Call& c) {
  c.res.set_content("ok\n", "text/plain; charset=utf-8");
}

void Readyz(Call& c) {
  ServerState& s = c.server;
  try {
    s.store.CountUsers();  // the database answers
  } catch (const std::exception& e) {
    spdlog::warn("readyz: the s.store does not answer: {}", e.what());
    c.res.status = 503;
    c.res.set_content("not ready: the database does not answer\n", "text/plain; charset=utf-8");
    return;
  }
  c.res.set_content("ok\n", "text/plain; charset=utf-8");
}

void Metrics(Call& c) {
  ServerState& s = c.server;
  MetricsSnapshot m;
  m.jobs_by_phase = s.store.CountByPhase();
  m.transitions = s.store.CountTransitions();
  const controller::Metrics& cm = s.controller.metrics();
  m.reconciles = cm.reconciles;
  m.reconcile_errors = cm.reconcile_errors;
  m.fleet_errors = cm.fleet_errors;
  for (size_t i = 0; i < std::size(controller::Metrics::kBuckets); ++i) {
    m.bucket_bounds.push_back(controller::Metrics::kBuckets[i]);
    m.bucket_counts.push_back(cm.latency_buckets[i]);
  }
  m.latency_count = cm.latency_count;
  m.latency_sum_seconds = static_cast<double>(cm.latency_sum_us.load()) / 1e6;
  // The HTTP front and the upload space (front.h, disk_budget.h).
  const FrontStats f = s.http.Stats();
  std::string text = MetricsText(m);
  for (const auto& [name, help, type, value] :
       std::initializer_list<std::tuple<const char*, const char*, const char*, int64_t>>{
           {"starforge_http_connections", "Connections open now", "gauge", f.open},
           {"starforge_http_connections_parked",
            "Connections waiting for a request, holding no thread", "gauge", f.parked},
           {"starforge_http_streams", "Answers being streamed (log follows)", "gauge", f.streams},
           {"starforge_http_refused_busy_total", "Requests answered 503: too many connections",
            "counter", f.refused_busy},
           {"starforge_http_refused_client_total",
            "Requests answered 429: too many connections from one address", "counter",
            f.refused_client},
           {"starforge_http_head_timeouts_total",
            "Connections closed: the request's head did not arrive in time", "counter",
            f.head_timeouts},
           {"starforge_upload_reserved_bytes", "Disk space held by uploads in progress", "gauge",
            s.upload_budget->reserved()},
       }) {
    text += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
  }
  c.res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
}

void OpenApi(Call& c) {
  c.res.set_content(std::string(OpenApiDocument()), "application/json");
}

}  // namespace starforge::api
