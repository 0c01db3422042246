#include "starforge/kuberay/status.h"

#include <charconv>

#include "starforge/common/json_read.h"
#include "starforge/common/reasons.h"
#include "starforge/kuberay/constants.h"
#include "starforge/kuberay/diagnose.h"

namespace starforge::kuberay {
namespace {

using json_read::Str;
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

// Ray fails a job whose runtime environment it cannot set up with "runtime_env setup failed:
// Failed to set up runtime environment. …" (dashboard/modules/job/job_manager.py, Ray 2.60.0).
// StarForge's runtime env is the capsule as working_dir plus plain variables, so that is the
// capsule not fetched or not unpacked: an archive changed in the store (a zip CRC error), an
// expired or refused URL, an untrusted certificate.
bool RuntimeEnvFailed(const StatusView& v) {
  return v.ray_job_status == kRayJobFailed &&
         v.message.find("runtime_env setup failed") != std::string::npos;
}

StatusView CapsuleFailed(StatusView v) {
  v = Terminal(std::move(v), RayJobState::kFailed, reasons::kCapsuleFetchFailed);
  v.message = "Ray could not fetch or unpack the capsule (the job's working_dir): " + v.message;
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
    v.reason = reasons::kNotFound;
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
  if (v.ray_job_status == kRayJobFailed) v.exit_code = ParseRayExitCode(v.message);

  const std::string& ds = v.job_deployment_status;
  const std::string& js = v.ray_job_status;
  if (ds.empty()) {
    return Pending(v, reasons::kWaitingForOperator,
                   "the KubeRay operator has not started the RayJob yet (is it installed and "
                   "running?)");
  }
  if (ds == kDeploymentInitializing) {
    return Pending(v, ds, "the RayCluster for the job is being created");
  }
  if (ds == kDeploymentRunning) {
    if (js.empty() || js == kRayJobPending) {
      return Pending(v, reasons::kRayJobPending,
                     "the RayCluster is ready; the Ray job is being submitted or is waiting "
                     "for its runtime environment");
    }
    // RUNNING, or a terminal jobStatus the operator has not turned into Complete/Failed yet
    // (it waits for the submitter to finish): still running as far as StarForge is concerned.
    v.state = RayJobState::kRunning;
    return v;
  }
  if (ds == kDeploymentComplete) {
    if (js == kRayJobSucceeded) return Terminal(v, RayJobState::kSucceeded, "");
    if (js == kRayJobStopped) return Terminal(v, RayJobState::kStopped, reasons::kStopped);
    if (RuntimeEnvFailed(v)) return CapsuleFailed(v);
    if (js == kRayJobFailed) return Terminal(v, RayJobState::kFailed, reasons::kAppFailed);
    StatusView f =
        Terminal(v, RayJobState::kFailed, op_reason.empty() ? reasons::kFailed : op_reason);
    if (f.message.empty()) {
      f.message = "the RayJob is Complete but the Ray job status is \"" + js + "\"";
    }
    return f;
  }
  if (ds == kDeploymentFailed) {
    if (RuntimeEnvFailed(v)) return CapsuleFailed(v);
    StatusView f =
        Terminal(v, RayJobState::kFailed, op_reason.empty() ? reasons::kFailed : op_reason);
    if (f.message.empty()) f.message = "the KubeRay operator marked the RayJob Failed";
    return f;
  }
  if (ds == kDeploymentValidationFailed) {
    StatusView f = Terminal(v, RayJobState::kFailed, ds);
    if (f.message.empty()) f.message = "the KubeRay operator rejected the RayJob";
    return f;
  }
  if (ds == kDeploymentSuspending) {
    return Pending(v, ds, "the RayJob is being suspended (its RayCluster is deleted)");
  }
  if (ds == kDeploymentSuspended) {
    return Pending(v, ds, "the RayJob is suspended (spec.suspend=true, e.g. queued by Kueue)");
  }
  if (ds == kDeploymentRetrying) {
    return Pending(v, ds, "the RayJob is being retried with a new RayCluster");
  }
  if (ds == kDeploymentWaiting) {
    return Pending(v, ds, "the RayJob waits for a job id (InteractiveMode)");
  }
  v.state = RayJobState::kUnknown;
  v.reason = reasons::kUnknownDeploymentStatus;
  v.message = "the RayJob has jobDeploymentStatus \"" + ds + "\", which StarForge does not know";
  return v;
}

std::string OneLine(const std::string& message) {
  std::string line = message.substr(0, message.find('\n'));
  for (const char* tail : {", last available logs", ". Last available logs"}) {
    if (size_t at = line.find(tail); at != std::string::npos) line.resize(at);
  }
  while (!line.empty() && (line.back() == ' ' || line.back() == ':' || line.back() == '\r'))
    line.pop_back();
  return line;
}

namespace {

// The RayJob is gone (or going) before the job ended: a cancel of ours, or someone else's.
JobReading Deleted(bool cancelled, std::string_view ref, std::string_view how) {
  JobReading r;
  if (cancelled) {
    r.state = RunState::kCancelled;
    r.message = "cancelled: StarForge deleted RayJob " + std::string(ref);
  } else {
    r.state = RunState::kFailed;
    r.reason = reasons::kRayJobDeleted;
    r.message = "RayJob " + std::string(ref) + " " + std::string(how) +
                " outside StarForge before the job ended";
  }
  return r;
}

// Asked to wait (spec.suspend, what Kueue sets) or already waiting (the operator's status).
bool Suspended(const json& rayjob, const StatusView& sv) {
  const bool suspend = json_read::Field(json_read::Field(rayjob, "spec"), "suspend") == json(true);
  return suspend || sv.job_deployment_status == kDeploymentSuspending ||
         sv.job_deployment_status == kDeploymentSuspended;
}

}  // namespace

bool Deleting(const json& object) {
  return !json_read::Field(json_read::Field(object, "metadata"), "deletionTimestamp").is_null();
}

JobReading ReadJob(const json* rayjob, bool cancelled, std::string_view ref) {
  if (rayjob == nullptr) return Deleted(cancelled, ref, "was deleted");
  const StatusView sv = ReadStatus(*rayjob);
  if (Deleting(*rayjob) && !sv.terminal) return Deleted(cancelled, ref, "is being deleted");
  JobReading r;
  switch (sv.state) {
    case RayJobState::kPending:
    case RayJobState::kUnknown:
      // Deleted by us, the status not updated yet: cancelled.
      r.state = cancelled ? RunState::kCancelled : RunState::kPending;
      r.reason = sv.reason;
      r.message = sv.message;
      r.diagnose = true;
      r.queued = Suspended(*rayjob, sv);
      break;
    case RayJobState::kRunning:
      r.state = cancelled ? RunState::kCancelled : RunState::kRunning;
      r.message = OneLine(sv.message);
      break;
    case RayJobState::kSucceeded:
      r.state = RunState::kSucceeded;
      r.exit_code = 0;
      r.message = OneLine(sv.message);
      break;
    case RayJobState::kFailed:
      r.state = cancelled ? RunState::kCancelled : RunState::kFailed;
      r.exit_code = sv.exit_code;
      r.message = OneLine(sv.message);
      r.reason = JobReason(sv);
      if (r.message.empty() && r.reason == reasons::kRejected)
        r.message = "the KubeRay operator refused the RayJob";
      break;
    case RayJobState::kStopped:
      r.state = RunState::kCancelled;
      if (!cancelled) {
        r.reason = reasons::kRayJobStopped;
        r.message = "the Ray job was stopped outside StarForge (e.g. `ray job stop`)";
      }
      break;
  }
  return r;
}

void AddDiagnosis(const Diagnosis& diagnosis, JobReading* reading) {
  if (!diagnosis.reason.empty()) reading->reason = diagnosis.reason;
  if (!diagnosis.message.empty()) reading->message = diagnosis.message;
}

std::string JobReason(const StatusView& status) {
  // The operator refused the RayJob itself: for a user, the same as StarForge refusing the job.
  if (status.reason == kDeploymentValidationFailed) return reasons::kRejected;
  return status.reason.empty() ? reasons::kFailed : status.reason;
}

}  // namespace starforge::kuberay
