#include "starforge/kuberay/status.h"

#include <charconv>

#include "starforge/kuberay/json_fields.h"
namespace starforge::kuberay {
namespace {

using json_fields::Str;
using nlohmann::json;

StatusView Pending(StatusView v, std::string reason, std::string message) {
  v.state = RayJobState::kPending;
  v.reason = std::move(reason);
  if (v.message.empty()) v.message = std::move(message);
  return v;
}

StatusView Terminal(StatusView v, RayJobState state, std::string reason) {
  v.state = state;
  v.reason = std::move(reason);
  v.terminal = true;
  return v;
}

}  // namespace

std::string_view ToString(RayJobState state) {
  switch (state) {
    case RayJobState::kPending:
      return "Pending";
    case RayJobState::kRunning:
      return "Running";
    case RayJobState::kSucceeded:
      return "Succeeded";
    case RayJobState::kFailed:
      return "Failed";
    case RayJobState::kStopped:
      return "Stopped";
    case RayJobState::kUnknown:
      return "Unknown";
  }
  return "Unknown";
}

std::optional<int> ParseRayExitCode(std::string_view message) {
  static constexpr std::string_view kMarker = "failed with exit code ";
  const size_t at = message.find(kMarker);
  if (at == std::string_view::npos) return std::nullopt;
  const char* begin = message.data() + at + kMarker.size();
  const char* end = message.data() + message.size();
  // Ray formats the return code with %d-like formatting: a negative code is a signal.
  int code = 0;
  auto [ptr, ec] = std::from_chars(begin, end, code);
  if (ec != std::errc() || ptr == begin) return std::nullopt;
  // What follows must end the number: ',', '.', end or whitespace (not "3x").
  if (ptr != end && *ptr != ',' && *ptr != '.' && *ptr != ' ' && *ptr != '\n') return std::nullopt;
  return code;
}

StatusView ReadStatus(const json& rayjob) {
  StatusView v;
  if (!rayjob.is_object()) {
    v.reason = "NotFound";
    v.message = "the RayJob does not exist";
    return v;
  }
  static const json kEmpty = json::object();
  const json& status =
      rayjob.contains("status") && rayjob["status"].is_object() ? rayjob["status"] : kEmpty;
  v.job_deployment_status = Str(status, "jobDeploymentStatus");
  v.ray_job_status = Str(status, "jobStatus");
  v.message = Str(status, "message");
  v.job_id = Str(status, "jobId");
  v.ray_cluster_name = Str(status, "rayClusterName");
  v.dashboard_url = Str(status, "dashboardURL");
  v.start_time = Str(status, "startTime");
  v.end_time = Str(status, "endTime");
  const std::string op_reason = Str(status, "reason");
  if (v.ray_job_status == "FAILED") v.exit_code = ParseRayExitCode(v.message);

  const std::string& ds = v.job_deployment_status;
  const std::string& js = v.ray_job_status;
  if (ds.empty()) {
    return Pending(v, "WaitingForOperator",
                   "the KubeRay operator has not started the RayJob yet (is it installed and "
                   "running?)");
  }
  if (ds == "Initializing") {
    return Pending(v, "Initializing", "the RayCluster for the job is being created");
  }
  if (ds == "Running") {
    if (js.empty() || js == "PENDING") {
      return Pending(v, "RayJobPending",
                     "the RayCluster is ready; the Ray job is being submitted or is waiting "
                     "for its runtime environment");
    }
    // RUNNING, or a terminal jobStatus the operator has not turned into Complete/Failed yet
    // (it waits for the submitter to finish): still running as far as StarForge is concerned.
    v.state = RayJobState::kRunning;
    return v;
  }
  if (ds == "Complete") {
    if (js == "SUCCEEDED") return Terminal(v, RayJobState::kSucceeded, "");
    if (js == "STOPPED") return Terminal(v, RayJobState::kStopped, "Stopped");
    if (js == "FAILED") return Terminal(v, RayJobState::kFailed, "AppFailed");
    StatusView f = Terminal(v, RayJobState::kFailed, op_reason.empty() ? "Failed" : op_reason);
    if (f.message.empty()) {
      f.message = "the RayJob is Complete but the Ray job status is \"" + js + "\"";
    }
    return f;
  }
  if (ds == "Failed") {
    StatusView f = Terminal(v, RayJobState::kFailed, op_reason.empty() ? "Failed" : op_reason);
    if (f.message.empty()) f.message = "the KubeRay operator marked the RayJob Failed";
    return f;
  }
  if (ds == "ValidationFailed") {
    StatusView f = Terminal(v, RayJobState::kFailed, "ValidationFailed");
    if (f.message.empty()) f.message = "the KubeRay operator rejected the RayJob";
    return f;
  }
  if (ds == "Suspending") {
    return Pending(v, "Suspending", "the RayJob is being suspended (its RayCluster is deleted)");
  }
  if (ds == "Suspended") {
    return Pending(v, "Suspended",
                   "the RayJob is suspended (spec.suspend=true, e.g. queued by Kueue)");
  }
  if (ds == "Retrying") {
    return Pending(v, "Retrying", "the RayJob is being retried with a new RayCluster");
  }
  if (ds == "Waiting") {
    return Pending(v, "Waiting", "the RayJob waits for a job id (InteractiveMode)");
  }
  v.state = RayJobState::kUnknown;
  v.reason = "UnknownDeploymentStatus";
  v.message = "the RayJob has jobDeploymentStatus \"" + ds + "\", which StarForge does not know";
  return v;
}

}  // namespace starforge::kuberay
