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
#include <string>

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

struct LocalFleetOptions {
  std::filesystem::path storage_root;  // FORGE_STORAGE_ROOT
  LocalResources resources;            // what jobs may use in total (DetectLocalResources())
  std::string python = "python3";      // interpreter that runs .starforge/runner.pyz
  int64_t cancel_grace_ms = 30'000;    // SIGTERM, then SIGKILL after this long
  // A `running` status.json whose heartbeat is older than this, with the lock free, means the
  // runner died (RunnerLost).
  int64_t heartbeat_stale_ms = 60'000;
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

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace starforge::fleet
