// Every machine-readable reason StarForge sets on a job, an observation or an event, spelled
// once, here. They are API surface (JSON, CLI, metrics): renaming one breaks clients. The
// control plane (controller/), the fleets (fleet/) and the RayJob mapping (kuberay/) all use
// these; Kubernetes' and KubeRay's own words that StarForge only reads are in
// kuberay/constants.h.
#pragma once

namespace starforge::reasons {

// ---- A job's terminal or pending reason, set by the control plane ----
inline constexpr const char* kRejected = "Rejected";  // can never run on its fleet
inline constexpr const char* kPackagingFailed =
    "PackagingFailed";                                          // the capsule could not be built
inline constexpr const char* kStorageFailed = "StorageFailed";  // object store refused the capsule
inline constexpr const char* kSubmissionFailed = "SubmissionFailed";
inline constexpr const char* kWaitingForResources = "WaitingForResources";  // Pending, local fleet
inline constexpr const char* kAppFailed = "AppFailed";  // the entrypoint exited ≠ 0
inline constexpr const char* kCompleted = "Completed";  // Succeeded
inline constexpr const char* kCancelledByUser = "CancelledByUser";
inline constexpr const char* kRunnerLost = "RunnerLost";  // the runner died without a status
inline constexpr const char* kPreRunningDeadlineExceeded = "PreRunningDeadlineExceeded";
inline constexpr const char* kQueueDeadlineExceeded = "QueueDeadlineExceeded";
inline constexpr const char* kDeadlineExceeded = "DeadlineExceeded";
// Packaging/Submitting kept failing transiently for FORGE_SUBMIT_DEADLINE_S.
inline constexpr const char* kSubmitDeadlineExceeded = "SubmitDeadlineExceeded";

// ---- Events the control plane records ----
inline constexpr const char* kResubmitted = "Resubmitted";
inline constexpr const char* kLogCollectionFailed = "LogCollectionFailed";
inline constexpr const char* kReleaseFailed = "ReleaseFailed";
inline constexpr const char* kReleasing = "Releasing";  // the fleet is freeing it (finalizers)
inline constexpr const char* kCancelFailed = "CancelFailed";
inline constexpr const char* kQueued = "Queued";      // the fleet's queue holds the job (Kueue)
inline constexpr const char* kAdmitted = "Admitted";  // … and let it go: pre-running starts
inline constexpr const char* kCancelRequested = "CancelRequested";    // by the API, with the user
inline constexpr const char* kPackagingWarning = "PackagingWarning";  // e.g. a file left out
inline constexpr const char* kCapsuleStoreRetrying = "CapsuleStoreRetrying";  // store unreachable

// ---- The local fleet (runner exit codes, runner/README.md) ----
inline constexpr const char* kCapsuleVerificationFailed = "CapsuleVerificationFailed";  // 65
inline constexpr const char* kInvalidJob = "InvalidJob";                                // 78
inline constexpr const char* kEntrypointNotRunnable = "EntrypointNotRunnable";          // 126, 127
inline constexpr const char* kSignalled = "Signalled";  // the entrypoint died on a signal
inline constexpr const char* kStarting = "Starting";    // Pending: being launched / pods start
// Its events: the runner started, SIGTERM sent, SIGKILL sent, the job ended by a cancel.
inline constexpr const char* kStarted = "Started";
inline constexpr const char* kStopping = "Stopping";
inline constexpr const char* kKilling = "Killing";
inline constexpr const char* kCancelled = "Cancelled";

// ---- The kuberay fleet: the RayJob's status (kuberay/status.cc) ----
inline constexpr const char* kFailed = "Failed";      // the operator failed the RayJob, no reason
inline constexpr const char* kNotFound = "NotFound";  // no RayJob
inline constexpr const char* kWaitingForOperator = "WaitingForOperator";
inline constexpr const char* kRayJobPending = "RayJobPending";
inline constexpr const char* kStopped = "Stopped";
inline constexpr const char* kUnknownDeploymentStatus = "UnknownDeploymentStatus";
inline constexpr const char* kRayJobDeleted = "RayJobDeleted";  // deleted outside StarForge
inline constexpr const char* kRayJobStopped = "RayJobStopped";  // `ray job stop` outside
// ---- The kuberay fleet: why a job is not running yet (kuberay/diagnose.cc) ----
inline constexpr const char* kNotSubmitted = "NotSubmitted";
inline constexpr const char* kRunning = "Running";
inline constexpr const char* kSubmitting = "Submitting";
inline constexpr const char* kQueuedByKueue = "QueuedByKueue";
inline constexpr const char* kWaitingForRuntimeEnv = "WaitingForRuntimeEnv";
inline constexpr const char* kWaitingForCluster = "WaitingForCluster";
inline constexpr const char* kUnschedulable = "Unschedulable";
inline constexpr const char* kImagePullFailed = "ImagePullFailed";
inline constexpr const char* kCapsuleFetchFailed = "CapsuleFetchFailed";
inline constexpr const char* kContainerConfigError = "ContainerConfigError";
inline constexpr const char* kInitContainerFailed = "InitContainerFailed";
inline constexpr const char* kContainerFailed = "ContainerFailed";
inline constexpr const char* kSubmitterFailed = "SubmitterFailed";
inline constexpr const char* kVolumeMountFailed = "VolumeMountFailed";
inline constexpr const char* kPodFailed = "PodFailed";
inline constexpr const char* kQuotaExceeded = "QuotaExceeded";
inline constexpr const char* kPodCreationFailed = "PodCreationFailed";
inline constexpr const char* kClusterCreationFailed = "ClusterCreationFailed";
inline constexpr const char* kSubmitterCreationFailed = "SubmitterCreationFailed";

}  // namespace starforge::reasons
