#include "faults.h"

namespace kubesim {

using nlohmann::json;

void Faults::Set(const json& body) {
  std::vector<FaultRule> rules;
  bool as_http = false;
  try {
    if (!body.is_object()) throw BadRequest("expected a JSON object with \"rules\"");
    for (const auto& r : body.value("rules", json::array())) {
      FaultRule f;
      f.verb = r.value("verb", "*");
      f.resource = r.value("resource", "*");
      f.code = r.value("code", 0);
      f.rate = r.value("rate", 1.0);
      f.count = r.value("count", int64_t{-1});
      f.retry_after = r.value("retryAfter", 0);
      f.latency_ms = r.value("latencyMs", 0);
      f.close_watch_after_ms = r.value("closeWatchAfterMs", -1);
      f.message = r.value("message", "");
      rules.push_back(f);
    }
    as_http = body.value("watchExpiredAs", "event") == "http";
  } catch (const json::exception& e) {
    throw BadRequest(std::string("bad fault rules: ") + e.what());
  }
  std::lock_guard<std::mutex> lock(mu_);
  rules_ = std::move(rules);
  expired_as_http_ = as_http;
}

void Faults::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  rules_.clear();
  expired_as_http_ = false;
}

json Faults::ToJson() {
  std::lock_guard<std::mutex> lock(mu_);
  json rules = json::array();
  for (const auto& f : rules_) {
    rules.push_back({{"verb", f.verb},
                     {"resource", f.resource},
                     {"code", f.code},
                     {"rate", f.rate},
                     {"count", f.count},
                     {"retryAfter", f.retry_after},
                     {"latencyMs", f.latency_ms},
                     {"closeWatchAfterMs", f.close_watch_after_ms},
                     {"message", f.message}});
  }
  return {{"rules", rules}, {"watchExpiredAs", expired_as_http_ ? "http" : "event"}};
}

Faults::Decision Faults::Check(const std::string& verb, const std::string& resource) {
  std::lock_guard<std::mutex> lock(mu_);
  Decision d;
  for (auto& f : rules_) {
    if (f.verb != "*" && f.verb != verb) continue;
    if (f.resource != "*" && f.resource != resource) continue;
    if (f.count == 0) continue;
    if (f.rate < 1.0 && std::uniform_real_distribution<double>(0, 1)(rng_) >= f.rate) continue;
    if (f.count > 0) --f.count;
    d.latency_ms += f.latency_ms;
    if (f.close_watch_after_ms >= 0) d.close_watch_after_ms = f.close_watch_after_ms;
    if (f.code == 0 || d.error) continue;
    ApiError e;
    e.code = f.code;
    e.retry_after = f.retry_after;
    switch (f.code) {
      case 429:
        e.reason = "TooManyRequests";
        e.message = "Too many requests, please try again later.";
        e.plain_text = true;
        if (e.retry_after <= 0) e.retry_after = 1;
        break;
      case 401:
        e.reason = "Unauthorized";
        e.message = "Unauthorized";
        break;
      case 403:
        e.reason = "Forbidden";
        e.message = resource + " is forbidden: User \"kubesim\" cannot " + verb + " resource \"" +
                    resource + "\"";
        break;
      case 404:  // as kube-apiserver answers for a resource it does not serve (no CRD)
        e.reason = "NotFound";
        e.message = "the server could not find the requested resource";
        break;
      case 503:
        e.reason = "ServiceUnavailable";
        e.message = "the server is currently unable to handle the request";
        break;
      case 504:
        e.reason = "Timeout";
        e.message = "Timeout: request did not complete within the allotted timeout";
        break;
      case 500:
      default:
        e.reason = "InternalError";
        e.message = "Internal error occurred: injected fault";
        e.details = {{"causes", json::array({{{"message", "injected fault"}}})}};
        break;
    }
    if (!f.message.empty()) e.message = f.message;
    d.error = e;
  }
  return d;
}

void Faults::Count(const std::string& verb, const std::string& resource) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[verb + " " + resource];
}

json Faults::Counts() {
  std::lock_guard<std::mutex> lock(mu_);
  json m = json::object();
  uint64_t total = 0;
  for (const auto& [k, v] : counts_) {
    m[k] = v;
    total += v;
  }
  return {{"requests", m}, {"total", total}};
}

void Faults::ResetCounts() {
  std::lock_guard<std::mutex> lock(mu_);
  counts_.clear();
}

bool Faults::ExpiredAsHttp() {
  std::lock_guard<std::mutex> lock(mu_);
  return expired_as_http_;
}

}  // namespace kubesim
