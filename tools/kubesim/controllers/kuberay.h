// Shared pieces of kubesim's KubeRay operator (rayjob.cc, raycluster.cc): the behaviour switches
// of --operator-version, label/annotation keys, and the head Service both controllers build
// (KubeRay common/service.go BuildServiceForHeadPod). See docs/kubesim.md and
// docs/upstream-facts.md §3.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "controllers/controller.h"
#include "starforge/kube/resource.h"

namespace kubesim::controllers {

using nlohmann::json;

// The operator's kinds (KubeRay's ray.io/v1 API).
inline const starforge::kube::ResourceRef kRayJobs{"ray.io", "v1", "rayjobs", true, "RayJob"};
inline const starforge::kube::ResourceRef kRayClusters{"ray.io", "v1", "rayclusters", true,
                                                       "RayCluster"};

// What differs between the operator versions kubesim can play (upstream-facts §6 version table).
struct OperatorFeatures {
  std::string kuberay_version = "v1.7.0";
  bool events_api = true;             // v1.7: events.k8s.io/v1 (reportingController, action)
  bool validation_failed = true;      // v1.5: the ValidationFailed state and "<ns>/<name>: " note
  bool prerunning_deadline = true;    // v1.6: preRunningDeadlineSeconds
  bool submission_mode_label = true;  // v1.6: ray.io/job-submission-mode on the RayCluster
  bool gcs_wait_loop = true;          // v1.5: the submitter waits for /api/gcs_healthz
  bool replica_index_label = true;    // v1.6: ray.io/worker-group-replica-index (gate on)
  bool recreate_hash_annotation = true;  // v1.5+: head pod upgrade-strategy hash annotation
  bool status_check_timeout = true;      // v1.7: jobStatusCheckFailureStartTime
  // v1.7: `ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}`; before: `ulimit -n 65536`.
  bool ulimit_env = true;
  // v1.5+: the RayJob mirrors the RayCluster's status while Initializing (v1.4.2 returns before
  // its status update until the cluster is ready, so rayClusterStatus stays zero).
  bool mirror_cluster_status_initializing = true;
  // v1.5+: the RayJob controller's reconcileServices creates "<rayjob>-head-svc" once the job
  // runs; v1.4.2's rayjob_controller.go has no such step (one head service per job, the
  // RayCluster's).
  bool rayjob_head_service = true;

  static OperatorFeatures For(const ControllerFlags& flags);
};

inline constexpr const char* kRayClusterLabel = "ray.io/cluster";
inline constexpr const char* kRayNodeTypeLabel = "ray.io/node-type";
inline constexpr const char* kRayGroupLabel = "ray.io/group";
inline constexpr const char* kRayIdLabel = "ray.io/identifier";
inline constexpr const char* kRayIsNodeLabel = "ray.io/is-ray-node";
inline constexpr const char* kOriginNameLabel = "ray.io/originated-from-cr-name";
inline constexpr const char* kOriginCrdLabel = "ray.io/originated-from-crd";
inline constexpr const char* kSubmissionModeLabel = "ray.io/job-submission-mode";
inline constexpr const char* kAppNameLabel = "app.kubernetes.io/name";
inline constexpr const char* kCreatedByLabel = "app.kubernetes.io/created-by";
inline constexpr const char* kRayJobFinalizer = "ray.io/rayjob-finalizer";

// --reconcile-concurrency: workers of each operator controller (KubeRay's flag of that name,
// MaxConcurrentReconciles of its controllers; Helm `reconcileConcurrency`).
inline constexpr const char* kReconcileConcurrencyFlag = "reconcile-concurrency";

// "<cluster>-head-svc" unless headGroupSpec.headService.metadata.name is set.
std::string HeadServiceName(const json& cluster);
// "<svc>.<ns>.svc.cluster.local" (CLUSTER_DOMAIN is cluster.local here).
std::string HeadFqdn(const json& cluster);
// Service ports by name (head containers[0] named ports, "<n>-port" for unnamed ones, or the
// defaults client/gcs-server/dashboard/metrics/serve; metrics:8080 always).
std::map<std::string, int> HeadServicePorts(const json& cluster);
// The head Service of a RayCluster (headless by default), without owner references.
json BuildHeadService(const json& cluster);

// The Ray dashboard's Jobs API on a head pod (KubeRay dashboardclient), over plain HTTP with a
// 2 s timeout. `base` is "http://IP:PORT".
struct RayJobInfo {
  std::string status;
  std::string message;
  int64_t start_time = 0;  // ms
  int64_t end_time = 0;
};
class DashboardClient {
 public:
  explicit DashboardClient(std::string host, int port);
  // 1: found (info set); 0: 404 (the job does not exist); throws std::runtime_error otherwise.
  int GetJobInfo(const std::string& job_id, RayJobInfo* info);
  // POST /api/jobs/; throws std::runtime_error on failure (an already used submission id counts
  // as success, as KubeRay's client treats it).
  void SubmitJob(const json& request);
  // POST /api/jobs/<id>/stop; errors thrown.
  void StopJob(const std::string& job_id);

 private:
  std::string host_;
  int port_;
};

}  // namespace kubesim::controllers
