// Reading a RayJob's status (upstream-facts §2) as StarForge's phases. Pure: no I/O, no clock.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "starforge/common/run_state.h"

namespace starforge::kuberay {

enum class RayJobState {
  kPending,    // not running yet: operator not started, cluster starting, Ray job PENDING, …
  kRunning,    // the Ray job is RUNNING (or ended, but the operator has not finished the RayJob)
  kSucceeded,  // Complete + SUCCEEDED
  kFailed,     // Failed or ValidationFailed (reason says which), or Complete with a non-success
  kStopped,    // Complete + STOPPED: someone stopped the Ray job (Cancelled if StarForge did)
  kUnknown,    // no RayJob, or a jobDeploymentStatus this code does not know
};

std::string_view ToString(RayJobState state);  // "Pending", …, "Unknown"

struct StatusView {
  RayJobState state = RayJobState::kUnknown;
  // CamelCase. Pending: WaitingForOperator ("" deployment status), Initializing, RayJobPending,
  // Suspending, Suspended, Retrying, Waiting. Running: "" . Failed: the operator's reason
  // (AppFailed, SubmissionFailed, DeadlineExceeded, PreRunningDeadlineExceeded,
  // JobDeploymentStatusTransitionGracePeriodExceeded, JobStatusCheckTimeoutExceeded,
  // ValidationFailed; "Failed" when the operator gave none). Unknown: NotFound or
  // UnknownDeploymentStatus.
  std::string reason;
  std::string message;    // the operator's or Ray's status.message; ours when they gave none
  bool terminal = false;  // jobDeploymentStatus ∈ {Complete, Failed, ValidationFailed}; never
                          // decided from jobStatus alone
  std::string job_id;     // status.jobId (Ray's submission id)
  std::string ray_cluster_name;       // status.rayClusterName
  std::string dashboard_url;          // status.dashboardURL (no scheme)
  std::string start_time;             // status.startTime (RFC 3339) or ""
  std::string end_time;               // status.endTime (RFC 3339) or ""
  std::string ray_job_status;         // status.jobStatus; "" when absent
  std::string job_deployment_status;  // status.jobDeploymentStatus; "" when absent
  std::optional<int> exit_code;       // the entrypoint's exit code, from Ray's FAILED message
};

// Maps a RayJob object (null or without status = not started) to a StatusView.
StatusView ReadStatus(const nlohmann::json& rayjob);

// The exit code in Ray's FAILED message ("Job entrypoint command failed with exit code N, last
// available logs …" or "… exit code N. Last available logs …"); nullopt when absent.
std::optional<int> ParseRayExitCode(std::string_view message);

// The job's reason for a Failed RayJob: Rejected when the operator refused it
// (ValidationFailed), the operator's reason otherwise, "Failed" when it gave none.
std::string JobReason(const StatusView& status);

// ---- The job as StarForge reports it (the kuberay fleet's Observe only adds I/O) ----

// The first line of an operator's or Ray's message, without the log tail Ray appends to a FAILED
// message ("…exit code 3, last available logs (truncated to 20,000 chars):\n…"): the job's
// message is one line, and the output is in its logs.
std::string RayMessageHeadline(const std::string& message);

// Whether a Kubernetes object is being deleted (metadata.deletionTimestamp set).
bool Deleting(const nlohmann::json& object);

struct Diagnosis;  // diagnose.h

struct JobReading {
  RunState state = RunState::kUnknown;
  std::string reason;   // common/reasons.h or the operator's
  std::string message;  // one line; URL queries not yet redacted
  std::optional<int> exit_code;
  // Not running yet, or a deployment status StarForge does not know: the pods and events say
  // why (kuberay/diagnose.h); AddDiagnosis merges what they say.
  bool diagnose = false;
  // Suspended: Kueue's webhook creates a queued RayJob suspended and unsuspends it at admission
  // (docs/kuberay-fleet.md). Waiting for a turn, not failing to start.
  bool queued = false;
};

// The job whose RayJob is `rayjob` (nullptr: there is none), as StarForge reports it.
// `cancelled`: StarForge cancelled the job (it deletes the RayJob); `ref` names the RayJob
// ("<namespace>/<name>") in messages. A RayJob deleted before it ended is RayJobDeleted unless
// StarForge cancelled it; a Ray job stopped outside StarForge is Cancelled with RayJobStopped.
JobReading ReadJob(const nlohmann::json* rayjob, bool cancelled, std::string_view ref);

// A reading to diagnose with the diagnosis' reason and message where it gave them.
void AddDiagnosis(const Diagnosis& diagnosis, JobReading* reading);

}  // namespace starforge::kuberay
