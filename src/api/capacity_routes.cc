// The capacity routes: what each fleet has and uses (read, or watched), and the doctor's check of
// a kuberay fleet's prerequisites.
#include "starforge/api/handlers.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include <spdlog/spdlog.h>

#include "starforge/api/watch.h"
#include "starforge/common/api_errors.h"

namespace starforge::api {

namespace {

// How often a capacity watch reads the fleets' capacity, which all watches share.
constexpr auto kCapacityWatchEvery = std::chrono::milliseconds(1000);

// The fleets' capacity, read at most once per `max_age` for all callers: every capacity watch
// of every user looks each second, and the fleets' answers are the same for all of them.
nlohmann::json FleetsCapacity(ServerState& s, std::chrono::milliseconds max_age) {
  std::lock_guard<std::mutex> lock(s.capacity_mu);
  if (max_age.count() > 0 && s.capacity_read.time_since_epoch().count() != 0 &&
      Clock::now() - s.capacity_read < max_age)
    return s.capacity_cache;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [kind, f] : s.fleets) {
    if (!f) continue;
    try {
      list.push_back(f->Capacity());
    } catch (const std::exception& e) {
      spdlog::error("capacity of fleet {}: {}", kind, e.what());
      list.push_back({{"fleet", kind}, {"error", "capacity unavailable; see the server's log"}});
    }
  }
  s.capacity_cache = std::move(list);
  s.capacity_read = Clock::now();
  return s.capacity_cache;
}

// GET /api/v1/capacity as `user` sees it: {"fleets": [...]}. A non-admin sees other users'
// jobs as counts only (the fleet's totals), and its own jobs by id.
nlohmann::json CapacityFor(ServerState& s, const store::User& user,
                           std::chrono::milliseconds max_age) {
  nlohmann::json list = FleetsCapacity(s, max_age);
  if (!user.admin) {
    for (nlohmann::json& cap : list) {
      if (!cap.contains("jobs") || !cap["jobs"].is_array()) continue;
      nlohmann::json own = nlohmann::json::array();
      for (const nlohmann::json& j : cap["jobs"]) {
        const std::optional<store::Job> job = s.store.GetJob(j.value("id", ""));
        if (job && job->owner == user.name) own.push_back(j);
      }
      cap["jobs"] = std::move(own);
    }
  }
  return {{"fleets", std::move(list)}};
}

}  // namespace

void Capacity(Call& c) {
  ServerState& s = c.server;
  OnlyParams(c, {"watch", "resourceVersion"});
  if (BoolParam(c, "watch")) {
    // From the answer the client has (its resourceVersion, or on a reconnect the last
    // event's id): an unchanged answer is not sent again.
    std::string rv = c.req.get_header_value("Last-Event-ID");
    if (rv.empty()) rv = Param(c, "resourceVersion");
    return StreamEvents(
        c, WatchLimit(s),
        std::make_shared<CapacityWatch>(
            [&s, user = c.user] { return CapacityFor(s, user, kCapacityWatchEvery); },
            kCapacityWatchEvery, std::move(rv)));
  }
  if (c.req.has_param("resourceVersion"))
    throw BadRequest("resourceVersion needs watch=1", "resourceVersion");
  nlohmann::json body = CapacityFor(s, c.user, std::chrono::milliseconds(0));
  body["resourceVersion"] = CapacityResourceVersion(body);
  SetJson(c.res, 200, body);
}

// Cluster prerequisites (forge doctor). Admins only: it names the cluster's nodes and the
// server's identity.
void Doctor(Call& c) {
  ServerState& s = c.server;
  OnlyParams(c, {});
  RequireAdmin(c, "run the doctor");
  if (!s.options.doctor) {
    throw ApiError{404, api_errors::kNotFound, "this server has no kuberay fleet to check"};
  }
  SetJson(c.res, 200, s.options.doctor());
}

}  // namespace starforge::api
