// The production fleet: one ephemeral RayJob per job on a Kubernetes cluster with the KubeRay
// operator (docs/kuberay-fleet.md). The fleet watches the cluster through informers (RayJobs
// StarForge made, the pods, jobs and events of its namespace, nodes, and pods across namespaces
// for capacity) and answers Observe from those caches; it writes only to create, delete and
// read logs. Status mapping, diagnosis and capacity arithmetic are pure functions of
// src/kuberay; this class is the I/O around them.
//
// State kept outside the cluster: <state dir>/kuberay/cancelled/<job id> marks a
// RayJob that StarForge deleted on purpose (so that its disappearance reads as Cancelled, even
// after a restart). Everything else is derived from the cluster.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "starforge/config/config.h"
#include "starforge/fleet/fleet.h"
#include "starforge/kube/client.h"
#include "starforge/kube/client_config.h"
#include "starforge/objstore/object_store.h"

namespace starforge::fleet {

struct KubeRayFleetOptions {
  config::Config config;               // FORGE_*: namespace, GPU label, storage, render settings
  kube::ClientConfig client;           // where the API server is (kube::LoadClientConfig)
  kube::ClientOptions client_options;  // the fleet shortens the retries (the controller retries)
  std::filesystem::path storage_root;  // FORGE_STORAGE_ROOT
  std::filesystem::path state_dir;     // FORGE_STATE_DIR (the cancelled marks live under it)
  // Whether the store holds a job with this id. A StarForge RayJob whose job does not exist is
  // an orphan (e.g. the store was reset) and is deleted after `orphan_grace`. Unset: no cleanup.
  std::function<bool(const std::string& job_id)> job_exists;
  std::chrono::seconds orphan_grace{600};
  std::chrono::milliseconds orphan_scan_interval{60'000};
  // How long a call waits for the informers' first list before it falls back to a GET (Observe)
  // or admits without a capacity check (Admit).
  std::chrono::milliseconds sync_timeout{5'000};
  // Added to the job's deadlines for the capsule URL's lifetime (capped at 7 days).
  int64_t presign_slack_seconds = 3600;
  // Lines of a failed `fetch-capsule` init container's log shown in the diagnosis.
  int64_t init_log_tail_lines = 20;
  // Informer watch renewal (tests shorten it).
  std::chrono::seconds min_watch_timeout{300};
};

// Whether this server can run the kuberay fleet: a Kubernetes connection (FORGE_K8S_API_SERVER,
// in-cluster, or a kubeconfig) and S3 (FORGE_S3_ENDPOINT: capsules reach pods as presigned
// URLs). `message` says what is missing and what to set; it never holds a credential.
struct KubeRaySetup {
  bool available = false;
  kube::ClientConfig client;
  std::string message;
};
KubeRaySetup DetectKubeRay(const config::Config& config, const kube::ConfigSources& sources);

// `text` with the query string of every http(s):// URL replaced by "?REDACTED": a presigned
// URL's query is its credential (signature, access key id). Pure.
std::string RedactUrlQueries(std::string text);

class KubeRayFleet : public Fleet {
 public:
  // Makes no request; Start() begins watching. `objects` presigns capsule URLs. `options.client`
  // must pass kube::CheckClientConfig (DetectKubeRay's does).
  KubeRayFleet(KubeRayFleetOptions options, objstore::ObjectStore& objects);
  ~KubeRayFleet() override;  // Stop()

  // Starts the informers and the orphan sweeper. Returns at once (an unreachable cluster is
  // retried in the background; calls meanwhile fall back to direct requests).
  void Start();
  void Stop();
  // True once every informer has listed (tests and `forge serve`'s log line).
  bool WaitForSync(std::chrono::milliseconds timeout);

  std::string Kind() const override { return "kuberay"; }
  // Every change of a job's objects that the informers see notifies the job.
  bool NotifiesChanges() const override { return true; }
  // Refuses what render refuses (multi-machine on RWO storage, corpus without its PVC, …) and
  // what can never fit the cluster's nodes (no node of the series, more GPUs per machine than
  // any node has). An unreachable cluster skips the capacity check.
  Admission Admit(const jobspec::JobSpec& spec) override;
  // Presigns the capsule, renders and creates the RayJob (name = handle = RayJobName(job id)).
  // 409 with our job-id label = already submitted.
  SubmitResult Submit(const SubmitRequest& request) override;
  Observation Observe(const std::string& job_id, const std::string& handle,
                      const jobspec::JobSpec& spec) override;
  // Marks the job cancelled by us, then deletes the RayJob (the operator stops the Ray job).
  Status Cancel(const std::string& job_id, const std::string& handle, int64_t since_ms) override;
  // ray-job.log (Ray's Jobs API through the service proxy), submitter.log, events.json and
  // rayjob.json (presigned URLs redacted). driver.log is already there (the runner writes it).
  Status CollectLogs(const std::string& job_id, const std::string& handle,
                     const std::filesystem::path& logs_dir) override;
  // Deletes the RayJob; ok once it is gone.
  Status Release(const std::string& job_id, const std::string& handle) override;
  nlohmann::json Capacity() override;

  // Requests sent by the fleet's client (informers included), for tests and the closing note.
  kube::ClientStats ApiStats() const;

  // One pod of FORGE_K8S_NAMESPACE as the informers see it, for other readers in forge serve
  // (playgrounds): no request is sent.
  struct PodView {
    std::optional<nlohmann::json> pod;      // nullopt: not in the cache (yet, or any more)
    std::vector<nlohmann::json> events;     // the namespace's events about it
    std::vector<nlohmann::json> nodes;      // while it is unscheduled: every node
    std::vector<nlohmann::json> node_pods;  // … and the bound, unfinished pods of all namespaces
  };
  // nullopt until the informers have listed: the caller then asks the API server itself.
  std::optional<PodView> CachedPod(const std::string& name) const;
  // Runs one orphan sweep now; returns the RayJobs deleted (tests).
  std::vector<std::string> SweepOrphans();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A fleet kind this server knows but cannot run (e.g. kuberay without a cluster or S3): every
// job is refused at admission with `message`, which says what to configure.
class UnavailableFleet : public Fleet {
 public:
  UnavailableFleet(std::string kind, std::string message)
      : kind_(std::move(kind)), message_(std::move(message)) {}
  std::string Kind() const override { return kind_; }
  Admission Admit(const jobspec::JobSpec&) override { return {false, message_, "fleet"}; }
  SubmitResult Submit(const SubmitRequest&) override {
    return {Status::Permanent(reasons::kRejected, message_), ""};
  }
  // A job from before a restart with other settings waits (retryable) instead of failing.
  Observation Observe(const std::string&, const std::string&, const jobspec::JobSpec&) override {
    Observation o;
    o.retryable_error = true;
    o.message = message_;
    return o;
  }
  // Retryable like Observe: the server may be restarted with the fleet configured.
  Status Cancel(const std::string&, const std::string&, int64_t) override {
    return Status::Retryable(reasons::kCancelFailed, message_);
  }
  Status CollectLogs(const std::string&, const std::string&,
                     const std::filesystem::path&) override {
    return Status::Retryable(reasons::kLogCollectionFailed, message_);
  }
  Status Release(const std::string&, const std::string&) override {
    return Status::Retryable(reasons::kReleaseFailed, message_);
  }
  // The same message as every refused job gets: what to configure for this fleet.
  nlohmann::json Capacity() override {
    return {{"fleet", kind_}, {"available", false}, {"message", message_}};
  }

 private:
  std::string kind_;
  std::string message_;
};

}  // namespace starforge::fleet
