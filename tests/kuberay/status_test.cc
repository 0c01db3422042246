// ReadStatus: RayJob statuses as the operator writes them (docs/upstream-facts.md §2, §9) →
// StarForge's phases.
#include "starforge/kuberay/status.h"

#include <gtest/gtest.h>

#include "starforge/kuberay/diagnose.h"

namespace starforge::kuberay {
namespace {

using nlohmann::json;

json RayJob(const json& status) {
  json rj = {{"apiVersion", "ray.io/v1"},
             {"kind", "RayJob"},
             {"metadata", {{"name", "sf-j-1"}, {"namespace", "starforge"}}},
             {"spec", {{"entrypoint", "python3 .starforge/runner.pyz run"}}}};
  if (!status.is_null()) rj["status"] = status;
  return rj;
}

const json kZeroCluster = {{"desiredCPU", "0"},
                           {"desiredGPU", "0"},
                           {"desiredMemory", "0"},
                           {"desiredTPU", "0"},
                           {"head", json::object()}};

// Shapes from upstream-facts §9 and §2.
json Initializing() {
  return {{"jobId", "sf-j-1-b9qzt"},
          {"rayClusterName", "sf-j-1-x7k2p"},
          {"jobDeploymentStatus", "Initializing"},
          {"startTime", "2026-03-01T10:00:00Z"},
          {"succeeded", 0},
          {"failed", 0},
          {"rayJobInfo", json::object()},
          {"rayClusterStatus", kZeroCluster}};
}
json With(json base, const json& patch) {
  base.merge_patch(patch);
  return base;
}
json RunningDeployment(const json& patch = json::object()) {
  return With(Initializing(),
              With({{"jobDeploymentStatus", "Running"},
                    {"dashboardURL", "sf-j-1-x7k2p-head-svc.starforge.svc.cluster.local:8265"}},
                   patch));
}

struct Case {
  const char* name;
  json status;  // null = no status at all
  RayJobState state;
  const char* reason;
  bool terminal;
  const char* message;  // nullptr = don't check
};

class ReadStatusTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReadStatusTest, Maps) {
  const Case& c = GetParam();
  const StatusView v = ReadStatus(RayJob(c.status));
  EXPECT_EQ(ToString(v.state), ToString(c.state));
  EXPECT_EQ(v.reason, c.reason);
  EXPECT_EQ(v.terminal, c.terminal);
  if (c.message != nullptr) {
    EXPECT_EQ(v.message, c.message);
  }
}

const std::string kRayFailed =
    "Job entrypoint command failed with exit code 3, last available logs (truncated to 20,000 "
    "chars):\nTraceback (most recent call last):\n  File \"train.py\", line 3\nSystemExit: 3\n";

INSTANTIATE_TEST_SUITE_P(
    FactsShapes, ReadStatusTest,
    ::testing::Values(
        Case{"NoStatus", nullptr, RayJobState::kPending, "WaitingForOperator", false,
             "the KubeRay operator has not started the RayJob yet (is it installed and "
             "running?)"},
        Case{"Initializing", Initializing(), RayJobState::kPending, "Initializing", false,
             "the RayCluster for the job is being created"},
        Case{"RunningNoJobStatus", RunningDeployment(), RayJobState::kPending, "RayJobPending",
             false, nullptr},
        Case{"RunningPending",
             RunningDeployment({{"jobStatus", "PENDING"},
                                {"message",
                                 "Job has not started yet. It may be waiting for the "
                                 "runtime environment to be set up."}}),
             RayJobState::kPending, "RayJobPending", false,
             "Job has not started yet. It may be waiting for the runtime environment to be set "
             "up."},
        Case{
            "RunningRunning",
            RunningDeployment({{"jobStatus", "RUNNING"}, {"message", "Job is currently running."}}),
            RayJobState::kRunning, "", false, "Job is currently running."},
        // jobStatus terminal while the operator still waits for the submitter: not terminal.
        Case{"SucceededButDeploymentRunning",
             RunningDeployment({{"jobStatus", "SUCCEEDED"},
                                {"message", "Job finished successfully."}}),
             RayJobState::kRunning, "", false, nullptr},
        Case{"Complete",
             RunningDeployment({{"jobStatus", "SUCCEEDED"},
                                {"jobDeploymentStatus", "Complete"},
                                {"endTime", "2026-03-01T10:05:00Z"},
                                {"succeeded", 1},
                                {"message", "Job finished successfully."}}),
             RayJobState::kSucceeded, "", true, "Job finished successfully."},
        Case{"CompleteStopped",
             RunningDeployment({{"jobStatus", "STOPPED"},
                                {"jobDeploymentStatus", "Complete"},
                                {"message", "Job was intentionally stopped."}}),
             RayJobState::kStopped, "Stopped", true, "Job was intentionally stopped."},
        Case{"AppFailed",
             RunningDeployment({{"jobStatus", "FAILED"},
                                {"jobDeploymentStatus", "Failed"},
                                {"reason", "AppFailed"},
                                {"failed", 1},
                                {"message", kRayFailed}}),
             RayJobState::kFailed, "AppFailed", true, nullptr},
        // upstream-facts §9: jobStatus absent.
        Case{"SubmissionFailed",
             RunningDeployment({{"jobDeploymentStatus", "Failed"},
                                {"reason", "SubmissionFailed"},
                                {"failed", 1},
                                {"message",
                                 "Job submission has failed. Reason: "
                                 "BackoffLimitExceeded. Message: Job has reached the "
                                 "specified backoff limit"}}),
             RayJobState::kFailed, "SubmissionFailed", true,
             "Job submission has failed. Reason: BackoffLimitExceeded. Message: Job has reached "
             "the specified backoff limit"},
        // jobStatus stays RUNNING after a deadline (upstream-facts §2 scenario): terminal anyway.
        Case{"DeadlineExceededWhileRunning",
             RunningDeployment({{"jobStatus", "RUNNING"},
                                {"jobDeploymentStatus", "Failed"},
                                {"reason", "DeadlineExceeded"},
                                {"message",
                                 "The RayJob has passed the activeDeadlineSeconds. "
                                 "StartTime: 2026-03-01T10:00:00Z. "
                                 "ActiveDeadlineSeconds: 60"}}),
             RayJobState::kFailed, "DeadlineExceeded", true,
             "The RayJob has passed the activeDeadlineSeconds. StartTime: 2026-03-01T10:00:00Z. "
             "ActiveDeadlineSeconds: 60"},
        Case{"PreRunningDeadlineExceeded",
             With(Initializing(), {{"jobDeploymentStatus", "Failed"},
                                   {"reason", "PreRunningDeadlineExceeded"},
                                   {"message",
                                    "The RayJob has passed the "
                                    "preRunningDeadlineSeconds. StartTime: "
                                    "2026-03-01T10:00:00Z. "
                                    "PreRunningDeadlineSeconds: 30"}}),
             RayJobState::kFailed, "PreRunningDeadlineExceeded", true, nullptr},
        Case{"GracePeriodExceeded",
             RunningDeployment({{"jobStatus", "FAILED"},
                                {"jobDeploymentStatus", "Failed"},
                                {"reason", "JobDeploymentStatusTransitionGracePeriodExceeded"},
                                {"message",
                                 "JobDeploymentStatus does not transition to Complete "
                                 "or Failed within the grace period after JobStatus "
                                 "reaches a terminal state."}}),
             RayJobState::kFailed, "JobDeploymentStatusTransitionGracePeriodExceeded", true,
             nullptr},
        Case{"StatusCheckTimeout",
             RunningDeployment({{"jobStatus", "RUNNING"},
                                {"jobDeploymentStatus", "Failed"},
                                {"reason", "JobStatusCheckTimeoutExceeded"},
                                {"message",
                                 "Job status checks have been failing since "
                                 "2026-03-01T10:00:00Z; exceeded timeout of 300s"}}),
             RayJobState::kFailed, "JobStatusCheckTimeoutExceeded", true, nullptr},
        Case{"FailedWithoutReason", RunningDeployment({{"jobDeploymentStatus", "Failed"}}),
             RayJobState::kFailed, "Failed", true, "the KubeRay operator marked the RayJob Failed"},
        // upstream-facts §9.
        Case{"ValidationFailed",
             json{{"jobDeploymentStatus", "ValidationFailed"},
                  {"reason", "ValidationFailed"},
                  {"message",
                   "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes "
                   "set to false cannot have TTLSecondsAfterFinished"},
                  {"rayJobInfo", json::object()},
                  {"rayClusterStatus", kZeroCluster},
                  {"succeeded", 0},
                  {"failed", 0}},
             RayJobState::kFailed, "ValidationFailed", true,
             "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false "
             "cannot have TTLSecondsAfterFinished"},
        Case{"Suspended",
             json{{"jobDeploymentStatus", "Suspended"}, {"startTime", "2026-03-01T10:00:00Z"}},
             RayJobState::kPending, "Suspended", false,
             "the RayJob is suspended (spec.suspend=true, e.g. queued by Kueue)"},
        Case{"Suspending", With(Initializing(), {{"jobDeploymentStatus", "Suspending"}}),
             RayJobState::kPending, "Suspending", false, nullptr},
        // upstream-facts §9: the failure's message is kept while retrying.
        Case{"Retrying",
             RunningDeployment({{"jobDeploymentStatus", "Retrying"},
                                {"reason", "AppFailed"},
                                {"message", "Job entrypoint command failed with exit code 1"}}),
             RayJobState::kPending, "Retrying", false,
             "Job entrypoint command failed with exit code 1"},
        Case{"Waiting", With(Initializing(), {{"jobDeploymentStatus", "Waiting"}}),
             RayJobState::kPending, "Waiting", false, nullptr},
        Case{"UnknownDeploymentStatus", json{{"jobDeploymentStatus", "FailedJobDeploy"}},
             RayJobState::kUnknown, "UnknownDeploymentStatus", false,
             "the RayJob has jobDeploymentStatus \"FailedJobDeploy\", which StarForge does not "
             "know"}),
    [](const ::testing::TestParamInfo<Case>& p) { return p.param.name; });

TEST(ReadStatus, CopiesIdentifiersAndTimes) {
  const StatusView v = ReadStatus(RayJob(RunningDeployment({{"jobStatus", "SUCCEEDED"},
                                                            {"jobDeploymentStatus", "Complete"},
                                                            {"endTime", "2026-03-01T10:05:00Z"}})));
  EXPECT_EQ(v.job_id, "sf-j-1-b9qzt");
  EXPECT_EQ(v.ray_cluster_name, "sf-j-1-x7k2p");
  EXPECT_EQ(v.dashboard_url, "sf-j-1-x7k2p-head-svc.starforge.svc.cluster.local:8265");
  EXPECT_EQ(v.start_time, "2026-03-01T10:00:00Z");
  EXPECT_EQ(v.end_time, "2026-03-01T10:05:00Z");
  EXPECT_EQ(v.ray_job_status, "SUCCEEDED");
  EXPECT_EQ(v.job_deployment_status, "Complete");
  EXPECT_FALSE(v.exit_code.has_value());
}

TEST(ReadStatus, MissingJobStatusIsEmpty) {
  const StatusView v = ReadStatus(RayJob(Initializing()));
  EXPECT_EQ(v.ray_job_status, "");
  EXPECT_EQ(v.job_deployment_status, "Initializing");
}

TEST(ReadStatus, NotAnObjectIsUnknown) {
  const StatusView v = ReadStatus(nullptr);
  EXPECT_EQ(v.state, RayJobState::kUnknown);
  EXPECT_EQ(v.reason, "NotFound");
  EXPECT_FALSE(v.terminal);
}

TEST(ReadStatus, ExitCodeFromRayFailedMessage) {
  const StatusView v = ReadStatus(RayJob(RunningDeployment({{"jobStatus", "FAILED"},
                                                            {"jobDeploymentStatus", "Failed"},
                                                            {"reason", "AppFailed"},
                                                            {"message", kRayFailed}})));
  ASSERT_TRUE(v.exit_code.has_value());
  EXPECT_EQ(*v.exit_code, 3);
}

TEST(ReadStatus, RuntimeEnvFailureIsTheCapsule) {
  // What Ray 2.60.0 reports for a capsule whose bytes were changed in the store (https: Ray
  // downloads and unpacks it itself; R7 of scripts/e2e/kuberay_loop.py --ray real).
  const std::string ray =
      "runtime_env setup failed: Failed to set up runtime environment.\nzipfile.BadZipFile: Bad "
      "CRC-32 for file '.starforge/runner.pyz'";
  for (const char* deployment : {"Complete", "Failed"}) {
    const StatusView v = ReadStatus(RayJob(RunningDeployment(
        {{"jobStatus", "FAILED"}, {"jobDeploymentStatus", deployment}, {"message", ray}})));
    EXPECT_EQ(v.state, RayJobState::kFailed) << deployment;
    EXPECT_TRUE(v.terminal);
    EXPECT_EQ(v.reason, "CapsuleFetchFailed") << deployment;
    EXPECT_EQ(v.message,
              "Ray could not fetch or unpack the capsule (the job's working_dir): " + ray);
    EXPECT_FALSE(v.exit_code.has_value());
  }
}

TEST(ReadStatus, NoExitCodeWhenNotFailed) {
  // A DeadlineExceeded RayJob whose Ray job is RUNNING has no exit code even if a message says so.
  const StatusView v =
      ReadStatus(RayJob(RunningDeployment({{"jobStatus", "RUNNING"},
                                           {"jobDeploymentStatus", "Failed"},
                                           {"reason", "DeadlineExceeded"},
                                           {"message", "failed with exit code 9"}})));
  EXPECT_FALSE(v.exit_code.has_value());
}

struct ExitCase {
  const char* message;
  std::optional<int> code;
};

class ParseRayExitCodeTest : public ::testing::TestWithParam<ExitCase> {};

TEST_P(ParseRayExitCodeTest, Parses) {
  EXPECT_EQ(ParseRayExitCode(GetParam().message), GetParam().code) << GetParam().message;
}

INSTANTIATE_TEST_SUITE_P(
    RayWordings, ParseRayExitCodeTest,
    ::testing::Values(
        ExitCase{"Job entrypoint command failed with exit code 3, last available logs (truncated "
                 "to 20,000 chars):\nboom",
                 3},
        ExitCase{"Job entrypoint command failed with exit code 137. Last available logs "
                 "(truncated to 20,000 chars):\nKilled",
                 137},
        ExitCase{"Job entrypoint command failed with exit code 1", 1},
        ExitCase{"Job entrypoint command failed with exit code -15, last available logs", -15},
        ExitCase{"Job entrypoint command failed with exit code 3x", std::nullopt},
        ExitCase{"Job entrypoint command failed with exit code , last", std::nullopt},
        ExitCase{"Unexpected error occurred: The actor died unexpectedly before finishing this "
                 "task.",
                 std::nullopt},
        ExitCase{"", std::nullopt}));

// ---- ReadJob: the job as StarForge reports it from its RayJob ----

constexpr std::string_view kRef = "starforge/sf-j-1";

json Failed(const json& patch) {
  return RunningDeployment(With({{"jobDeploymentStatus", "Failed"}, {"failed", 1}}, patch));
}

TEST(ReadJob, NoRayJobIsDeletedOutsideUnlessCancelled) {
  const JobReading gone = ReadJob(nullptr, /*cancelled=*/false, kRef);
  EXPECT_EQ(gone.state, RunState::kFailed);
  EXPECT_EQ(gone.reason, "RayJobDeleted");
  EXPECT_EQ(gone.message,
            "RayJob starforge/sf-j-1 was deleted outside StarForge before the job ended");
  const JobReading ours = ReadJob(nullptr, /*cancelled=*/true, kRef);
  EXPECT_EQ(ours.state, RunState::kCancelled);
  EXPECT_EQ(ours.reason, "");
  EXPECT_EQ(ours.message, "cancelled: StarForge deleted RayJob starforge/sf-j-1");
}

TEST(ReadJob, BeingDeletedBeforeTheEndIsDeleted) {
  json rj = RayJob(RunningDeployment({{"jobStatus", "RUNNING"}}));
  rj["metadata"]["deletionTimestamp"] = "2026-03-01T10:06:00Z";
  const JobReading r = ReadJob(&rj, false, kRef);
  EXPECT_EQ(r.state, RunState::kFailed);
  EXPECT_EQ(r.reason, "RayJobDeleted");
  EXPECT_NE(r.message.find("is being deleted"), std::string::npos) << r.message;
  // A terminal RayJob being deleted (TTL, Release) keeps its outcome.
  json done =
      RayJob(RunningDeployment({{"jobStatus", "SUCCEEDED"}, {"jobDeploymentStatus", "Complete"}}));
  done["metadata"]["deletionTimestamp"] = "2026-03-01T10:06:00Z";
  EXPECT_EQ(ReadJob(&done, false, kRef).state, RunState::kSucceeded);
}

TEST(ReadJob, PendingAsksForADiagnosis) {
  const json rj = RayJob(Initializing());
  const JobReading r = ReadJob(&rj, false, kRef);
  EXPECT_EQ(r.state, RunState::kPending);
  EXPECT_TRUE(r.diagnose);
  EXPECT_EQ(r.reason, "Initializing");
  EXPECT_TRUE(ReadJob(&rj, true, kRef).state == RunState::kCancelled);
}

// Kueue creates a queued RayJob with spec.suspend and the operator reports it Suspended: the job
// is waiting for its turn (its pre-running deadline does not run), not failing to start.
TEST(ReadJob, ASuspendedRayJobIsQueued) {
  json rj = RayJob(Initializing());
  EXPECT_FALSE(ReadJob(&rj, false, kRef).queued);
  rj["spec"]["suspend"] = true;
  const JobReading asked = ReadJob(&rj, false, kRef);
  EXPECT_EQ(asked.state, RunState::kPending);
  EXPECT_TRUE(asked.queued);
  rj["spec"]["suspend"] = false;
  EXPECT_FALSE(ReadJob(&rj, false, kRef).queued);
  json waiting = RayJob(json{{"jobDeploymentStatus", "Suspended"}});
  EXPECT_TRUE(ReadJob(&waiting, false, kRef).queued);
  // Running is running, whatever the spec says a moment before the operator acts on it.
  json running = RayJob(RunningDeployment({{"jobStatus", "RUNNING"}}));
  running["spec"]["suspend"] = true;
  EXPECT_FALSE(ReadJob(&running, false, kRef).queued);
}

TEST(ReadJob, AddDiagnosisKeepsTheStatusWhereTheDiagnosisIsSilent) {
  const json rj = RayJob(Initializing());
  JobReading r = ReadJob(&rj, false, kRef);
  AddDiagnosis(Diagnosis{"Unschedulable", "0/3 nodes have 8 free GPUs", {}}, &r);
  EXPECT_EQ(r.reason, "Unschedulable");
  EXPECT_EQ(r.message, "0/3 nodes have 8 free GPUs");
  JobReading quiet = ReadJob(&rj, false, kRef);
  AddDiagnosis(Diagnosis{}, &quiet);
  EXPECT_EQ(quiet.reason, "Initializing");
  EXPECT_EQ(quiet.message, "the RayCluster for the job is being created");
}

TEST(ReadJob, FailedKeepsOneLineAndTheExitCode) {
  const json rj =
      RayJob(Failed({{"jobStatus", "FAILED"}, {"reason", "AppFailed"}, {"message", kRayFailed}}));
  const JobReading r = ReadJob(&rj, false, kRef);
  EXPECT_EQ(r.state, RunState::kFailed);
  EXPECT_EQ(r.reason, "AppFailed");
  EXPECT_EQ(r.message, "Job entrypoint command failed with exit code 3");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.diagnose);
  EXPECT_EQ(ReadJob(&rj, true, kRef).state, RunState::kCancelled);
}

TEST(ReadJob, ValidationFailedIsRejected) {
  const json rj =
      RayJob(Failed({{"jobDeploymentStatus", "ValidationFailed"},
                     {"message", "The RayJob spec is invalid: entrypoint is required"}}));
  const JobReading r = ReadJob(&rj, false, kRef);
  EXPECT_EQ(r.state, RunState::kFailed);
  EXPECT_EQ(r.reason, "Rejected");
  EXPECT_EQ(r.message, "The RayJob spec is invalid: entrypoint is required");
}

TEST(ReadJob, StoppedOutsideStarForgeSaysSo) {
  const json rj =
      RayJob(RunningDeployment({{"jobStatus", "STOPPED"}, {"jobDeploymentStatus", "Complete"}}));
  const JobReading outside = ReadJob(&rj, false, kRef);
  EXPECT_EQ(outside.state, RunState::kCancelled);
  EXPECT_EQ(outside.reason, "RayJobStopped");
  const JobReading ours = ReadJob(&rj, true, kRef);
  EXPECT_EQ(ours.state, RunState::kCancelled);
  EXPECT_EQ(ours.reason, "");
}

TEST(ReadJob, SucceededHasExitCodeZero) {
  const json rj = RayJob(RunningDeployment({{"jobStatus", "SUCCEEDED"},
                                            {"jobDeploymentStatus", "Complete"},
                                            {"message", "Job finished successfully."}}));
  const JobReading r = ReadJob(&rj, false, kRef);
  EXPECT_EQ(r.state, RunState::kSucceeded);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.message, "Job finished successfully.");
}

TEST(OneLine, DropsRaysLogTail) {
  EXPECT_EQ(RayMessageHeadline(kRayFailed), "Job entrypoint command failed with exit code 3");
  EXPECT_EQ(RayMessageHeadline(
                "Job entrypoint command failed with exit code 137. Last available logs:\nx"),
            "Job entrypoint command failed with exit code 137");
  EXPECT_EQ(RayMessageHeadline("first: \r\nsecond"), "first");
}

}  // namespace
}  // namespace starforge::kuberay
