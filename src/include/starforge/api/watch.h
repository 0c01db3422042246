// Watching jobs for the API's live views (docs/api.md, "Watching jobs"): what the store's change
// journal (store.h, Change) says changed, as Server-Sent Events text. No sockets, threads or
// waiting here: a route handler calls Poll() as often as it likes (every ServerOptions::sse_poll)
// and writes what it returns, so any HTTP front can drive a watch, blocking or not.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "starforge/store/store.h"

namespace starforge::api {

// A list's resourceVersion (opaque to clients, as in Kubernetes): "<epoch>.<change number>".
// `epoch` names one server process, whose change numbers mean nothing to another.
std::string EncodeResourceVersion(std::string_view epoch, int64_t change);
// The change number, or nullopt when `rv` is malformed or from another epoch.
std::optional<int64_t> DecodeResourceVersion(std::string_view rv, std::string_view epoch);

// The filters a jobs watch takes: a job's owner, fleet and name never change, so a job matches
// for its whole life (a phase filter would not: the console filters phases itself).
struct JobsWatchFilter {
  std::optional<std::string> owner;
  std::optional<std::string> fleet;
  std::optional<std::string> name;
  std::optional<std::string> name_contains;  // ignoring ASCII case, as store::JobFilter
};

// GET /api/v1/jobs?watch=1: every job matching `filter` that was created or changed after
// change `after`.
class JobsWatch {
 public:
  JobsWatch(store::Store& store, std::string epoch, int64_t after, JobsWatchFilter filter)
      : store_(store), epoch_(std::move(epoch)), after_(after), filter_(std::move(filter)) {}

  // What changed since the last call: one "job" event per changed job (its state now, as in
  // the list) with "id: <resourceVersion>"; or, when the journal no longer holds everything
  // missed, one "expired" event (list again, then watch from the new list), and done().
  std::string Poll();
  bool done() const { return done_; }

 private:
  store::Store& store_;
  std::string epoch_;
  int64_t after_;
  JobsWatchFilter filter_;
  bool done_ = false;
};

// GET /api/v1/jobs/{id}?watch=1: one job's detail and its events, live.
class JobWatch {
 public:
  // `detail` adds what the store does not hold to each "job" sent (GET /jobs/{id}'s resources).
  using Detail = std::function<void(nlohmann::json&, const store::Job&)>;
  JobWatch(store::Store& store, std::string job_id, Detail detail = {})
      : store_(store), id_(std::move(job_id)), detail_(std::move(detail)) {}

  // First call: "job" (as GET /jobs/{id} answers it, with spec and timeline) and "events"
  // ({"items": [...]} as GET /jobs/{id}/events); later calls: each again when it changed.
  // Once the job is terminal with its logs archived and its machines released (nothing changes
  // any more), or gone: "end" ({"phase","reason","message","exitCode"}) and done().
  std::string Poll();
  bool done() const { return done_; }

 private:
  store::Store& store_;
  std::string id_;
  Detail detail_;
  int64_t after_ = -1;  // the journal position read up to; -1 before the first Poll
  int64_t version_ = -1;
  std::string events_;  // the last "events" data sent
  bool done_ = false;
};

// A capacity answer's resourceVersion: a digest of what it says ("c" + 16 hex digits). Capacity
// comes from the fleets' informers, not from the store's journal, so its version is its content:
// equal versions, equal numbers, in any run of the server.
std::string CapacityResourceVersion(const nlohmann::json& capacity);

// GET /api/v1/capacity?watch=1: the capacity answer again whenever it differs from the last one
// sent. It never ends by itself (the stream's owner ends it).
class CapacityWatch {
 public:
  // `read` answers GET /api/v1/capacity for the watching user ({"fleets": [...]}, filtered as
  // that user may see it); it is called at most once per `every`. `known`: the resourceVersion
  // the client already has (an answer with it is not sent again); empty: none.
  CapacityWatch(std::function<nlohmann::json()> read, std::chrono::milliseconds every,
                std::string known)
      : read_(std::move(read)), every_(every), last_(std::move(known)) {}

  // "" until `every` has passed since the last read; then one "capacity" event (data: the
  // answer with its "resourceVersion"; id: that version) when the answer changed, else "".
  std::string Poll();
  bool done() const { return false; }

 private:
  std::function<nlohmann::json()> read_;
  std::chrono::milliseconds every_;
  std::string last_;  // the resourceVersion the client has
  std::chrono::steady_clock::time_point next_read_{};
};

// "[id: ID\n]event: NAME\ndata: DATA\n\n" (DATA has no line break: compact JSON).
std::string SseMessage(std::string_view name, std::string_view data, std::string_view id = {});

}  // namespace starforge::api
