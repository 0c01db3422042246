// Every label key, annotation key and name format StarForge uses on KubeRay objects, defined once.
#pragma once

namespace starforge::kuberay {

// Labels StarForge puts on what it creates.
inline constexpr const char* kLabelJobId = "starforge/job-id";
inline constexpr const char* kLabelJobName = "starforge/job-name";
inline constexpr const char* kLabelPool = "starforge/pool";
inline constexpr const char* kLabelManagedBy = "app.kubernetes.io/managed-by";
inline constexpr const char* kManagedByValue = "starforge";
inline constexpr const char* kLabelKueueQueue = "kueue.x-k8s.io/queue-name";

// Annotations.
inline constexpr const char* kAnnotationCapsuleSha256 = "starforge/capsule-sha256";
// The user's command, shell-quoted, for people reading the RayJob (the runner does not use it).
inline constexpr const char* kAnnotationEntrypoint = "starforge/entrypoint";

// RayJob names: "sf-" + the job id, ≤ 47 characters (the operator's limit, so that the derived
// `<rayjob>-<rand5>-head-svc` stays a 63-character DNS label).
inline constexpr const char* kRayJobNamePrefix = "sf-";
inline constexpr size_t kMaxRayJobNameLength = 47;

// Pod template pieces.
inline constexpr const char* kHeadContainerName = "ray-head";
inline constexpr const char* kWorkerContainerName = "ray-worker";
inline constexpr const char* kFetchContainerName = "fetch-capsule";
inline constexpr const char* kShmVolume = "shared-mem";
inline constexpr const char* kStorageVolume = "starforge-storage";
inline constexpr const char* kCorpusVolume = "starforge-corpus";
inline constexpr const char* kCapsuleVolume = "starforge-capsule";
inline constexpr const char* kCapsuleDir = "/starforge-capsule";  // same path in every pod
inline constexpr const char* kCorpusSubdir = "corpus";            // <storage mount>/corpus
// FORGE_K8S_S3_CA_CONFIGMAP: the bundle's volume, its key and where every Ray container sees it.
inline constexpr const char* kS3CaVolume = "starforge-s3-ca";
inline constexpr const char* kS3CaKey = "ca.crt";
inline constexpr const char* kS3CaDir = "/etc/starforge/s3-ca";
inline constexpr const char* kGpuResource = "nvidia.com/gpu";
inline constexpr const char* kPoolResourcePrefix = "pool_";  // Ray custom resource per pool

// Ray head ports (named, so that KubeRay's head service exposes them and finds the dashboard).
inline constexpr int kGcsPort = 6379;
inline constexpr int kDashboardPort = 8265;
inline constexpr int kClientPort = 10001;

// The capsule's runner, relative to Ray's working directory (the unpacked capsule). Ray's unzip
// drops mode bits, so it is always started through the interpreter.
inline constexpr const char* kRunnerInterpreter = "python3";
inline constexpr const char* kRunnerPath = ".starforge/runner.pyz";
// `python3 .starforge/runner.pyz run` runs the argv of the capsule's .starforge/jobspec.json.
inline constexpr const char* kRunnerCommand = "run";
// The capsule's authoritative JobSpec, relative to the capsule root.
inline constexpr const char* kCapsuleJobSpecPath = ".starforge/jobspec.json";

// Environment variables StarForge sets for the job (runtimeEnvYAML.env_vars). Users' `env` may
// not set them.
inline constexpr const char* kEnvJobId = "FORGE_JOB_ID";
inline constexpr const char* kEnvStorageRoot = "FORGE_STORAGE_ROOT";
inline constexpr const char* kEnvCapsuleSha256 = "FORGE_CAPSULE_SHA256";
inline constexpr const char* kEnvCorpusDir = "FORGE_CORPUS_DIR";
inline constexpr const char* kEnvNemoRlDir = "FORGE_NEMO_RL_DIR";
// Ray's job supervisor SIGKILLs a stopped job's processes after this many seconds (default 3);
// the runner needs longer to forward SIGTERM, wait its grace period and record the end.
inline constexpr const char* kEnvRayJobStopWait = "RAY_JOB_STOP_WAIT_TIME_S";
inline constexpr const char* kRayJobStopWaitSeconds = "45";

// The RayJob and RayCluster kinds (KubeRay's ray.io/v1 API).
inline constexpr const char* kRayApiGroup = "ray.io";
inline constexpr const char* kRayApiVersion = "ray.io/v1";  // apiVersion: group/version
inline constexpr const char* kRayVersion = "v1";
inline constexpr const char* kRayJobKind = "RayJob";
inline constexpr const char* kRayClusterKind = "RayCluster";

// RayJob status.jobDeploymentStatus values (KubeRay's JobDeploymentStatus;
// docs/upstream-facts.md §2). Pending ones pass through as the job's reason.
inline constexpr const char* kDeploymentInitializing = "Initializing";
inline constexpr const char* kDeploymentRunning = "Running";
inline constexpr const char* kDeploymentComplete = "Complete";
inline constexpr const char* kDeploymentFailed = "Failed";
inline constexpr const char* kDeploymentValidationFailed = "ValidationFailed";
inline constexpr const char* kDeploymentSuspending = "Suspending";
inline constexpr const char* kDeploymentSuspended = "Suspended";
inline constexpr const char* kDeploymentRetrying = "Retrying";
inline constexpr const char* kDeploymentWaiting = "Waiting";
// RayJob status.jobStatus values (Ray's JobStatus).
inline constexpr const char* kRayJobPending = "PENDING";
inline constexpr const char* kRayJobRunning = "RUNNING";
inline constexpr const char* kRayJobSucceeded = "SUCCEEDED";
inline constexpr const char* kRayJobFailed = "FAILED";
inline constexpr const char* kRayJobStopped = "STOPPED";

// Labels and names set by others that StarForge reads (docs/upstream-facts.md §3).
inline constexpr const char* kLabelRayCluster = "ray.io/cluster";     // on the cluster's pods
inline constexpr const char* kLabelRayNodeType = "ray.io/node-type";  // head | worker
inline constexpr const char* kLabelRayGroup = "ray.io/group";         // headgroup | <pool>
inline constexpr const char* kLabelJobNameBatch = "batch.kubernetes.io/job-name";  // submitter pods
inline constexpr const char* kLabelJobNameLegacy = "job-name";  // submitter pods (older clusters)
inline constexpr const char* kSubmitterContainerName = "ray-job-submitter";
inline constexpr const char* kRayJobFinalizer = "ray.io/rayjob-finalizer";
// On the submitter Job (K8sJobMode): the RayJob it was created for.
inline constexpr const char* kLabelOriginatedFrom = "ray.io/originated-from-cr-name";
// The head's Service: "<RayJob or RayCluster name>" + this suffix.
inline constexpr const char* kHeadServiceSuffix = "-head-svc";
// The head container's port names; KubeRay finds the dashboard (and the Service exposes ports)
// by name (docs/upstream-facts.md §3).
inline constexpr const char* kGcsPortName = "gcs-server";
inline constexpr const char* kDashboardPortName = "dashboard";
inline constexpr const char* kClientPortName = "client";

// Node taints the GPU pods StarForge renders tolerate (render.cc: nvidia.com/gpu Exists
// NoSchedule), so they do not count as blocking a GPU node.
inline constexpr const char* kGpuTaintKey = "nvidia.com/gpu";
// Taint effects that keep pods off a node (Kubernetes' core/v1 TaintEffect).
inline constexpr const char* kTaintNoSchedule = "NoSchedule";
inline constexpr const char* kTaintNoExecute = "NoExecute";
// How capacity names a node whose Ready condition is not True (kubectl get nodes says the same).
inline constexpr const char* kNodeNotReady = "NotReady";
// A node's "series" when it has no FORGE_K8S_GPU_NODE_LABEL label (capacity grouping).
inline constexpr const char* kUnlabelledSeries = "";

}  // namespace starforge::kuberay
