// Where jobs run. One small interface; `local` (local_fleet.h) runs jobs as processes on this
// machine, `kuberay` as one ephemeral RayJob per job. A fleet knows nothing about the store or
// the API: the controller calls it and records what it says. Every method is idempotent and
// keyed by the job id, so the controller may repeat any call after a crash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/common/reasons.h"
#include "starforge/common/run_state.h"
#include "starforge/common/status.h"
#include "starforge/jobspec/jobspec.h"

namespace starforge::fleet {

// Whether a job could ever run on this fleet (independent of what is busy now).
struct Admission {
  bool possible = true;
  std::string message;  // when not possible: why, what exists, and what to do instead
  std::string field;    // the JobSpec field at fault, e.g. "pools[0].gpusPerMachine" ("" = none)
};

// What the fleet needs to start a job. The capsule is already in the object store.
struct SubmitRequest {
  std::string job_id;
  jobspec::JobSpec spec;
  std::string capsule_sha256;
  std::string capsule_key;  // object-store key, capsule::ObjectKey(sha256)
  int64_t queued_at = 0;    // Unix ms; FIFO order among jobs waiting for resources
  // The job's owner is an admin: a fleet that cannot isolate jobs (the local fleet without a
  // sandbox) runs only admins' jobs, checked again at launch (after a restart without one).
  bool owner_admin = false;
};

struct SubmitResult {
  Status status;       // not ok: reason (e.g. reasons::kSubmissionFailed), message, retryable
  std::string handle;  // when ok: the fleet's name for the job; stored and passed to every call
};

// What the fleet sees of one job now (common/run_state.h).
using State = RunState;

struct FleetEvent {
  std::string type;  // "Normal" | "Warning"
  std::string reason;
  std::string message;
  std::string source;
  bool operator==(const FleetEvent&) const = default;
};

struct Observation {
  State state = State::kUnknown;
  std::string reason;   // CamelCase: why Pending (WaitingForResources, Unschedulable …) or why
                        // Failed (AppFailed, RunnerLost …)
  std::string message;  // one line a user can act on
  std::optional<int> exit_code;
  std::vector<FleetEvent> events;  // what happened since submit (recorded idempotently)
  bool retryable_error = false;    // the observation itself failed transiently; try again
  // Pending only: the job waits in a queue that admits it later (Kueue holds the RayJob
  // suspended). Its time there is not pre-running time: that deadline counts from admission.
  bool queued = false;
};

class Fleet {
 public:
  virtual ~Fleet() = default;

  virtual std::string Kind() const = 0;  // "local" | "kuberay"

  // Whether `spec` could ever run here. Cheap; called by the API at submit and by the controller.
  virtual Admission Admit(const jobspec::JobSpec& spec) = 0;

  // Starts the job, or finds it already started (same job id → same handle, nothing twice).
  virtual SubmitResult Submit(const SubmitRequest& request) = 0;

  // The job's state now. `spec` is the job's JobSpec as submitted (the kuberay fleet's diagnosis
  // names its pools from it); a default JobSpec when the caller has none.
  virtual Observation Observe(const std::string& job_id, const std::string& handle,
                              const jobspec::JobSpec& spec) = 0;

  // Asks the job to stop. `since_ms` = how long ago the cancel was first requested: the fleet
  // escalates (e.g. SIGTERM, then SIGKILL after its grace period). Idempotent; ok when gone.
  // Not ok: why, and whether the controller should try again.
  virtual Status Cancel(const std::string& job_id, const std::string& handle, int64_t since_ms) = 0;

  // Copies whatever logs the fleet has that are not yet under `logs_dir`
  // (<storage root>/jobs/<id>/logs). Not ok: retryable (the controller tries again) or not
  // (it records why and stops archiving).
  virtual Status CollectLogs(const std::string& job_id, const std::string& handle,
                             const std::filesystem::path& logs_dir) = 0;

  // Frees everything the job holds (processes, work dirs, cluster objects). Idempotent.
  // Not ok: in progress (freeing goes on by itself; a fleet that NotifiesChanges calls Notify
  // when it is done), retryable (the controller tries again) or not (it records why and gives
  // up).
  virtual Status Release(const std::string& job_id, const std::string& handle) = 0;

  // What the fleet has and uses, as JSON for GET /api/v1/capacity: {"fleet": Kind(), …}.
  virtual nlohmann::json Capacity() = 0;

  // Whether Notify is called for every change that can alter an Observation (watches): then
  // the controller need not poll its live jobs every resync (controller.h, sync_period).
  virtual bool NotifiesChanges() const { return false; }

  // Called (from any thread) when the fleet notices a change for a job, so the controller can
  // reconcile it at once instead of at its next resync.
  void SetNotify(std::function<void(const std::string& job_id)> notify) {
    std::lock_guard<std::mutex> lock(notify_mu_);
    notify_ = std::move(notify);
  }
  // Called instead when the change is the job's end (its next Observe finds it terminal) or the
  // last step of its release (what it ran on is gone), so the controller serves it with the ended
  // jobs rather than behind the live jobs' changes; unset, the plain notification is used.
  void SetNotifyEnded(std::function<void(const std::string& job_id)> notify) {
    std::lock_guard<std::mutex> lock(notify_mu_);
    notify_ended_ = std::move(notify);
  }

 protected:
  // Safe from any thread, also while SetNotify runs (informer threads call it at any time).
  void Notify(const std::string& job_id) {
    std::function<void(const std::string&)> notify;
    {
      std::lock_guard<std::mutex> lock(notify_mu_);
      notify = notify_;
    }
    if (notify) notify(job_id);
  }
  // The job ended (see SetNotifyEnded). Same thread safety as Notify.
  void NotifyEnded(const std::string& job_id) {
    std::function<void(const std::string&)> notify;
    {
      std::lock_guard<std::mutex> lock(notify_mu_);
      notify = notify_ended_ ? notify_ended_ : notify_;
    }
    if (notify) notify(job_id);
  }

 private:
  std::mutex notify_mu_;
  std::function<void(const std::string&)> notify_;
  std::function<void(const std::string&)> notify_ended_;
};

// "" → ok; otherwise a retryable fault with `reason` (the fleets' helpers report errors as text,
// and every such fault may clear by itself).
Status RetryableUnlessEmpty(const char* reason, std::string error);

}  // namespace starforge::fleet
