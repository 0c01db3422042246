// The embedded default fleet: runs each job's capsule as a process tree on this machine.
//
// Layout under <storage root>/jobs/<id>/: capsule/ (the unpacked capsule), logs/driver.log and
// status.json (written by the runner), logs/runner.log (the runner's own stdout+stderr),
// fleet/run.lock (held by the runner process for its whole life: locked = alive),
// fleet/launch.json (pid and start time of the runner, written before Submit returns).
// Also fleet/request.json (the accepted job: a waiting job re-enters the queue from it after a
// restart), fleet/cancel.json (a cancel was requested; what was sent), fleet/failed.json (the
// runner could not be started) and fleet/capsule.zip. docs/local-fleet.md has the details.
// The runner runs in its own session (setsid, never our child: double fork), so it outlives
// `forge serve`; a restarted server re-adopts it from these files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "starforge/capsule/runner.h"
#include "starforge/fleet/fleet.h"
#include "starforge/objstore/object_store.h"

namespace starforge::fleet {

struct LocalResources {
  int64_t cpus = 0;  // whole CPUs
  int64_t gpus = 0;
  int64_t memory_bytes = 0;
};

// This machine: CPU count, GPUs from `nvidia-smi -L` when it exists (else 0), physical memory.
LocalResources DetectLocalResources();

// How a job is walled off from the server and from other jobs: a bubblewrap sandbox with its own
// PID, IPC and mount namespaces, where the storage root shows only the job's own directory
// (docs/local-fleet.md, "The sandbox").
struct LocalSandbox {
  std::string bwrap;   // bubblewrap's absolute path
  std::string python;  // the interpreter's real path (the same inside the sandbox)
  std::vector<std::filesystem::path> read_only;  // system and interpreter directories
  std::vector<std::filesystem::path> devices;    // GPU device nodes (/dev/nvidia*)
  int uid = -1;  // ≥ 0 when forge serve runs as root: jobs run as this uid/gid (setpriv)
  int gid = -1;
};

struct SandboxProbe {
  std::optional<LocalSandbox> sandbox;  // nullopt: no sandbox can be made here
  std::string error;                    // why not, for the operator
};

// Finds bubblewrap (on PATH) and the real interpreter behind `python`, and runs a trial in such
// a sandbox. Jobs run as 65534 (nobody) when this process runs as root.
SandboxProbe ProbeSandbox(const std::string& python = capsule::kRunnerInterpreter);

struct LocalFleetOptions {
  std::filesystem::path storage_root;  // FORGE_STORAGE_ROOT
  LocalResources resources;            // what jobs may use in total (DetectLocalResources())
  std::string python = capsule::kRunnerInterpreter;  // interpreter that runs .starforge/runner.pyz
  int64_t cancel_grace_ms = 30'000;                  // SIGTERM, then SIGKILL after this long
  // A `running` status.json whose heartbeat is older than this, with the lock free, means the
  // runner died (RunnerLost).
  int64_t heartbeat_stale_ms = 60'000;
  // Set (from ProbeSandbox): every job runs in this sandbox with only its own environment.
  // Unset: jobs run as plain processes with the server's environment minus secrets — only for
  // a single-user machine (forge serve then accepts local jobs of admins only).
  std::optional<LocalSandbox> sandbox;
  // Without a sandbox, launch only jobs whose SubmitRequest says owner_admin (forge serve sets
  // this; the API refuses others' local jobs at submit, and this catches those admitted while a
  // sandbox existed, before a restart without one).
  bool unsandboxed_admins_only = false;
};

class LocalFleet : public Fleet {
 public:
  // `store` holds the capsules (the capsule key of SubmitRequest is fetched from it).
  LocalFleet(LocalFleetOptions options, objstore::ObjectStore& store);
  ~LocalFleet() override;

  std::string Kind() const override { return "local"; }
  // Refuses more than one machine in total, or more GPUs / CPUs than this machine has.
  Admission Admit(const jobspec::JobSpec& spec) override;
  // Starts the runner if the job's resources are free now and no earlier-queued job waits;
  // otherwise returns ok with the job waiting (Observe says Pending / WaitingForResources).
  SubmitResult Submit(const SubmitRequest& request) override;
  Observation Observe(const std::string& job_id, const std::string& handle,
                      const jobspec::JobSpec& spec) override;
  Status Cancel(const std::string& job_id, const std::string& handle, int64_t since_ms) override;
  Status CollectLogs(const std::string& job_id, const std::string& handle,
                     const std::filesystem::path& logs_dir) override;
  Status Release(const std::string& job_id, const std::string& handle) override;
  nlohmann::json Capacity() override;

  // A share of this machine for a process that is not a job (a local playground's model
  // server): `cpus` (at least 1) and `gpus` come off what jobs may use, as a running job's do,
  // until Unhold, or until `lock` is free once HoldStarted said the process holds it. Jobs
  // already waiting are not ahead of it. Retryable WaitingForResources, saying what is in use,
  // when it does not fit now. `gpu_ids`: the GPUs to give the process. Idempotent per holder.
  Status Hold(const std::string& holder, int64_t cpus, int64_t gpus,
              const std::filesystem::path& lock, std::vector<int>* gpu_ids);
  // The holder's process now holds its lock: the share ends when the lock is free.
  void HoldStarted(const std::string& holder);
  // After a restart: a process that runs already holds `gpu_ids` (no check: it has them).
  void Readopt(const std::string& holder, int64_t cpus, const std::vector<int>& gpu_ids,
               const std::filesystem::path& lock);
  // Gives the share back now and starts what waited for it.
  void Unhold(const std::string& holder);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace starforge::fleet
