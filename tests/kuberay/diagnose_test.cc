// Diagnose: why a RayJob is not running, from realistic objects and events (docs/upstream-facts.md
// §3, §5; the scheduler's and the kubelet's wording as docs/kuberay-fleet.md "Diagnosis" quotes
// it).
#include "starforge/kuberay/diagnose.h"

#include <gtest/gtest.h>

#include "starforge/kuberay/constants.h"

namespace starforge::kuberay {
namespace {

using nlohmann::json;

const std::string kNs = "starforge";
const std::string kRayJob = "sf-j-1";
const std::string kCluster = "sf-j-1-x7k2p";
const std::string kHead = "sf-j-1-x7k2p-head-q9z8w";
const std::string kWorker = "sf-j-1-x7k2p-train-worker-b4kx2";
const std::string kRollout = "sf-j-1-x7k2p-rollout-worker-m5t7d";
const std::string kImage = "ghcr.io/acme/train:1";

json RayJob(const json& status, const json& extra = json::object()) {
  json rj = {{"apiVersion", "ray.io/v1"},
             {"kind", "RayJob"},
             {"metadata",
              {{"name", kRayJob},
               {"namespace", kNs},
               {"labels", {{kLabelJobId, "j-1"}, {kLabelManagedBy, kManagedByValue}}}}},
             {"spec", {{"entrypoint", "python3 .starforge/runner.pyz run"}}},
             {"status", status}};
  rj.merge_patch(extra);
  return rj;
}

json Initializing() {
  return {{"jobId", "sf-j-1-b9qzt"},
          {"rayClusterName", kCluster},
          {"jobDeploymentStatus", "Initializing"},
          {"startTime", "2026-03-01T10:00:00Z"},
          {"rayJobInfo", json::object()}};
}

json RayCluster(const json& conditions = json::array()) {
  return {
      {"apiVersion", "ray.io/v1"},
      {"kind", "RayCluster"},
      {"metadata", {{"name", kCluster}, {"namespace", kNs}}},
      {"spec",
       {{"headGroupSpec", json::object()},
        {"workerGroupSpecs",
         {{{"groupName", "train"}, {"replicas", 1}, {"minReplicas", 1}, {"maxReplicas", 1}},
          {{"groupName", "rollout"}, {"replicas", 1}, {"minReplicas", 1}, {"maxReplicas", 1}}}}}},
      {"status", {{"conditions", conditions}}}};
}

json Pod(const std::string& name, const std::string& group, const std::string& pool, int gpus,
         const std::string& node, const json& status) {
  json labels = {
      {kLabelRayCluster, kCluster}, {kLabelRayNodeType, group == "headgroup" ? "head" : "worker"},
      {kLabelRayGroup, group},      {"ray.io/is-ray-node", "yes"},
      {kLabelJobId, "j-1"},         {kLabelPool, pool}};
  json container = {{"name", group == "headgroup" ? kHeadContainerName : kWorkerContainerName},
                    {"image", kImage}};
  if (gpus > 0) {
    container["resources"] = {{"limits", {{kGpuResource, std::to_string(gpus)}}},
                              {"requests", {{kGpuResource, std::to_string(gpus)}}}};
  }
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", kNs}, {"labels", labels}}},
              {"spec", {{"containers", {container}}}},
              {"status", status}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

json UnschedulableStatus(const std::string& message) {
  return {{"phase", "Pending"},
          {"conditions",
           {{{"type", "PodScheduled"},
             {"status", "False"},
             {"reason", "Unschedulable"},
             {"message", message}}}}};
}

json WaitingStatus(const std::string& container, const std::string& reason,
                   const std::string& message) {
  json waiting = {{"reason", reason}};
  if (!message.empty()) waiting["message"] = message;
  return {{"phase", "Pending"},
          {"conditions", {{{"type", "PodScheduled"}, {"status", "True"}}}},
          {"containerStatuses",
           {{{"name", container},
             {"image", "ghcr.io/acme/train:1"},
             {"ready", false},
             {"restartCount", 0},
             {"state", {{"waiting", waiting}}}}}}};
}

json RunningStatus(bool ready) {
  return {{"phase", "Running"},
          {"conditions",
           {{{"type", "PodScheduled"}, {"status", "True"}},
            {{"type", "Ready"}, {"status", ready ? "True" : "False"}}}},
          {"containerStatuses",
           {{{"name", "ray-head"}, {"ready", ready}, {"state", {{"running", json::object()}}}}}}};
}

// A kubelet event (core/v1, legacy recorder).
json KubeletEvent(const std::string& pod, const std::string& type, const std::string& reason,
                  const std::string& message, const std::string& first, const std::string& last,
                  int count = 1) {
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"name", pod + "." + reason + first}, {"namespace", kNs}}},
          {"involvedObject",
           {{"kind", "Pod"}, {"name", pod}, {"namespace", kNs}, {"apiVersion", "v1"}}},
          {"type", type},
          {"reason", reason},
          {"message", message},
          {"source", {{"component", "kubelet"}, {"host", "h200-2"}}},
          {"reportingComponent", "kubelet"},
          {"firstTimestamp", first},
          {"lastTimestamp", last},
          {"count", count}};
}

// A scheduler or operator event (events.k8s.io/v1).
json NewEvent(const std::string& kind, const std::string& name, const std::string& type,
              const std::string& reason, const std::string& note, const std::string& controller,
              const std::string& at) {
  return {{"apiVersion", "events.k8s.io/v1"},
          {"kind", "Event"},
          {"metadata", {{"name", name + "." + reason + at}, {"namespace", kNs}}},
          {"regarding", {{"kind", kind}, {"name", name}, {"namespace", kNs}}},
          {"type", type},
          {"reason", reason},
          {"note", note},
          {"action", "Scheduling"},
          {"reportingController", controller},
          {"eventTime", at}};
}

json GpuNode(const std::string& name, const std::string& series, int gpus, bool cordoned = false) {
  json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", name}, {"labels", {{"starforge/gpu-series", series}}}}},
      {"spec", json::object()},
      {"status",
       {{"capacity", {{kGpuResource, std::to_string(gpus)}}},
        {"allocatable", {{kGpuResource, std::to_string(gpus)}}},
        {"conditions", {{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}}}}}}};
  if (cordoned) {
    node["spec"]["unschedulable"] = true;
    node["spec"]["taints"] = {
        {{"key", "node.kubernetes.io/unschedulable"}, {"effect", "NoSchedule"}}};
  }
  return node;
}

json OtherTeamsPod(const std::string& node, int gpus) {
  return {{"metadata", {{"name", "other"}, {"namespace", "research"}}},
          {"spec",
           {{"nodeName", node},
            {"containers",
             {{{"name", "c"},
               {"resources", {{"requests", {{kGpuResource, std::to_string(gpus)}}}}}}}}}},
          {"status", {{"phase", "Running"}}}};
}

std::vector<jobspec::Pool> TwoPools() {
  jobspec::Pool train;
  train.name = "train";
  train.gpu_series = "h200";
  train.machines = 2;
  train.gpus_per_machine = 8;
  jobspec::Pool rollout;
  rollout.name = "rollout";
  rollout.gpu_series = "h100";
  rollout.machines = 1;
  rollout.gpus_per_machine = 4;
  return {train, rollout};
}

// A pending job with a RayCluster whose head and train worker are not scheduled.
DiagnosisInput Base() {
  DiagnosisInput in;
  in.rayjob = RayJob(Initializing());
  in.raycluster = RayCluster();
  in.nodes = {GpuNode("h200-1", "h200", 8, /*cordoned=*/true), GpuNode("h200-2", "h200", 8),
              GpuNode("h100-1", "h100", 4), GpuNode("h100-2", "h100", 4)};
  in.node_pods = {OtherTeamsPod("h200-2", 4)};
  in.pools = TwoPools();
  return in;
}

const std::string kSchedMsg =
    "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable, 2 "
    "node(s) didn't match Pod's node affinity/selector. preemption: 0/4 nodes are available: 1 No "
    "preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling.";

TEST(Diagnose, UnschedulableSaysWhatTheNodesHave) {
  DiagnosisInput in = Base();
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "", UnschedulableStatus(kSchedMsg)),
                     Pod(kWorker, "train", "train", 8, "", UnschedulableStatus(kSchedMsg)),
                     Pod(kRollout, "rollout", "rollout", 4, "h100-1", RunningStatus(false))};
  in.events = {NewEvent("Pod", kHead, "Warning", "FailedScheduling", kSchedMsg, "default-scheduler",
                        "2026-03-01T10:00:05.120000Z")};
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "Unschedulable");
  EXPECT_EQ(d.message,
            "2 machines of h200 × 8 GPUs requested; 1 node of series h200 is cordoned, the other "
            "has 4 GPUs free. Scheduler: " +
                kSchedMsg);
}

TEST(Diagnose, UnschedulableNodeSummaries) {
  struct Case {
    const char* name;
    std::vector<json> nodes;
    std::vector<json> node_pods;
    std::string want;  // the computed part, before ". Scheduler: "
  };
  json not_ready = GpuNode("h200-9", "h200", 8);
  not_ready["status"]["conditions"][0] = {
      {"type", "Ready"}, {"status", "False"}, {"reason", "KubeletNotReady"}};
  const std::vector<Case> cases = {
      {"no node of the series",
       {GpuNode("h100-1", "h100", 4)},
       {},
       "2 machines of h200 × 8 GPUs requested; no node of series h200 exists"},
      {"one node",
       {GpuNode("h200-1", "h200", 8)},
       {OtherTeamsPod("h200-1", 1)},
       "2 machines of h200 × 8 GPUs requested; the only node of series h200 has 7 GPUs free"},
      {"two nodes",
       {GpuNode("h200-1", "h200", 8), GpuNode("h200-2", "h200", 8)},
       {OtherTeamsPod("h200-1", 1), OtherTeamsPod("h200-2", 8)},
       "2 machines of h200 × 8 GPUs requested; the 2 nodes of series h200 have 7 and 0 GPUs free"},
      {"all blocked",
       {GpuNode("h200-1", "h200", 8, true), GpuNode("h200-2", "h200", 8, true), not_ready},
       {},
       "2 machines of h200 × 8 GPUs requested; 2 nodes of series h200 are cordoned, 1 node of "
       "series h200 is NotReady"},
      {"many nodes",
       {GpuNode("a", "h200", 8), GpuNode("b", "h200", 8), GpuNode("c", "h200", 8),
        GpuNode("d", "h200", 8), GpuNode("e", "h200", 8), GpuNode("f", "h200", 8, true)},
       {OtherTeamsPod("a", 8), OtherTeamsPod("b", 8), OtherTeamsPod("c", 7), OtherTeamsPod("d", 2),
        OtherTeamsPod("e", 8)},
       "2 machines of h200 × 8 GPUs requested; 1 node of series h200 is cordoned, the other 5 "
       "have 0-6 GPUs free (7 in total)"},
  };
  for (const auto& c : cases) {
    DiagnosisInput in = Base();
    in.nodes = c.nodes;
    in.node_pods = c.node_pods;
    in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "", UnschedulableStatus(kSchedMsg))};
    const Diagnosis d = Diagnose(in);
    EXPECT_EQ(d.reason, "Unschedulable") << c.name;
    EXPECT_EQ(d.message, c.want + ". Scheduler: " + kSchedMsg) << c.name;
  }
}

TEST(Diagnose, UnschedulableFromEventOnlyAndWithoutGpus) {
  // The scheduler's event arrived before the pod's condition; passthrough off: no GPU request.
  DiagnosisInput in = Base();
  const std::string msg =
      "0/4 nodes are available: 1 node(s) were unschedulable, 3 Insufficient cpu. preemption: "
      "0/4 nodes are available: 4 Preemption is not helpful for scheduling.";
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 0, "", {{"phase", "Pending"}})};
  in.events = {NewEvent("Pod", kHead, "Warning", "FailedScheduling", msg, "default-scheduler",
                        "2026-03-01T10:00:05.000000Z")};
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "Unschedulable");
  EXPECT_EQ(d.message,
            "2 machines of h200 requested; 1 node of series h200 is cordoned, the other accepts "
            "pods. Scheduler: " +
                msg);
}

TEST(Diagnose, ImagePullFailedUsesTheKubeletsError) {
  DiagnosisInput in = Base();
  const std::string err =
      "rpc error: code = NotFound desc = failed to pull and unpack image "
      "\"ghcr.io/acme/train:1\": failed to resolve reference \"ghcr.io/acme/train:1\": "
      "ghcr.io/acme/train:1: not found";
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2",
                         WaitingStatus("ray-head", "ImagePullBackOff",
                                       "Back-off pulling image \"" + kImage + "\"")),
                     // Unschedulable as well: the hard failure wins.
                     Pod(kWorker, "train", "train", 8, "", UnschedulableStatus(kSchedMsg))};
  in.events = {
      KubeletEvent(kHead, "Normal", "Pulling", "Pulling image \"" + kImage + "\"",
                   "2026-03-01T10:00:06Z", "2026-03-01T10:01:10Z", 3),
      KubeletEvent(kHead, "Warning", "Failed", "Failed to pull image \"" + kImage + "\": " + err,
                   "2026-03-01T10:00:07Z", "2026-03-01T10:01:11Z", 3),
      KubeletEvent(kHead, "Warning", "Failed", "Error: ErrImagePull", "2026-03-01T10:00:07Z",
                   "2026-03-01T10:01:11Z", 3),
      KubeletEvent(kHead, "Normal", "BackOff", "Back-off pulling image \"" + kImage + "\"",
                   "2026-03-01T10:00:08Z", "2026-03-01T10:01:30Z", 5),
      KubeletEvent(kHead, "Warning", "Failed", "Error: ImagePullBackOff", "2026-03-01T10:00:08Z",
                   "2026-03-01T10:01:30Z", 5)};
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "ImagePullFailed");
  EXPECT_EQ(d.message, "image \"ghcr.io/acme/train:1\" of pod " + kHead +
                           " (container ray-head) cannot be pulled: ImagePullBackOff: " + err +
                           "; check the image name and tag, and that the cluster may pull it "
                           "(registry access, imagePullSecrets)");
}

TEST(Diagnose, ImagePullFailedWithoutEvents) {
  DiagnosisInput in = Base();
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2",
                         WaitingStatus("ray-head", "ErrImagePull", "manifest unknown"))};
  Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "ImagePullFailed");
  EXPECT_EQ(d.message, "image \"ghcr.io/acme/train:1\" of pod " + kHead +
                           " (container ray-head) cannot be pulled: ErrImagePull: manifest "
                           "unknown; check the image name and tag, and that the cluster may pull "
                           "it (registry access, imagePullSecrets)");
  // The status names the reference the kubelet pulls; without it, the spec's image.
  in.cluster_pods[0]["status"]["containerStatuses"][0]["image"] = "docker.io/acme/train:1";
  d = Diagnose(in);
  EXPECT_EQ(d.message.rfind("image \"docker.io/acme/train:1\" of pod ", 0), 0u) << d.message;
  in.cluster_pods[0]["status"]["containerStatuses"][0].erase("image");
  in.cluster_pods[0]["spec"]["containers"][0]["image"] = "spec/only:2";
  d = Diagnose(in);
  EXPECT_EQ(d.message.rfind("image \"spec/only:2\" of pod ", 0), 0u) << d.message;
}

TEST(Diagnose, ImagePullFailedSeenOnlyInEvents) {
  DiagnosisInput in = Base();
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2", {{"phase", "Pending"}})};
  in.events = {KubeletEvent(kHead, "Warning", "Failed",
                            "Failed to pull image \"" + kImage + "\": not found",
                            "2026-03-01T10:00:07Z", "2026-03-01T10:00:07Z")};
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "ImagePullFailed");
  EXPECT_EQ(d.message, "pod " + kHead +
                           ": Failed to pull image \"ghcr.io/acme/train:1\": not "
                           "found; check the image name and tag, and that the "
                           "cluster may pull it (registry access, imagePullSecrets)");
}

json InitFailedStatus(const std::string& init, int code) {
  return {
      {"phase", "Pending"},
      {"conditions",
       {{{"type", "Initialized"}, {"status", "False"}, {"reason", "ContainersNotInitialized"}}}},
      {"initContainerStatuses",
       {{{"name", init},
         {"ready", false},
         {"restartCount", 2},
         {"state",
          {{"waiting",
            {{"reason", "CrashLoopBackOff"},
             {"message", "back-off 20s restarting failed container=" + init + " pod=" + kHead +
                             "_starforge(uid)"}}}}},
         {"lastState", {{"terminated", {{"exitCode", code}, {"reason", "Error"}}}}}}}},
      {"containerStatuses",
       {{{"name", "ray-head"}, {"state", {{"waiting", {{"reason", "PodInitializing"}}}}}}}}};
}

TEST(Diagnose, CapsuleFetchFailedQuotesTheLog) {
  DiagnosisInput in = Base();
  in.cluster_pods = {
      Pod(kHead, "headgroup", "train", 8, "h200-2", InitFailedStatus(kFetchContainerName, 3)),
      Pod(kWorker, "train", "train", 8, "", UnschedulableStatus(kSchedMsg))};
  const std::string want(64, 'a');
  const std::string got(64, 'b');
  in.init_logs[kHead + "/fetch-capsule"] =
      "fetch-capsule: downloading\n\nfetch-capsule: SHA-256 mismatch: expected " + want + ", got " +
      got + "; the capsule was changed or corrupted in transit\n";
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "CapsuleFetchFailed");
  EXPECT_EQ(d.message, "init container fetch-capsule of pod " + kHead +
                           " could not fetch the capsule (exit code 3, Error): fetch-capsule: "
                           "downloading | fetch-capsule: SHA-256 mismatch: expected " +
                           want + ", got " + got +
                           "; the capsule was changed or corrupted in transit");
}

TEST(Diagnose, CapsuleFetchFailedWithoutLog) {
  DiagnosisInput in = Base();
  json status = InitFailedStatus(kFetchContainerName, 2);
  // restartPolicy Never: the init container's own state is terminated.
  status["initContainerStatuses"][0]["state"] = {
      {"terminated", {{"exitCode", 2}, {"reason", "Error"}}}};
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2", status)};
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "CapsuleFetchFailed");
  EXPECT_EQ(d.message, "init container fetch-capsule of pod " + kHead +
                           " could not fetch the capsule (exit code 2, Error): its log is not "
                           "available");
}

TEST(Diagnose, OtherInitContainerFailed) {
  DiagnosisInput in = Base();
  in.cluster_pods = {
      Pod(kWorker, "train", "train", 8, "h200-2", InitFailedStatus("wait-gcs-ready", 1))};
  in.init_logs[kWorker + "/wait-gcs-ready"] = "ray health-check failed\n";
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "InitContainerFailed");
  EXPECT_EQ(d.message, "init container wait-gcs-ready of pod " + kWorker +
                           " failed (exit code 1, Error): ray health-check failed");
}

TEST(Diagnose, InitContainerRetriedAfterAFailureStillFails) {
  DiagnosisInput in = Base();
  json status = InitFailedStatus(kFetchContainerName, 3);
  status["initContainerStatuses"][0]["state"] = {{"running", json::object()}};  // retried
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2", status)};
  in.init_logs[kHead + "/fetch-capsule"] = "fetch-capsule: SHA-256 mismatch: expected a, got b";
  Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "CapsuleFetchFailed");
  EXPECT_EQ(d.message, "init container fetch-capsule of pod " + kHead +
                           " could not fetch the capsule (exit code 3, Error): fetch-capsule: "
                           "SHA-256 mismatch: expected a, got b");
  // Running for the first time, or done: not a failure.
  status["initContainerStatuses"][0].erase("lastState");
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2", status)};
  d = Diagnose(in);
  EXPECT_EQ(d.reason, "Starting");
  EXPECT_EQ(d.message, "0 of 3 pods of RayCluster " + kCluster + " ready; pod " + kHead +
                           " runs init container fetch-capsule");
  status["initContainerStatuses"][0]["state"] = {
      {"terminated", {{"exitCode", 0}, {"reason", "Completed"}}}};
  status["initContainerStatuses"][0]["lastState"] = {
      {"terminated", {{"exitCode", 3}, {"reason", "Error"}}}};
  status["phase"] = "Running";
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2", status)};
  d = Diagnose(in);
  EXPECT_EQ(d.reason, "Starting");
  EXPECT_EQ(d.message, "0 of 3 pods of RayCluster " + kCluster + " ready; pod " + kHead +
                           " is running, Ray is not ready yet");
}

TEST(Diagnose, MainContainerRunningAgainIsNotAFailure) {
  DiagnosisInput in = Base();
  json status = RunningStatus(false);
  status["containerStatuses"][0]["lastState"] = {
      {"terminated", {{"exitCode", 137}, {"reason", "OOMKilled"}}}};
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2", status)};
  EXPECT_EQ(Diagnose(in).reason, "Starting");
  status["containerStatuses"][0]["state"] = {
      {"waiting",
       {{"reason", "CrashLoopBackOff"},
        {"message",
         "back-off 40s restarting failed container=ray-head pod=" + kHead + "_starforge(uid)"}}}};
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2", status)};
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "ContainerFailed");
  EXPECT_EQ(d.message, "container ray-head of pod " + kHead +
                           " keeps failing (exit code 137, OOMKilled, CrashLoopBackOff)");
}

TEST(Diagnose, VolumeMountFailed) {
  DiagnosisInput in = Base();
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2",
                         WaitingStatus("ray-head", "ContainerCreating", ""))};
  const std::string specific =
      "MountVolume.SetUp failed for volume \"starforge-storage\" : mount failed: exit status 32";
  in.events = {
      KubeletEvent(kHead, "Warning", "FailedMount", specific, "2026-03-01T10:00:06Z",
                   "2026-03-01T10:02:06Z", 4),
      KubeletEvent(kHead, "Warning", "FailedMount",
                   "Unable to attach or mount volumes: unmounted volumes=[starforge-storage], "
                   "unattached volumes=[starforge-storage shared-mem], failed to process "
                   "volumes=[]: timed out waiting for the condition",
                   "2026-03-01T10:02:06Z", "2026-03-01T10:02:06Z")};
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "VolumeMountFailed");
  EXPECT_EQ(d.message, "pod " + kHead + " cannot mount its volumes: " + specific);
}

TEST(Diagnose, VolumeMountFailedSummaryOnlyAndAttach) {
  DiagnosisInput in = Base();
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2",
                         WaitingStatus("ray-head", "ContainerCreating", ""))};
  const std::string attach =
      "Multi-Attach error for volume \"pvc-1234\" Volume is already exclusively attached to one "
      "node and can't be attached to another";
  in.events = {KubeletEvent(kHead, "Warning", "FailedAttachVolume", attach, "2026-03-01T10:00:06Z",
                            "2026-03-01T10:00:06Z")};
  EXPECT_EQ(Diagnose(in).message, "pod " + kHead + " cannot mount its volumes: " + attach);
  // kubesim's kubelet for a missing PVC (only the summary line).
  const std::string summary =
      "Unable to attach or mount volumes: unmounted volumes=[starforge-storage], unattached "
      "volumes=[starforge-storage], failed to process volumes=[starforge-storage]: error "
      "processing PVC starforge/forge-storage: failed to fetch PVC from API server: "
      "persistentvolumeclaims \"forge-storage\" not found";
  in.events = {KubeletEvent(kHead, "Warning", "FailedMount", summary, "2026-03-01T10:00:06Z",
                            "2026-03-01T10:00:06Z")};
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "VolumeMountFailed");
  EXPECT_EQ(d.message, "pod " + kHead + " cannot mount its volumes: " + summary);
}

TEST(Diagnose, MissingPvcBlocksScheduling) {
  DiagnosisInput in = Base();
  const std::string msg =
      "0/4 nodes are available: persistentvolumeclaim \"forge-storage\" not found. preemption: "
      "0/4 nodes are available: 4 Preemption is not helpful for scheduling.";
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "", UnschedulableStatus(msg))};
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "VolumeMountFailed");
  EXPECT_EQ(d.message, "pod " + kHead + " cannot be scheduled: " + msg +
                           " Create the PVC in namespace starforge, or fix FORGE_K8S_STORAGE_PVC "
                           "/ FORGE_K8S_CORPUS_PVC");
}

TEST(Diagnose, ContainerConfigError) {
  DiagnosisInput in = Base();
  in.cluster_pods = {
      Pod(kHead, "headgroup", "train", 8, "h200-2",
          WaitingStatus("ray-head", "CreateContainerConfigError", "secret \"s3-keys\" not found"))};
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "ContainerConfigError");
  EXPECT_EQ(d.message, "container ray-head of pod " + kHead +
                           " cannot be configured: secret \"s3-keys\" not found");
}

const std::string kQuotaErr =
    "pods \"sf-j-1-x7k2p-train-worker-b4kx2\" is forbidden: exceeded quota: gpu-quota, "
    "requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=8, limited: "
    "requests.nvidia.com/gpu=8";

TEST(Diagnose, QuotaExceededFromReplicaFailure) {
  DiagnosisInput in = Base();
  in.raycluster = RayCluster({{{"type", "ReplicaFailure"},
                               {"status", "True"},
                               {"reason", "FailedCreateWorkerPod"},
                               {"message", kQuotaErr}}});
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "", UnschedulableStatus(kSchedMsg))};
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "QuotaExceeded");
  EXPECT_EQ(d.message,
            "a ResourceQuota in namespace starforge refuses the job's pods: exceeded quota: "
            "gpu-quota, requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=8, "
            "limited: requests.nvidia.com/gpu=8; free quota or raise it (kubectl describe "
            "resourcequota -n starforge)");
}

TEST(Diagnose, QuotaExceededFromOperatorEvent) {
  DiagnosisInput in = Base();
  in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2", RunningStatus(false))};
  in.events = {NewEvent(
      "RayCluster", kCluster, "Warning", "FailedToCreateWorkerPod",
      "Failed to create worker Pod for the cluster starforge/" + kCluster + ", " + kQuotaErr,
      "raycluster-controller", "2026-03-01T10:00:03.000000Z")};
  EXPECT_EQ(Diagnose(in).reason, "QuotaExceeded");
  // Once every pod exists, an old event no longer counts.
  in.cluster_pods.push_back(Pod(kWorker, "train", "train", 8, "h200-2", RunningStatus(false)));
  in.cluster_pods.push_back(Pod(kRollout, "rollout", "rollout", 4, "h100-1", RunningStatus(false)));
  EXPECT_EQ(Diagnose(in).reason, "Starting");
}

TEST(Diagnose, OtherPodCreationFailure) {
  DiagnosisInput in = Base();
  in.raycluster = RayCluster({{{"type", "ReplicaFailure"},
                               {"status", "True"},
                               {"reason", "FailedCreateHeadPod"},
                               {"message", "admission webhook \"x\" denied the request: no"}}});
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "PodCreationFailed");
  EXPECT_EQ(d.message, "RayCluster " + kCluster +
                           " cannot create its pods: FailedCreateHeadPod: admission webhook \"x\" "
                           "denied the request: no");
}

TEST(Diagnose, QueuedByKueue) {
  DiagnosisInput in = Base();
  in.rayjob = RayJob(
      {{"jobDeploymentStatus", "Suspended"}, {"startTime", "2026-03-01T10:00:00Z"}},
      {{"metadata", {{"labels", {{kLabelKueueQueue, "team-a"}}}}}, {"spec", {{"suspend", true}}}});
  in.raycluster = nullptr;
  const Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "QueuedByKueue");
  EXPECT_EQ(d.message,
            "queued by Kueue in LocalQueue team-a: the job starts when Kueue admits it (kubectl "
            "get workloads -n starforge)");
}

TEST(Diagnose, WaitingStates) {
  struct Case {
    const char* name;
    DiagnosisInput in;
    std::string reason;
    std::string message;
  };
  std::vector<Case> cases;
  {
    DiagnosisInput in = Base();
    in.rayjob = RayJob(json::object());
    in.raycluster = nullptr;
    cases.push_back({"no status", in, "WaitingForOperator",
                     "waiting for the KubeRay operator to initialise RayJob sf-j-1; if this lasts, "
                     "check that the operator is running and watches namespace starforge"});
  }
  {
    DiagnosisInput in = Base();
    in.raycluster = nullptr;
    cases.push_back({"no cluster", in, "WaitingForCluster",
                     "waiting for the KubeRay operator to create RayCluster " + kCluster});
  }
  {
    DiagnosisInput in = Base();
    cases.push_back(
        {"no pods", in, "WaitingForCluster", "RayCluster " + kCluster + " has no pods yet"});
  }
  {
    DiagnosisInput in = Base();
    in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "", {{"phase", "Pending"}})};
    cases.push_back({"scheduler has not answered", in, "WaitingForCluster",
                     "RayCluster " + kCluster + ": waiting for the scheduler to place 1 pod"});
  }
  {
    DiagnosisInput in = Base();
    in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2", RunningStatus(true)),
                       Pod(kWorker, "train", "train", 8, "h200-2",
                           WaitingStatus("ray-worker", "ContainerCreating", "")),
                       Pod(kRollout, "rollout", "rollout", 4, "h100-1", RunningStatus(true))};
    in.events = {KubeletEvent(kWorker, "Normal", "Pulling", "Pulling image \"" + kImage + "\"",
                              "2026-03-01T10:00:06Z", "2026-03-01T10:00:06Z")};
    cases.push_back({"pulling", in, "Starting",
                     "2 of 3 pods of RayCluster " + kCluster + " ready; pod " + kWorker +
                         " is pulling image \"ghcr.io/acme/train:1\""});
  }
  {
    DiagnosisInput in = Base();
    in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2", RunningStatus(false)),
                       Pod(kWorker, "train", "train", 8, "h200-2", RunningStatus(true)),
                       Pod(kRollout, "rollout", "rollout", 4, "h100-1", RunningStatus(true))};
    cases.push_back({"ray starting", in, "Starting",
                     "2 of 3 pods of RayCluster " + kCluster + " ready; pod " + kHead +
                         " is running, Ray is not ready yet"});
  }
  {
    DiagnosisInput in = Base();
    in.cluster_pods = {Pod(kHead, "headgroup", "train", 8, "h200-2", RunningStatus(true)),
                       Pod(kWorker, "train", "train", 8, "h200-2", RunningStatus(true)),
                       Pod(kRollout, "rollout", "rollout", 4, "h100-1", RunningStatus(true))};
    cases.push_back({"all ready", in, "Starting",
                     "all 3 pods of RayCluster " + kCluster +
                         " are ready; waiting for the KubeRay operator to submit the Ray job"});
  }
  {
    DiagnosisInput in = Base();
    in.rayjob = RayJob(Initializing());
    in.rayjob["status"]["jobDeploymentStatus"] = "Running";
    in.rayjob["status"]["jobStatus"] = "PENDING";
    in.submitter_job = {{"metadata", {{"name", kRayJob}, {"namespace", kNs}}}};
    cases.push_back({"runtime env", in, "WaitingForRuntimeEnv",
                     "RayCluster " + kCluster +
                         " is ready and the Ray job is submitted; Ray is setting up its runtime "
                         "environment (downloading and unpacking the capsule)"});
  }
  {
    DiagnosisInput in = Base();
    in.rayjob = RayJob(Initializing());
    in.rayjob["status"]["jobDeploymentStatus"] = "Running";
    cases.push_back({"submitter not created", in, "Submitting",
                     "RayCluster " + kCluster + " is ready; waiting for the submitter Job sf-j-1"});
    in.submitter_job = {{"metadata", {{"name", kRayJob}, {"namespace", kNs}}}};
    json sub = Pod("sf-j-1-zx8kq", "x", "", 0, "h200-2",
                   WaitingStatus("ray-job-submitter", "ContainerCreating", ""));
    in.submitter_pods = {sub};
    cases.push_back({"submitter starting", in, "Submitting",
                     "RayCluster " + kCluster +
                         " is ready; the submitter: pod sf-j-1-zx8kq is ContainerCreating"});
  }
  for (const auto& c : cases) {
    const Diagnosis d = Diagnose(c.in);
    EXPECT_EQ(d.reason, c.reason) << c.name;
    EXPECT_EQ(d.message, c.message) << c.name;
  }
}

TEST(Diagnose, SubmitterFailures) {
  DiagnosisInput in = Base();
  in.rayjob["status"]["jobDeploymentStatus"] = "Running";
  in.submitter_job = {{"metadata", {{"name", kRayJob}, {"namespace", kNs}}}};
  json status = {{"phase", "Failed"},
                 {"containerStatuses",
                  {{{"name", "ray-job-submitter"},
                    {"state", {{"terminated", {{"exitCode", 1}, {"reason", "Error"}}}}}}}}};
  in.submitter_pods = {Pod("sf-j-1-zx8kq", "x", "", 0, "h200-2", status)};
  Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "SubmitterFailed");
  EXPECT_EQ(d.message,
            "the submitter pod sf-j-1-zx8kq failed (exit code 1, Error); see its log (`kubectl "
            "logs -n starforge sf-j-1-zx8kq`)");

  // The Job cannot create its pod.
  in.submitter_pods.clear();
  in.events.push_back({{"involvedObject", {{"kind", "Job"}, {"name", kRayJob}}},
                       {"type", "Warning"},
                       {"reason", "FailedCreate"},
                       {"message", "Error creating: " + kQuotaErr},
                       {"source", {{"component", "job-controller"}}},
                       {"firstTimestamp", "2026-03-01T10:00:09Z"},
                       {"lastTimestamp", "2026-03-01T10:00:09Z"},
                       {"count", 1}});
  d = Diagnose(in);
  EXPECT_EQ(d.reason, "QuotaExceeded");
}

TEST(Diagnose, ValidationAndTerminalAndRunning) {
  DiagnosisInput in = Base();
  in.rayjob = RayJob({{"jobDeploymentStatus", "ValidationFailed"},
                      {"reason", "ValidationFailed"},
                      {"message",
                       "The RayJob metadata is invalid: RayJob name should be no more "
                       "than 47 characters"}});
  Diagnosis d = Diagnose(in);
  EXPECT_EQ(d.reason, "ValidationFailed");
  EXPECT_EQ(d.message,
            "The RayJob metadata is invalid: RayJob name should be no more than 47 characters");

  // Operators before v1.5 only emitted the event.
  in.rayjob = RayJob(json::object());
  in.events = {NewEvent("RayJob", kRayJob, "Warning", "InvalidRayJobSpec",
                        "starforge/sf-j-1: The RayJob spec is invalid: TTLSecondsAfterFinished "
                        "must be a non-negative integer",
                        "rayjob-controller", "2026-03-01T10:00:00.000000Z")};
  d = Diagnose(in);
  EXPECT_EQ(d.reason, "ValidationFailed");
  EXPECT_EQ(d.message,
            "starforge/sf-j-1: The RayJob spec is invalid: TTLSecondsAfterFinished must be a "
            "non-negative integer");
  EXPECT_EQ(d.events.size(), 1u);

  in.rayjob = RayJob({{"jobDeploymentStatus", "Complete"}, {"jobStatus", "SUCCEEDED"}});
  d = Diagnose(in);
  EXPECT_EQ(d.reason, "");
  EXPECT_EQ(d.message, "");

  in.rayjob = RayJob({{"jobDeploymentStatus", "Running"}, {"jobStatus", "RUNNING"}});
  EXPECT_EQ(Diagnose(in).reason, "Running");

  in.rayjob = nullptr;
  EXPECT_EQ(Diagnose(in).reason, "NotSubmitted");
}

TEST(Diagnose, Priority) {
  // Hard failure > Unschedulable > waiting, whatever the order of the pods.
  DiagnosisInput in = Base();
  in.raycluster = RayCluster({{{"type", "ReplicaFailure"},
                               {"status", "True"},
                               {"reason", "FailedCreateWorkerPod"},
                               {"message", kQuotaErr}}});
  in.cluster_pods = {Pod(kRollout, "rollout", "rollout", 4, "", UnschedulableStatus(kSchedMsg)),
                     Pod(kWorker, "train", "train", 8, "h200-2",
                         WaitingStatus("ray-worker", "ErrImagePull", "not found")),
                     Pod(kHead, "headgroup", "train", 8, "h200-2", RunningStatus(false))};
  EXPECT_EQ(Diagnose(in).reason, "ImagePullFailed");
  in.cluster_pods.erase(in.cluster_pods.begin() + 1);
  EXPECT_EQ(Diagnose(in).reason, "QuotaExceeded");
  in.raycluster = RayCluster();
  EXPECT_EQ(Diagnose(in).reason, "Unschedulable");
  in.cluster_pods.erase(in.cluster_pods.begin());
  EXPECT_EQ(Diagnose(in).reason, "Starting");
}

TEST(NormalizeEvents, MixesBothApisDeduplicatesAndSorts) {
  json scheduler = NewEvent("Pod", kHead, "Warning", "FailedScheduling", kSchedMsg,
                            "default-scheduler", "2026-03-01T10:00:05.120000Z");
  scheduler["series"] = {{"count", 4}, {"lastObservedTime", "2026-03-01T10:02:05.500000Z"}};
  // The same event read through core/v1 (same namespace/name): kept once.
  json scheduler_core = {
      {"metadata", scheduler["metadata"]},
      {"involvedObject", {{"kind", "Pod"}, {"name", kHead}}},
      {"type", "Warning"},
      {"reason", "FailedScheduling"},
      {"message", kSchedMsg},
      {"reportingComponent", "default-scheduler"},
      {"eventTime", "2026-03-01T10:00:05.120000Z"},
      {"series", {{"count", 4}, {"lastObservedTime", "2026-03-01T10:02:05.500000Z"}}}};
  json created = NewEvent("RayJob", kRayJob, "Normal", "CreatedRayCluster",
                          "Created RayCluster starforge/" + kCluster, "rayjob-controller",
                          "2026-03-01T10:00:01.000000Z");
  json kubelet_a = KubeletEvent(kHead, "Normal", "Pulling", "Pulling image \"img\"",
                                "2026-03-01T10:02:05Z", "2026-03-01T10:02:05Z");
  // Two distinct Event objects with the same content: merged.
  json kubelet_b = KubeletEvent(kHead, "Normal", "Pulling", "Pulling image \"img\"",
                                "2026-03-01T10:03:00Z", "2026-03-01T10:04:00Z", 2);
  // A multi-line note becomes one line.
  json multi = NewEvent("RayCluster", kCluster, "Normal", "CreatedHeadPod",
                        "Created head Pod\nstarforge/" + kHead, "raycluster-controller",
                        "2026-03-01T10:00:02Z");
  const auto events =
      NormalizeEvents({kubelet_b, scheduler, created, scheduler_core, kubelet_a, multi});
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].reason, "CreatedRayCluster");
  EXPECT_EQ(events[0].object, "RayJob/sf-j-1");
  EXPECT_EQ(events[0].source, "rayjob-controller");
  EXPECT_EQ(events[0].count, 1);
  EXPECT_EQ(events[0].first_at, "2026-03-01T10:00:01.000000Z");
  EXPECT_EQ(events[1].reason, "CreatedHeadPod");
  EXPECT_EQ(events[1].message, "Created head Pod starforge/" + kHead);
  EXPECT_EQ(events[2].reason, "FailedScheduling");
  EXPECT_EQ(events[2].count, 4);
  EXPECT_EQ(events[2].first_at, "2026-03-01T10:00:05.120000Z");
  EXPECT_EQ(events[2].last_at, "2026-03-01T10:02:05.500000Z");
  EXPECT_EQ(events[2].source, "default-scheduler");
  EXPECT_EQ(events[3].reason, "Pulling");
  EXPECT_EQ(events[3].count, 3);
  EXPECT_EQ(events[3].first_at, "2026-03-01T10:02:05Z");
  EXPECT_EQ(events[3].last_at, "2026-03-01T10:04:00Z");
  EXPECT_EQ(events[3].source, "kubelet");
  EXPECT_EQ(ToJson(events[3]),
            json::parse(R"({"type":"Normal","reason":"Pulling","message":"Pulling image \"img\"",
                "object":"Pod/sf-j-1-x7k2p-head-q9z8w","source":"kubelet","count":3,
                "firstAt":"2026-03-01T10:02:05Z","lastAt":"2026-03-01T10:04:00Z"})"));
}

TEST(NormalizeEvents, DeprecatedFieldsOfEventsApi) {
  json e = {{"apiVersion", "events.k8s.io/v1"},
            {"metadata", {{"name", "x.1"}, {"namespace", kNs}}},
            {"regarding", {{"kind", "Pod"}, {"name", "p"}}},
            {"type", "Warning"},
            {"reason", "BackOff"},
            {"note", "Back-off restarting failed container ray-head in pod p_starforge(uid)"},
            {"deprecatedSource", {{"component", "kubelet"}, {"host", "n1"}}},
            {"deprecatedFirstTimestamp", "2026-03-01T10:00:00Z"},
            {"deprecatedLastTimestamp", "2026-03-01T10:05:00Z"},
            {"deprecatedCount", 7}};
  const auto events = NormalizeEvents({e});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], (DiagnosisEvent{
                           "Warning", "BackOff",
                           "Back-off restarting failed container ray-head in pod p_starforge(uid)",
                           "Pod/p", "kubelet", 7, "2026-03-01T10:00:00Z", "2026-03-01T10:05:00Z"}));
}

// What the fleet's informer caches instead of each Event: the same normalized events, from less.
TEST(CompactEvent, NormalizesAsTheEventItself) {
  json scheduler = NewEvent("Pod", kHead, "Warning", "FailedScheduling", kSchedMsg,
                            "default-scheduler", "2026-03-01T10:00:05.120000Z");
  scheduler["series"] = {{"count", 4}, {"lastObservedTime", "2026-03-01T10:02:05.500000Z"}};
  scheduler["metadata"]["uid"] = "u-1";
  json deprecated = {{"metadata", {{"name", "x.1"}, {"namespace", kNs}, {"uid", "u-2"}}},
                     {"regarding", {{"kind", "Pod"}, {"name", "p"}}},
                     {"type", "Warning"},
                     {"reason", "BackOff"},
                     {"note", "Back-off restarting\nfailed container"},
                     {"deprecatedSource", {{"component", "kubelet"}, {"host", "n1"}}},
                     {"deprecatedFirstTimestamp", "2026-03-01T10:00:00Z"},
                     {"deprecatedLastTimestamp", "2026-03-01T10:05:00Z"},
                     {"deprecatedCount", 7}};
  json timeless = {{"metadata", {{"uid", "u-3"}}},  // no name: the uid is its identity
                   {"involvedObject", {{"kind", "Job"}, {"name", kRayJob}}},
                   {"reason", "Completed"},
                   {"count", 0}};
  json created_only = {{"metadata",
                        {{"name", "c.1"},
                         {"namespace", kNs},
                         {"resourceVersion", "42"},
                         {"creationTimestamp", "2026-03-01T09:00:00Z"}}},
                       {"involvedObject", {{"kind", "RayJob"}, {"name", kRayJob}}},
                       {"type", "Normal"},
                       {"reason", "Created"},
                       {"source", {{"component", "rayjob-controller"}}}};
  const std::vector<json> events = {
      scheduler,
      deprecated,
      timeless,
      created_only,
      KubeletEvent(kHead, "Normal", "Pulling", "Pulling image \"img\"", "2026-03-01T10:03:00Z",
                   "2026-03-01T10:04:00Z", 2),
      KubeletEvent(kHead, "Normal", "Pulling", "Pulling image \"img\"", "2026-03-01T10:02:05Z",
                   "2026-03-01T10:02:05Z")};
  std::vector<json> compacted;
  for (const json& e : events) {
    compacted.push_back(CompactEvent(e));
    EXPECT_EQ(NormalizeEvents({compacted.back()}), NormalizeEvents({e})) << e.dump();
    EXPECT_LT(compacted.back().dump().size(), e.dump().size()) << compacted.back().dump();
  }
  EXPECT_EQ(NormalizeEvents(compacted), NormalizeEvents(events));
  // What an informer and the fleet's index read stays: identity, version, the object.
  const json c = CompactEvent(created_only);
  EXPECT_EQ(c["metadata"], json({{"name", "c.1"}, {"namespace", kNs}, {"resourceVersion", "42"}}));
  EXPECT_EQ(c["involvedObject"], json({{"kind", "RayJob"}, {"name", kRayJob}}));
  EXPECT_EQ(CompactEvent(timeless)["metadata"], json({{"uid", "u-3"}}));
}

}  // namespace
}  // namespace starforge::kuberay
