// Playgrounds from request to reclaim. The API calls Start/Get/List/Extend/Stop/Proxy; a
// level-triggered reconciler beside the jobs' controller drives every unfinished playground one
// step at a time (create → observe → at the TTL or on stop: delete → released), writing each
// state to the store before acting on it. After a restart it adopts what the store lists, so a
// playground's TTL is enforced across restarts.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/common/status.h"
#include "starforge/common/status_or.h"
#include "starforge/config/config.h"
#include "starforge/playground/backend.h"
#include "starforge/store/store.h"

namespace starforge::playground {

struct ManagerOptions {
  config::Config config;
  std::filesystem::path storage_root;
  std::chrono::milliseconds resync{1000};  // how often unfinished playgrounds are looked at
  // Ready playgrounds are observed every `ready_resync_factor` resyncs (their pod rarely changes).
  int ready_resync_factor = 5;
};

class Manager {
 public:
  Manager(store::Store& store, std::map<std::string, Backend*> backends, ManagerOptions options);
  ~Manager();  // Stop()

  void Start();  // the reconciler thread; adopts every unfinished playground
  void Stop();

  // The API. A refusal is a Status: kInvalidArgument for a bad request (with its field; reason
  // Rejected when no machine of the fleet could ever run it), kNotFound for a missing playground
  // — one of another user is missing too —, kFailedPrecondition when its state does not allow it
  // (a finished one extended, one not Ready proxied), kUnavailable when its logs cannot be read
  // for now. The store's failures still throw (store.h).
  StatusOr<store::Playground> Create(const store::User& user, const nlohmann::json& body);
  StatusOr<store::Playground> Get(const store::User& user, const std::string& id);
  std::vector<store::Playground> List(const store::User& user);
  StatusOr<store::Playground> Extend(const store::User& user, const std::string& id,
                                     int64_t seconds);
  StatusOr<store::Playground> Stop(const store::User& user, const std::string& id);
  StatusOr<std::string> Logs(const store::User& user, const std::string& id, int64_t tail_lines);
  // The diagnosis events of a not-ready playground ([] otherwise).
  StatusOr<nlohmann::json> Events(const store::User& user, const std::string& id);
  // Forwards to the model server; only Ready playgrounds answer.
  StatusOr<ProxyReply> Proxy(const store::User& user, const std::string& id, const ProxyCall& call,
                             const std::function<bool(std::string_view)>& on_data,
                             const std::atomic<bool>* stop);

  // One reconcile step of one playground (the thread calls this; tests may). Returns whether it
  // still needs reconciling.
  bool Reconcile(const std::string& id);

  // Requests the backends sent to their clusters (for /metrics and the closing note).
  int64_t ApiRequests() const;
  // Each fleet kind and why it cannot run playgrounds ("" when it can: Backend::Unavailable).
  std::vector<std::pair<std::string, std::string>> Fleets() const;

 private:
  void Loop();
  void Kick();
  Backend* BackendFor(const std::string& kind);
  int64_t Now() const;

  store::Store& store_;
  std::map<std::string, Backend*> backends_;
  ManagerOptions options_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool kicked_ = false;
  bool stopping_ = false;
  std::map<std::string, int64_t> ready_skips_;  // reconciler thread only
};

// JSON of a playground for the API ({id, owner, fleet, state, reason, message, spec, expiresAt,
// …, url}).
nlohmann::json ToJson(const store::Playground& p);

}  // namespace starforge::playground
