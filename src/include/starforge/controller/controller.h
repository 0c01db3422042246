// Drives every job from Queued to a terminal phase and through cleanup. Level-triggered: a
// reconcile reads the job row and the fleet, takes ONE step toward the desired state, writes the
// result to the store before acting on it, and requeues. Every step is idempotent, so after a
// crash anywhere a restart (Start lists unfinished jobs) completes every job exactly once.
//
//   Queued      → Admit again (Rejected if impossible) → Packaging
//   Packaging   → extract upload, capsule::Build with the stored JobSpec, ObjectStore::PutFile
//                 (content-addressed: a repeat uploads nothing) → record sha256 → Submitting
//   Submitting  → Fleet::Submit (same job id → same handle) → record handle → Pending
//   Pending/Running → Fleet::Observe → phase/reason/message/events; deadlines; cancel
//                 (time the fleet's queue holds a job — Kueue — is not pre-running time)
//   terminal    → Fleet::CollectLogs → logs_archived → Fleet::Release → released (done)
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "starforge/common/disk_budget.h"
#include "starforge/common/status_or.h"
#include "starforge/config/config.h"
#include "starforge/controller/work_queue.h"
#include "starforge/fleet/fleet.h"
#include "starforge/jobspec/jobspec.h"
#include "starforge/objstore/object_store.h"
#include "starforge/store/store.h"

namespace starforge::controller {

struct Options {
  std::filesystem::path storage_root;  // jobs/<id>/ (logs)
  std::filesystem::path state_dir;     // FORGE_STATE_DIR: work/ (packaging scratch)
  int workers = 2;
  // Workers that serve only terminal jobs' archive and release (work_queue.h, Lane::kCleanup),
  // beside `workers`, which serve them first too.
  int cleanup_workers = 2;
  // The workers' nice value, added to the server's (0: as the server); not the cleanup workers'.
  // Background work below the API's requests: see Controller::Worker.
  int worker_nice = 5;
  std::chrono::milliseconds resync{1000};  // requeue of Pending/Running jobs (polled fleets)
  // Pending/Running jobs of a fleet that notifies every change (Fleet::NotifiesChanges): looked
  // at when it says so, and otherwise only every sync_period (±10 %, spread out) as a safety net
  // — controller-runtime's SyncPeriod — or at the job's next deadline if that comes first.
  std::chrono::milliseconds sync_period{30'000};
  std::chrono::milliseconds backoff_base{200};  // failed step: base * 2^n …
  std::chrono::milliseconds backoff_max{30'000};
  int64_t capsule_max_bytes = 512LL << 20;
  // Disk space a packaging holds while it unpacks the code and builds the capsule in work/ (the
  // API's uploads hold theirs in the same budget); null: checked against the free space only.
  DiskBudget* disk_budget = nullptr;
  // FORGE_SUBMIT_DEADLINE_S: how long Packaging and Submitting retry transient errors, counted
  // from the start of Packaging, before the job fails with SubmitDeadlineExceeded.
  std::chrono::seconds submit_deadline{1800};
};

// Counters for /metrics (monotonic since start).
struct Metrics {
  std::atomic<int64_t> reconciles{0};
  std::atomic<int64_t> reconcile_errors{0};
  std::atomic<int64_t> fleet_errors{0};
  // Reconcile latency histogram: counts of reconciles with duration ≤ bucket (seconds).
  static constexpr double kBuckets[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5};
  std::atomic<int64_t> latency_buckets[std::size(kBuckets)]{};
  std::atomic<int64_t> latency_count{0};
  std::atomic<int64_t> latency_sum_us{0};
};

// The fleet events each live job's last look found and recorded in full. A look that finds the
// same list again has nothing to record (the store's counts only grow), so it skips reading the
// job's events back: that read was 6 % of forge serve's CPU at 1,000 jobs. Only a
// cache: empty after a restart, when the store decides. Thread-safe.
class RecordedFleetEvents {
 public:
  // Whether `events` is the list last remembered for the job.
  bool Same(const std::string& job_id, const std::vector<fleet::FleetEvent>& events);
  void Remember(const std::string& job_id, const std::vector<fleet::FleetEvent>& events);
  void Forget(const std::string& job_id);

 private:
  std::mutex mu_;
  std::map<std::string, std::vector<fleet::FleetEvent>> by_job_;
};

// Each live job's JobSpec, parsed from its stored canonical JSON at the job's first reconcile and
// kept until its cleanup, instead of parsed again at every look at the job. Keyed by job id and
// checked against the stored text, so a spec is never served for other text. Thread-safe.
class ParsedSpecs {
 public:
  // The spec of `job`, or why its stored spec does not parse (kInvalidArgument; not kept: such a
  // job ends at this reconcile).
  StatusOr<std::shared_ptr<const jobspec::JobSpec>> Get(const store::Job& job);
  void Forget(const std::string& job_id);

 private:
  struct Parsed {
    std::string text;
    std::shared_ptr<const jobspec::JobSpec> spec;
  };
  std::mutex mu_;
  std::map<std::string, Parsed> by_job_;
};

class Controller {
 public:
  // `fleets` by kind ("local", "kuberay"); a job whose fleet is missing fails with Rejected.
  Controller(store::Store& store, std::map<std::string, fleet::Fleet*> fleets,
             objstore::ObjectStore& objects, Options options);
  ~Controller();  // Stop()

  // Enqueues every unfinished job (oldest first) and starts the workers.
  void Start();
  // Stops taking work and joins the workers (a step in progress finishes).
  void Stop();

  // Reconcile this job soon (after the API created it or requested its cancel).
  void Enqueue(const std::string& job_id);

  // One reconcile of one job, synchronously (the workers call this; tests may too).
  // Returns the delay before the job should be looked at again, or nullopt when it is done.
  std::optional<std::chrono::milliseconds> Reconcile(const std::string& job_id);

  fleet::Fleet* FleetFor(const std::string& kind);
  const Metrics& metrics() const { return metrics_; }

 private:
  // Reconcile, and the lane the job goes back to (terminal jobs: Lane::kCleanup).
  std::optional<std::chrono::milliseconds> ReconcileStep(const std::string& job_id, Lane* lane);
  void Worker(Lane worst);
  store::Store& store_;
  std::map<std::string, fleet::Fleet*> fleets_;
  objstore::ObjectStore& objects_;
  Options options_;
  WorkQueue queue_;
  Metrics metrics_;
  RecordedFleetEvents recorded_events_;
  ParsedSpecs specs_;
  std::vector<std::thread> workers_;
  std::atomic<bool> running_{false};
};

// Test hook: when the environment variable STARFORGE_FAILPOINT names `point`, the process kills
// itself with SIGKILL there (crash-safety tests). Points: "packaging-built", "capsule-stored",
// "submitted", "running-observed", "terminal-recorded", "logs-archived".
void Failpoint(const char* point);

}  // namespace starforge::controller
