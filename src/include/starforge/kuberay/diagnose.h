// Why is a RayJob not running? Follows upstream-facts §5's chain (RayJob → RayCluster → its pods →
// the submitter Job and its pods) over objects the caller already has. Pure: no I/O, no clock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/config/config.h"
#include "starforge/jobspec/jobspec.h"
#include "starforge/kuberay/capacity.h"

namespace starforge::kuberay {

struct DiagnosisInput {
  nlohmann::json rayjob;                       // the RayJob (null = not found)
  nlohmann::json raycluster;                   // status.rayClusterName's RayCluster, or null
  std::vector<nlohmann::json> cluster_pods;    // pods labelled ray.io/cluster=<cluster>
  nlohmann::json submitter_job;                // batch/v1 Job named like the RayJob, or null
  std::vector<nlohmann::json> submitter_pods;  // its pods (batch.kubernetes.io/job-name or
                                               // job-name = <rayjob>)
  // Events regarding any of the objects above, core/v1 or events.k8s.io/v1 (mixed is fine).
  std::vector<nlohmann::json> events;
  // Tails of failed init containers' logs, keyed "<pod>/<container>".
  std::map<std::string, std::string> init_logs;
  std::vector<nlohmann::json> nodes;  // every Node
  // Every non-terminal pod bound to a node, any namespace (the capacity view's pods), so the
  // Unschedulable message can say how many GPUs are free. May be empty.
  std::vector<nlohmann::json> node_pods;
  // The capacity view when the caller keeps one (NodeUsageSums): then `nodes` and `node_pods`
  // are not read.
  std::optional<std::vector<SeriesCapacity>> capacity;
  std::string gpu_label = config::kDefaultGpuNodeLabel;  // FORGE_K8S_GPU_NODE_LABEL
  std::vector<jobspec::Pool> pools;                      // the job's pools
};

// One event as users see it (GET /api/v1/jobs/{id}/events, `forge describe`).
struct DiagnosisEvent {
  std::string type;      // Normal | Warning
  std::string reason;    // e.g. FailedScheduling
  std::string message;   // core/v1 message or events.k8s.io note
  std::string object;    // "<Kind>/<name>", e.g. "Pod/sf-abc-x7k2p-head-q9z8w"
  std::string source;    // reportingController / source.component, e.g. "default-scheduler"
  int64_t count = 1;     // repeats (count, deprecatedCount or series.count)
  std::string first_at;  // RFC 3339 ("" when the event carries no time)
  std::string last_at;
  friend bool operator==(const DiagnosisEvent&, const DiagnosisEvent&) = default;
};

struct Diagnosis {
  // CamelCase: ImagePullFailed, CapsuleFetchFailed, InitContainerFailed, VolumeMountFailed,
  // ContainerConfigError, QuotaExceeded, ValidationFailed, SubmitterFailed, Unschedulable,
  // QueuedByKueue, WaitingForOperator, WaitingForCluster, Starting, WaitingForRuntimeEnv,
  // Running, or "" when the RayJob is terminal (ReadStatus tells why).
  std::string reason;
  std::string message;                 // ONE line a user can act on
  std::vector<DiagnosisEvent> events;  // NormalizeEvents(in.events)
};

// Hard failures (image pull, capsule fetch, init container, mount, config, quota, validation)
// beat Unschedulable, which beats the waiting states.
Diagnosis Diagnose(const DiagnosisInput& in);

// Why a standalone pod (a playground's) is not ready, with the same causes and words as for a
// RayJob's pods: hard failures (image pull, mount, config) beat Unschedulable (with the series'
// free GPUs), which beats the waiting states. `in.cluster_pods` holds the one pod (empty = not
// found), `in.pools` its one pool (named by the pod's starforge/pool label); the RayJob fields
// are unused. Running: reason "Running"; a ready pod: reason "".
Diagnosis DiagnosePod(const DiagnosisInput& in);

// core/v1 and events.k8s.io/v1 events as DiagnosisEvents: deduplicated (same object, type,
// reason and message: counts added, times widened), sorted by last time (then first time,
// object, reason). Events without any time sort first.
std::vector<DiagnosisEvent> NormalizeEvents(const std::vector<nlohmann::json>& events);

// An Event cut to what NormalizeEvents reads, each field in one form (core/v1 names): its
// namespace, name and resourceVersion, the object it is about, type, reason, message, source,
// count (when above 1) and times. NormalizeEvents of compacted Events equals that of the
// originals as long as Events of one namespace/name share one uid, as those of one API server do
// (the uid is kept only when there is no name). What an informer caches: about 30 % less memory
// than the Event itself, for some ten thousand Events with 1,000 jobs at once.
nlohmann::json CompactEvent(const nlohmann::json& event);

nlohmann::json ToJson(const DiagnosisEvent& event);  // {type, reason, message, object, source,
                                                     //  count, firstAt, lastAt}
nlohmann::json ToJson(const Diagnosis& diagnosis);   // {reason, message, events: [...]}

}  // namespace starforge::kuberay
