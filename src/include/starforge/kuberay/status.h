// Reading a RayJob's status (upstream-facts §2) as StarForge's phases. Pure: no I/O, no clock.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

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

}  // namespace starforge::kuberay
