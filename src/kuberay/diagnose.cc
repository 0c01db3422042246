#include "starforge/kuberay/diagnose.h"
#include "starforge/common/format.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "starforge/common/json_read.h"
#include "starforge/common/reasons.h"
#include "starforge/kuberay/capacity.h"
#include "starforge/kuberay/constants.h"
#include "starforge/kuberay/status.h"

namespace starforge::kuberay {
namespace {

using json_read::Arr;
using json_read::Field;
using json_read::Int;
using json_read::Label;
using json_read::Name;
using json_read::Namespace;
using json_read::Str;
using nlohmann::json;

// The last `n` non-empty lines of a log, joined with " | ".
std::string LogTail(const std::string& log, size_t n) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    std::string line = OneLine(std::string_view(log).substr(start, end - start));
    if (!line.empty()) lines.push_back(std::move(line));
    start = end + 1;
  }
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) {
    if (!out.empty()) out += " | ";
    out += lines[i];
  }
  return out;
}

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// ---- events ----

// A timestamp as a sortable key: RFC 3339 with the fraction padded to 9 digits, so that
// "…:05Z" (Time) and "…:05.250000Z" (MicroTime) order correctly.
std::string TimeKey(const std::string& t) {
  if (t.size() < 20 || t[19] == 'Z' || t[19] == '+' || t[19] == '-') {
    if (t.size() < 19) return t;
    return t.substr(0, 19) + ".000000000" + t.substr(19);
  }
  if (t[19] != '.') return t;
  size_t end = 20;
  while (end < t.size() && std::isdigit(static_cast<unsigned char>(t[end])) != 0)
    ++end;
  std::string frac = t.substr(20, end - 20);
  frac.resize(9, '0');
  return t.substr(0, 19) + "." + frac + t.substr(end);
}

std::string FirstNonEmpty(std::initializer_list<std::string> values) {
  for (const auto& v : values) {
    if (!v.empty()) return v;
  }
  return "";
}

DiagnosisEvent ToEvent(const json& e) {
  DiagnosisEvent out;
  const json& regarding =
      Field(e, "regarding").is_object() ? Field(e, "regarding") : Field(e, "involvedObject");
  out.object = Str(regarding, "kind") + "/" + Str(regarding, "name");
  out.type = Str(e, "type");
  out.reason = Str(e, "reason");
  out.message = OneLine(FirstNonEmpty({Str(e, "note"), Str(e, "message")}));
  out.source = FirstNonEmpty({Str(e, "reportingController"), Str(e, "reportingComponent"),
                              Str(Field(e, "source"), "component"),
                              Str(Field(e, "deprecatedSource"), "component")});
  const json& series = Field(e, "series");
  out.count = Int(series, "count", Int(e, "count", Int(e, "deprecatedCount", 1)));
  if (out.count < 1) out.count = 1;
  out.first_at =
      FirstNonEmpty({Str(e, "firstTimestamp"), Str(e, "deprecatedFirstTimestamp"),
                     Str(e, "eventTime"), Str(Field(e, "metadata"), "creationTimestamp")});
  out.last_at =
      FirstNonEmpty({Str(series, "lastObservedTime"), Str(e, "lastTimestamp"),
                     Str(e, "deprecatedLastTimestamp"), Str(e, "eventTime"), out.first_at});
  if (out.first_at.empty()) out.first_at = out.last_at;
  return out;
}

// ---- pods ----

const std::set<std::string>& PullReasons() {
  static const std::set<std::string> kReasons = {"ErrImagePull",        "ImagePullBackOff",
                                                 "InvalidImageName",    "ErrImageNeverPull",
                                                 "RegistryUnavailable", "ImageInspectError"};
  return kReasons;
}

// The kubelet's waiting reason for a container whose env or volumes cannot be resolved.
constexpr const char* kCreateContainerConfigError = "CreateContainerConfigError";

// The scheduler's message is about a volume claim (unbound, missing), not about resources.
bool AboutVolumeClaims(const std::string& scheduler_message) {
  return Contains(scheduler_message, "persistentvolumeclaim") ||
         Contains(scheduler_message, "PersistentVolumeClaims");
}

// A cause found in the objects; the lowest rank wins.
struct Finding {
  int rank = 0;
  std::string reason;
  std::string message;
};

enum Rank {
  kImagePull = 10,
  kCapsuleFetch,
  kInitContainer,
  kVolumeMount,
  kContainerConfig,
  kQuota,
  kCreateFailed,
  kContainerFailed,
  kPodFailed,
  kSubmitterFailed,
  kUnschedulable = 30,
};

struct Ctx {
  const DiagnosisInput& in;
  std::vector<DiagnosisEvent> events;
  std::vector<Finding> findings;

  void Add(int rank, std::string reason, std::string message) {
    findings.push_back({rank, std::move(reason), OneLine(message)});
  }
  // Events regarding `object` ("Kind/name") with `reason`, oldest first.
  std::vector<const DiagnosisEvent*> EventsFor(const std::string& object,
                                               std::string_view reason) const {
    std::vector<const DiagnosisEvent*> out;
    for (const auto& e : events) {
      if (e.object == object && e.reason == reason) out.push_back(&e);
    }
    return out;
  }
};

// The image the kubelet is pulling: the container status' (what it resolved), else the spec's.
std::string ContainerImage(const json& pod, const json& status, bool init) {
  if (!Str(status, "image").empty()) return Str(status, "image");
  const std::string name = Str(status, "name");
  for (const json& c : Arr(Field(pod, "spec"), init ? "initContainers" : "containers")) {
    if (Str(c, "name") == name) return Str(c, "image");
  }
  return "";
}

// The pull error from the kubelet's `Failed to pull image "<img>": <err>` event, else the
// container status message.
std::string PullDetail(const Ctx& ctx, const std::string& pod, const json& waiting) {
  std::string detail;
  for (const DiagnosisEvent* e : ctx.EventsFor("Pod/" + pod, kEventFailed)) {
    if (StartsWith(e->message, "Failed to pull image ")) detail = e->message;
  }
  if (!detail.empty()) {
    const size_t colon = detail.find("\": ");
    return colon == std::string::npos ? detail : detail.substr(colon + 3);
  }
  return Str(waiting, "message");
}

void ImagePull(Ctx& ctx, const json& pod, const json& status, bool init) {
  const std::string pod_name = Name(pod);
  const json& waiting = Field(Field(status, "state"), "waiting");
  const std::string detail = PullDetail(ctx, pod_name, waiting);
  ctx.Add(kImagePull, reasons::kImagePullFailed,
          "image \"" + ContainerImage(pod, status, init) + "\" of pod " + pod_name +
              " (container " + Str(status, "name") + ") cannot be pulled: " +
              Str(waiting, "reason") + (detail.empty() ? "" : ": " + detail) +
              "; check the image name and tag, and that the cluster may pull it (registry "
              "access, imagePullSecrets)");
}

// {exit code, reason, message} of a container that ended in failure, or nullopt.
struct Exit {
  int64_t code;
  std::string reason;
  std::string message;
};
// `sticky`: an init container that failed before and runs again (the kubelet retries it) still
// counts as failing: a capsule whose SHA-256 did not match will not match on the next try, and
// the diagnosis must not flip to "Starting" between attempts.
std::optional<Exit> FailedExit(const json& status, bool sticky) {
  const json& state = Field(status, "state");
  const json& terminated = Field(state, "terminated");
  if (terminated.is_object()) {
    const int64_t code = Int(terminated, "exitCode", 0);
    if (code == 0) return std::nullopt;
    return Exit{code, Str(terminated, "reason"), Str(terminated, "message")};
  }
  // Waiting to be restarted (CrashLoopBackOff) after a failure: the last run tells why.
  const json& last = Field(Field(status, "lastState"), "terminated");
  const bool retrying =
      Field(state, "waiting").is_object() || (sticky && Field(state, "running").is_object());
  if (!retrying || !last.is_object()) return std::nullopt;
  const int64_t code = Int(last, "exitCode", 0);
  if (code == 0) return std::nullopt;
  return Exit{code, Str(last, "reason"), Str(last, "message")};
}

std::string ExitText(const Exit& e) {
  return "exit code " + std::to_string(e.code) + (e.reason.empty() ? "" : ", " + e.reason);
}

void ScanInitContainers(Ctx& ctx, const json& pod) {
  const std::string pod_name = Name(pod);
  for (const json& s : Arr(Field(pod, "status"), "initContainerStatuses")) {
    const std::string name = Str(s, "name");
    const json& waiting = Field(Field(s, "state"), "waiting");
    const std::string wreason = Str(waiting, "reason");
    if (PullReasons().count(wreason) != 0) {
      ImagePull(ctx, pod, s, /*init=*/true);
      continue;
    }
    if (wreason == kCreateContainerConfigError) {
      ctx.Add(kContainerConfig, reasons::kContainerConfigError,
              "init container " + name + " of pod " + pod_name +
                  " cannot be configured: " + Str(waiting, "message"));
      continue;
    }
    auto exit = FailedExit(s, /*sticky=*/true);
    if (!exit) continue;
    auto log = ctx.in.init_logs.find(pod_name + "/" + name);
    std::string tail = log == ctx.in.init_logs.end() ? "" : LogTail(log->second, 3);
    if (tail.empty()) tail = OneLine(exit->message);
    if (name == kFetchContainerName) {
      ctx.Add(kCapsuleFetch, reasons::kCapsuleFetchFailed,
              "init container " + name + " of pod " + pod_name + " could not fetch the capsule (" +
                  ExitText(*exit) + "): " + (tail.empty() ? "its log is not available" : tail));
    } else {
      ctx.Add(kInitContainer, reasons::kInitContainerFailed,
              "init container " + name + " of pod " + pod_name + " failed (" + ExitText(*exit) +
                  ")" + (tail.empty() ? "" : ": " + tail));
    }
  }
}

void ScanContainers(Ctx& ctx, const json& pod, bool submitter) {
  const std::string pod_name = Name(pod);
  for (const json& s : Arr(Field(pod, "status"), "containerStatuses")) {
    const std::string name = Str(s, "name");
    const json& waiting = Field(Field(s, "state"), "waiting");
    const std::string wreason = Str(waiting, "reason");
    if (PullReasons().count(wreason) != 0) {
      ImagePull(ctx, pod, s, /*init=*/false);
    } else if (wreason == kCreateContainerConfigError) {
      ctx.Add(kContainerConfig, reasons::kContainerConfigError,
              "container " + name + " of pod " + pod_name +
                  " cannot be configured: " + Str(waiting, "message"));
    } else if (wreason == "CreateContainerError" || wreason == "RunContainerError") {
      ctx.Add(kContainerFailed, reasons::kContainerFailed,
              "container " + name + " of pod " + pod_name + " cannot start: " + wreason + ": " +
                  Str(waiting, "message"));
    } else if (auto exit = FailedExit(s, /*sticky=*/false)) {
      if (submitter) {
        ctx.Add(kSubmitterFailed, reasons::kSubmitterFailed,
                "the submitter pod " + pod_name + " failed (" + ExitText(*exit) +
                    "); see its log (`kubectl logs -n " + Namespace(pod) + " " + pod_name + "`)");
      } else {
        ctx.Add(kContainerFailed, reasons::kContainerFailed,
                "container " + name + " of pod " + pod_name + " keeps failing (" + ExitText(*exit) +
                    (wreason == "CrashLoopBackOff" ? ", CrashLoopBackOff" : "") + ")" +
                    (exit->message.empty() ? "" : ": " + exit->message));
      }
    }
  }
}

// The scheduler's latest word on an unbound pod: the FailedScheduling event or the PodScheduled
// condition. "" when the pod is bound or the scheduler has said nothing.
std::string SchedulerMessage(const Ctx& ctx, const json& pod) {
  if (!Str(Field(pod, "spec"), "nodeName").empty()) return "";
  std::string msg;
  for (const json& c : Arr(Field(pod, "status"), "conditions")) {
    // StarForge's reason is the scheduler's own word for the condition.
    if (Str(c, "type") == "PodScheduled" && Str(c, "status") == "False" &&
        Str(c, "reason") == reasons::kUnschedulable) {
      msg = Str(c, "message");
    }
  }
  auto events = ctx.EventsFor("Pod/" + Name(pod), "FailedScheduling");
  if (!events.empty()) msg = events.back()->message;
  return OneLine(msg);
}

void ScanVolumes(Ctx& ctx, const json& pod, const std::string& scheduler_message) {
  const std::string pod_name = Name(pod);
  if (Contains(scheduler_message, "persistentvolumeclaim \"") &&
      Contains(scheduler_message, "not found")) {
    ctx.Add(kVolumeMount, reasons::kVolumeMountFailed,
            "pod " + pod_name + " cannot be scheduled: " + scheduler_message +
                " Create the PVC in namespace " + Namespace(pod) +
                ", or fix FORGE_K8S_STORAGE_PVC / FORGE_K8S_CORPUS_PVC");
    return;
  }
  if (Contains(scheduler_message, "unbound immediate PersistentVolumeClaims")) {
    ctx.Add(kVolumeMount, reasons::kVolumeMountFailed,
            "pod " + pod_name + " cannot be scheduled: " + scheduler_message +
                " Check the PVC's status and its StorageClass (kubectl describe pvc -n " +
                Namespace(pod) + ")");
    return;
  }
  // The specific mount error beats the kubelet's summary ("Unable to attach or mount volumes").
  std::string specific;
  std::string summary;
  for (const char* reason : {"FailedAttachVolume", "FailedMount"}) {
    for (const DiagnosisEvent* e : ctx.EventsFor("Pod/" + pod_name, reason)) {
      (StartsWith(e->message, "Unable to attach or mount volumes") ? summary : specific) =
          e->message;
    }
  }
  const std::string& msg = specific.empty() ? summary : specific;
  if (!msg.empty()) {
    ctx.Add(kVolumeMount, reasons::kVolumeMountFailed,
            "pod " + pod_name + " cannot mount its volumes: " + msg);
  }
}

void ScanPodEvents(Ctx& ctx, const json& pod) {
  const std::string pod_name = Name(pod);
  // Image pull failures seen only in events (the status has not caught up yet).
  bool pull_in_status = false;
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    for (const json& s : Arr(Field(pod, "status"), list)) {
      pull_in_status |=
          PullReasons().count(Str(Field(Field(s, "state"), "waiting"), "reason")) != 0;
    }
  }
  if (!pull_in_status) {
    for (const DiagnosisEvent* e : ctx.EventsFor("Pod/" + pod_name, kEventFailed)) {
      if (StartsWith(e->message, "Failed to pull image ")) {
        ctx.Add(kImagePull, reasons::kImagePullFailed,
                "pod " + pod_name + ": " + e->message +
                    "; check the image name and tag, and that the cluster may pull it (registry "
                    "access, imagePullSecrets)");
        break;
      }
    }
  }
  auto sandbox = ctx.EventsFor("Pod/" + pod_name, "FailedCreatePodSandBox");
  if (!sandbox.empty()) {
    ctx.Add(kPodFailed, reasons::kPodFailed, "pod " + pod_name + ": " + sandbox.back()->message);
  }
}

void ScanPod(Ctx& ctx, const json& pod, bool submitter) {
  const std::string sched = SchedulerMessage(ctx, pod);
  ScanInitContainers(ctx, pod);
  ScanContainers(ctx, pod, submitter);
  ScanVolumes(ctx, pod, sched);
  ScanPodEvents(ctx, pod);
  const json& status = Field(pod, "status");
  if (Str(status, "phase") == kuberay::kPodFailed && !submitter) {
    ctx.Add(kPodFailed, reasons::kPodFailed,
            "pod " + Name(pod) + " failed" +
                (Str(status, "reason").empty() ? "" : ": " + Str(status, "reason")) +
                (Str(status, "message").empty() ? "" : ": " + Str(status, "message")));
  }
}

// ---- quota and object creation ----

std::string QuotaMessage(const std::string& ns, const std::string& error) {
  const size_t at = error.find("exceeded quota");
  return "a ResourceQuota in namespace " + ns +
         " refuses the job's pods: " + error.substr(at == std::string::npos ? 0 : at) +
         "; free quota or raise it (kubectl describe resourcequota -n " + ns + ")";
}

int64_t DesiredPods(const json& cluster) {
  const json& spec = Field(cluster, "spec");
  int64_t pods = 1;
  for (const json& g : Arr(spec, "workerGroupSpecs")) {
    if (Field(g, "suspend") == json(true)) continue;
    const int64_t min = Int(g, "minReplicas", 0);
    const int64_t max = Int(g, "maxReplicas", 2147483647);
    const int64_t replicas = std::clamp(Int(g, "replicas", min), min, std::max(min, max));
    pods += replicas * std::max<int64_t>(1, Int(g, "numOfHosts", 1));
  }
  return pods;
}

void ScanCreation(Ctx& ctx) {
  const DiagnosisInput& in = ctx.in;
  const std::string ns = Namespace(in.rayjob);
  if (in.raycluster.is_object()) {
    const std::string cluster = Name(in.raycluster);
    bool condition = false;
    for (const json& c : Arr(Field(in.raycluster, "status"), "conditions")) {
      if (Str(c, "type") != "ReplicaFailure" || Str(c, "status") != "True") continue;
      condition = true;
      const std::string msg = Str(c, "message");
      if (Contains(msg, "exceeded quota")) {
        ctx.Add(kQuota, reasons::kQuotaExceeded, QuotaMessage(ns, msg));
      } else {
        ctx.Add(
            kCreateFailed, reasons::kPodCreationFailed,
            "RayCluster " + cluster + " cannot create its pods: " + Str(c, "reason") + ": " + msg);
      }
    }
    // Without the condition (older operators), the events count while pods are missing.
    if (!condition && static_cast<int64_t>(in.cluster_pods.size()) < DesiredPods(in.raycluster)) {
      for (const char* reason : {"FailedToCreateHeadPod", "FailedToCreateWorkerPod"}) {
        auto events = ctx.EventsFor("RayCluster/" + cluster, reason);
        if (events.empty()) continue;
        const std::string& msg = events.back()->message;
        if (Contains(msg, "exceeded quota")) {
          ctx.Add(kQuota, reasons::kQuotaExceeded, QuotaMessage(ns, msg));
        } else {
          ctx.Add(kCreateFailed, reasons::kPodCreationFailed, "RayCluster " + cluster + ": " + msg);
        }
      }
    }
  }
  const std::string rayjob = "RayJob/" + Name(in.rayjob);
  if (!in.raycluster.is_object()) {
    auto events = ctx.EventsFor(rayjob, "FailedToCreateRayCluster");
    if (!events.empty()) {
      ctx.Add(kCreateFailed, reasons::kClusterCreationFailed, events.back()->message);
    }
  }
  if (!in.submitter_job.is_object()) {
    auto events = ctx.EventsFor(rayjob, "FailedToCreateRayJobSubmitter");
    if (!events.empty()) {
      const std::string& msg = events.back()->message;
      if (Contains(msg, "exceeded quota")) {
        ctx.Add(kQuota, reasons::kQuotaExceeded, QuotaMessage(ns, msg));
      } else {
        ctx.Add(kCreateFailed, reasons::kSubmitterCreationFailed, msg);
      }
    }
  } else {
    const std::string job = Name(in.submitter_job);
    if (in.submitter_pods.empty()) {
      auto events = ctx.EventsFor("Job/" + job, "FailedCreate");
      if (!events.empty()) {
        const std::string& msg = events.back()->message;
        if (Contains(msg, "exceeded quota")) {
          ctx.Add(kQuota, reasons::kQuotaExceeded, QuotaMessage(ns, msg));
        } else {
          ctx.Add(kCreateFailed, reasons::kSubmitterCreationFailed,
                  "the submitter Job " + job + " cannot create its pod: " + msg);
        }
      }
    }
    for (const json& c : Arr(Field(in.submitter_job, "status"), "conditions")) {
      if (Str(c, "type") == kJobConditionFailed && Str(c, "status") == "True") {
        ctx.Add(
            kSubmitterFailed, reasons::kSubmitterFailed,
            "the submitter Job " + job + " failed: " + Str(c, "reason") + ": " + Str(c, "message"));
      }
    }
  }
}

// ---- Unschedulable ----

const jobspec::Pool* PoolOf(const DiagnosisInput& in, const json& pod) {
  std::string name = Label(pod, kLabelPool);
  if (name.empty()) {
    const std::string group = Label(pod, kLabelRayGroup);
    if (group == "headgroup" && !in.pools.empty()) return &in.pools.front();
    name = group;
  }
  for (const auto& p : in.pools) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

// "1 node of series h200 is cordoned" / "2 nodes of series h200 have taint x:NoSchedule".
std::string BlockedPhrase(const std::string& why, int64_t n, const std::string& series) {
  std::string subject = Plural(n, "node", "nodes") + " of series " + series;
  if (StartsWith(why, "taint ")) return subject + (n == 1 ? " has " : " have ") + why;
  return subject + (n == 1 ? " is " : " are ") + why;
}

std::string FreeList(std::vector<int64_t> free) {
  std::sort(free.rbegin(), free.rend());
  if (free.size() > 4) {
    int64_t total = 0;
    for (int64_t f : free)
      total += f;
    return std::to_string(free.back()) + "-" + std::to_string(free.front()) + " GPUs free (" +
           std::to_string(total) + " in total)";
  }
  std::string out;
  for (size_t i = 0; i < free.size(); ++i) {
    if (i > 0) out += i + 1 == free.size() ? " and " : ", ";
    out += std::to_string(free[i]);
  }
  return out + (free.size() == 1 && free[0] == 1 ? " GPU free" : " GPUs free");
}

std::string NodeSummary(const SeriesCapacity* s, const std::string& series, int64_t gpus) {
  if (s == nullptr || s->nodes == 0) return "no node of series " + series + " exists";
  std::vector<std::pair<std::string, int64_t>> blocked;  // in order of first appearance
  std::vector<int64_t> free;
  for (const NodeCapacity& n : s->node_detail) {
    if (n.Schedulable()) {
      free.push_back(n.gpu_free);
      continue;
    }
    std::string why = n.blocked.front();
    if (StartsWith(why, kNodeNotReady)) why = kNodeNotReady;
    auto it =
        std::find_if(blocked.begin(), blocked.end(), [&](const auto& b) { return b.first == why; });
    if (it == blocked.end()) {
      blocked.emplace_back(why, 1);
    } else {
      ++it->second;
    }
  }
  std::string out;
  for (const auto& [why, n] : blocked) {
    if (!out.empty()) out += ", ";
    out += BlockedPhrase(why, n, series);
  }
  if (free.empty()) return out;
  if (!out.empty()) out += ", ";
  const int64_t n = static_cast<int64_t>(free.size());
  if (!blocked.empty()) {
    out += n == 1 ? "the other" : "the other " + std::to_string(n);
  } else {
    out += n == 1 ? "the only node of series " + series
                  : "the " + std::to_string(n) + " nodes of series " + series;
  }
  if (gpus == 0) return out + (n == 1 ? " accepts pods" : " accept pods");
  return out + (n == 1 ? " has " : " have ") + FreeList(free);
}

void ScanUnschedulable(Ctx& ctx, const std::vector<const json*>& pods,
                       const std::vector<const json*>& submitter_pods) {
  for (const json* pod : submitter_pods) {
    const std::string msg = SchedulerMessage(ctx, *pod);
    if (msg.empty() || AboutVolumeClaims(msg)) continue;
    ctx.Add(kUnschedulable, reasons::kUnschedulable,
            "the submitter pod " + Name(*pod) + " cannot be scheduled. Scheduler: " + msg);
  }
  std::string scheduler;
  std::vector<const jobspec::Pool*> pools;
  std::map<std::string, int64_t> pool_gpus;  // the pods' own GPU request (0 = passthrough off)
  bool unknown_pool = false;
  for (const json* pod : pods) {
    const std::string msg = SchedulerMessage(ctx, *pod);
    if (msg.empty()) continue;
    if (AboutVolumeClaims(msg)) continue;
    scheduler = msg;
    const jobspec::Pool* pool = PoolOf(ctx.in, *pod);
    if (pool == nullptr) {
      unknown_pool = true;
      continue;
    }
    if (std::find(pools.begin(), pools.end(), pool) == pools.end()) pools.push_back(pool);
    pool_gpus[pool->name] = PodGpuRequest(*pod);
  }
  if (scheduler.empty()) return;
  if (unknown_pool) {
    for (const auto& p : ctx.in.pools) {
      if (std::find(pools.begin(), pools.end(), &p) == pools.end()) pools.push_back(&p);
    }
  }
  const std::vector<SeriesCapacity> capacity =
      ctx.in.capacity ? *ctx.in.capacity
                      : ComputeCapacity(ctx.in.nodes, ctx.in.node_pods, ctx.in.gpu_label);
  std::string computed;
  for (const jobspec::Pool* pool : pools) {
    if (pool->gpu_series.empty()) continue;
    auto it = std::find_if(capacity.begin(), capacity.end(),
                           [&](const SeriesCapacity& s) { return s.series == pool->gpu_series; });
    const int64_t gpus =
        pool_gpus.count(pool->name) != 0 ? pool_gpus[pool->name] : pool->gpus_per_machine;
    if (!computed.empty()) computed += "; ";
    computed += Plural(pool->machines, "machine", "machines") + " of " + pool->gpu_series +
                (gpus > 0 ? " × " + Plural(gpus, "GPU", "GPUs") : "") + " requested; " +
                NodeSummary(it == capacity.end() ? nullptr : &*it, pool->gpu_series, gpus);
  }
  ctx.Add(kUnschedulable, reasons::kUnschedulable,
          computed.empty() ? "Scheduler: " + scheduler : computed + ". Scheduler: " + scheduler);
}

// ---- waiting states ----

bool PodReady(const json& pod) {
  for (const json& c : Arr(Field(pod, "status"), "conditions")) {
    if (Str(c, "type") == "Ready") return Str(c, "status") == "True";
  }
  return false;
}

// What a not-ready pod is doing, for people.
std::string PodProgress(const Ctx& ctx, const json& pod) {
  const std::string name = Name(pod);
  if (Str(Field(pod, "spec"), "nodeName").empty()) return "pod " + name + " is not scheduled yet";
  for (const json& s : Arr(Field(pod, "status"), "initContainerStatuses")) {
    if (Field(Field(s, "state"), "running").is_object()) {
      return "pod " + name + " runs init container " + Str(s, "name");
    }
  }
  // A Pulling event not followed by Pulled or Failed.
  std::string pulling;
  for (const auto& e : ctx.events) {
    if (e.object != "Pod/" + name) continue;
    if (e.reason == "Pulling") pulling = e.message;
    if (e.reason == "Pulled" || e.reason == kEventFailed) pulling.clear();
  }
  if (!pulling.empty()) {
    std::string text = pulling;
    if (!text.empty())
      text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
    return "pod " + name + " is " + text;
  }
  const std::string phase = Str(Field(pod, "status"), "phase");
  if (phase == kPodRunning) return "pod " + name + " is running, Ray is not ready yet";
  for (const json& s : Arr(Field(pod, "status"), "containerStatuses")) {
    const std::string reason = Str(Field(Field(s, "state"), "waiting"), "reason");
    if (!reason.empty()) return "pod " + name + " is " + reason;
  }
  return "pod " + name + " is " + (phase.empty() ? kPodPending : phase);
}

Finding Waiting(const Ctx& ctx, const StatusView& v, const std::vector<const json*>& pods) {
  const DiagnosisInput& in = ctx.in;
  const std::string rayjob = Name(in.rayjob);
  const std::string queue = Label(in.rayjob, kLabelKueueQueue);
  const bool suspended = Field(Field(in.rayjob, "spec"), "suspend") == json(true) ||
                         v.job_deployment_status == kDeploymentSuspended;
  if (suspended && !in.raycluster.is_object()) {
    if (!queue.empty()) {
      return {0, reasons::kQueuedByKueue,
              "queued by Kueue in LocalQueue " + queue +
                  ": the job starts when Kueue admits it (kubectl get workloads -n " +
                  Namespace(in.rayjob) + ")"};
    }
    return {0, kDeploymentSuspended, "RayJob " + rayjob + " is suspended (spec.suspend=true)"};
  }
  if (v.job_deployment_status.empty()) {
    return {0, reasons::kWaitingForOperator,
            "waiting for the KubeRay operator to initialise RayJob " + rayjob +
                "; if this lasts, check that the operator is running and watches namespace " +
                Namespace(in.rayjob)};
  }
  if (v.job_deployment_status == kDeploymentRunning) {
    const std::string cluster = v.ray_cluster_name;
    if (v.ray_job_status == kRayJobPending) {
      return {0, reasons::kWaitingForRuntimeEnv,
              "RayCluster " + cluster +
                  " is ready and the Ray job is submitted; Ray is setting up its runtime "
                  "environment (downloading and unpacking the capsule)"};
    }
    if (!in.submitter_job.is_object()) {
      return {0, reasons::kSubmitting,
              "RayCluster " + cluster + " is ready; waiting for the submitter Job " + rayjob};
    }
    for (const json& pod : in.submitter_pods) {
      if (Str(Field(pod, "status"), "phase") != kPodRunning) {
        return {0, reasons::kSubmitting,
                "RayCluster " + cluster + " is ready; the submitter: " + PodProgress(ctx, pod)};
      }
    }
    return {0, reasons::kSubmitting,
            "RayCluster " + cluster + " is ready; the submitter Job " + rayjob +
                " is submitting the Ray job"};
  }
  if (v.job_deployment_status != kDeploymentInitializing) return {0, v.reason, v.message};
  if (!in.raycluster.is_object()) {
    return {0, reasons::kWaitingForCluster,
            "waiting for the KubeRay operator to create RayCluster " +
                (v.ray_cluster_name.empty() ? std::string("(no name yet)") : v.ray_cluster_name)};
  }
  const std::string cluster = Name(in.raycluster);
  if (pods.empty()) {
    return {0, reasons::kWaitingForCluster, "RayCluster " + cluster + " has no pods yet"};
  }
  int64_t ready = 0;
  const json* first_not_ready = nullptr;
  bool any_bound = false;
  for (const json* pod : pods) {
    if (PodReady(*pod)) {
      ++ready;
    } else if (first_not_ready == nullptr) {
      first_not_ready = pod;
    }
    any_bound |= !Str(Field(*pod, "spec"), "nodeName").empty();
  }
  const int64_t desired = std::max<int64_t>(DesiredPods(in.raycluster), pods.size());
  if (!any_bound) {
    return {0, reasons::kWaitingForCluster,
            "RayCluster " + cluster + ": waiting for the scheduler to place " +
                Plural(static_cast<int64_t>(pods.size()), "pod", "pods")};
  }
  if (first_not_ready == nullptr && ready >= desired) {
    return {0, reasons::kStarting,
            "all " + Plural(desired, "pod", "pods") + " of RayCluster " + cluster +
                " are ready; waiting for the KubeRay operator to submit the Ray job"};
  }
  std::string msg = std::to_string(ready) + " of " + Plural(desired, "pod", "pods") +
                    " of RayCluster " + cluster + " ready";
  if (first_not_ready != nullptr) msg += "; " + PodProgress(ctx, *first_not_ready);
  return {0, reasons::kStarting, msg};
}

// The lowest-ranked finding into `out`; false when there is none.
bool TakeBestFinding(const Ctx& ctx, Diagnosis* out) {
  if (ctx.findings.empty()) return false;
  const Finding& best =
      *std::min_element(ctx.findings.begin(), ctx.findings.end(),
                        [](const Finding& a, const Finding& b) { return a.rank < b.rank; });
  out->reason = best.reason;
  out->message = best.message;
  return true;
}

std::vector<const json*> SortedByName(const std::vector<json>& objects) {
  std::vector<const json*> out;
  for (const json& o : objects)
    out.push_back(&o);
  // The head first, then by name.
  std::sort(out.begin(), out.end(), [](const json* a, const json* b) {
    const bool ha = Label(*a, kLabelRayNodeType) == "head";
    const bool hb = Label(*b, kLabelRayNodeType) == "head";
    if (ha != hb) return ha;
    return Name(*a) < Name(*b);
  });
  return out;
}

}  // namespace

std::vector<DiagnosisEvent> NormalizeEvents(const std::vector<json>& events) {
  // The same Event read through both APIs (or twice): keep one copy per identity.
  std::map<std::string, DiagnosisEvent> by_identity;
  std::vector<DiagnosisEvent> anonymous;
  for (const json& e : events) {
    if (!e.is_object()) continue;
    DiagnosisEvent d = ToEvent(e);
    const json& meta = Field(e, "metadata");
    std::string id = Str(meta, "uid");
    if (id.empty() && !Str(meta, "name").empty()) id = Namespace(e) + "/" + Str(meta, "name");
    if (id.empty()) {
      anonymous.push_back(std::move(d));
      continue;
    }
    auto [it, inserted] = by_identity.emplace(id, d);
    if (!inserted &&
        (d.count > it->second.count || TimeKey(d.last_at) > TimeKey(it->second.last_at))) {
      it->second = std::move(d);
    }
  }
  for (auto& [id, d] : by_identity)
    anonymous.push_back(std::move(d));

  // Distinct Events with the same content: one line, counts added, times widened.
  std::vector<DiagnosisEvent> out;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, size_t> index;
  for (auto& d : anonymous) {
    auto key = std::make_tuple(d.object, d.type, d.reason, d.message);
    auto it = index.find(key);
    if (it == index.end()) {
      index.emplace(key, out.size());
      out.push_back(std::move(d));
      continue;
    }
    DiagnosisEvent& m = out[it->second];
    m.count += d.count;
    if (!d.first_at.empty() && (m.first_at.empty() || TimeKey(d.first_at) < TimeKey(m.first_at))) {
      m.first_at = d.first_at;
    }
    if (TimeKey(d.last_at) > TimeKey(m.last_at)) m.last_at = d.last_at;
  }
  std::stable_sort(out.begin(), out.end(), [](const DiagnosisEvent& a, const DiagnosisEvent& b) {
    return std::make_tuple(TimeKey(a.last_at), TimeKey(a.first_at), a.object, a.reason) <
           std::make_tuple(TimeKey(b.last_at), TimeKey(b.first_at), b.object, b.reason);
  });
  return out;
}

json CompactEvent(const json& e) {
  if (!e.is_object()) return e;
  const DiagnosisEvent d = ToEvent(e);
  const json& meta = Field(e, "metadata");
  json m = json::object();
  for (const char* k : {"name", "namespace", "resourceVersion"}) {
    if (std::string v = Str(meta, k); !v.empty()) m[k] = std::move(v);
  }
  // Without a name, the uid is the Event's only identity (NormalizeEvents).
  if (!m.contains("name") && !Str(meta, "uid").empty()) m["uid"] = Str(meta, "uid");
  const json& about =
      Field(e, "regarding").is_object() ? Field(e, "regarding") : Field(e, "involvedObject");
  json involved = json::object();
  for (const char* k : {"kind", "name"}) {
    if (std::string v = Str(about, k); !v.empty()) involved[k] = std::move(v);
  }
  json out = {{"metadata", std::move(m)}, {"involvedObject", std::move(involved)}};
  auto put = [&out](const char* key, const std::string& value) {
    if (!value.empty()) out[key] = value;
  };
  put("type", d.type);
  put("reason", d.reason);
  put("message", d.message);
  put("reportingComponent", d.source);
  if (d.count > 1) out["count"] = d.count;
  put("firstTimestamp", d.first_at);
  if (d.last_at != d.first_at) put("lastTimestamp", d.last_at);
  return out;
}

json ToJson(const DiagnosisEvent& e) {
  return json{{"type", e.type},        {"reason", e.reason}, {"message", e.message},
              {"object", e.object},    {"source", e.source}, {"count", e.count},
              {"firstAt", e.first_at}, {"lastAt", e.last_at}};
}

json ToJson(const Diagnosis& d) {
  json events = json::array();
  for (const auto& e : d.events)
    events.push_back(ToJson(e));
  return json{{"reason", d.reason}, {"message", d.message}, {"events", events}};
}

Diagnosis DiagnosePod(const DiagnosisInput& in) {
  Diagnosis out;
  Ctx ctx{in, NormalizeEvents(in.events), {}};
  out.events = ctx.events;
  if (in.cluster_pods.empty()) {
    out.reason = reasons::kNotFound;
    out.message = "the pod does not exist";
    return out;
  }
  const json& pod = in.cluster_pods.front();
  ScanPod(ctx, pod, /*submitter=*/false);
  ScanUnschedulable(ctx, {&pod}, {});
  if (TakeBestFinding(ctx, &out)) return out;
  if (PodReady(pod)) return out;
  if (Str(Field(pod, "status"), "phase") == kPodRunning) {
    out.reason = reasons::kRunning;
    out.message = "pod " + Name(pod) +
                  " is running; its server does not answer its readiness "
                  "probe yet";
    return out;
  }
  out.reason = reasons::kStarting;
  out.message = OneLine(PodProgress(ctx, pod));
  return out;
}

Diagnosis Diagnose(const DiagnosisInput& in) {
  Diagnosis out;
  Ctx ctx{in, NormalizeEvents(in.events), {}};
  out.events = ctx.events;
  if (!in.rayjob.is_object()) {
    out.reason = reasons::kNotSubmitted;
    out.message = "the RayJob does not exist";
    return out;
  }
  const StatusView v = ReadStatus(in.rayjob);
  if (v.reason == kDeploymentValidationFailed) {
    out.reason = kDeploymentValidationFailed;
    out.message = OneLine(v.message);
    return out;
  }
  if (v.terminal) return out;  // ReadStatus says why it ended
  if (v.state == RayJobState::kRunning) {
    out.reason = reasons::kRunning;
    return out;
  }
  // Before v1.5 an invalid RayJob only got an event and stayed "".
  for (const char* reason : {"InvalidRayJobSpec", "InvalidRayJobMetadata", "InvalidRayJobStatus"}) {
    auto events = ctx.EventsFor("RayJob/" + Name(in.rayjob), reason);
    if (!events.empty() && v.job_deployment_status.empty()) {
      out.reason = kDeploymentValidationFailed;
      out.message = events.back()->message;
      return out;
    }
  }

  const std::vector<const json*> cluster_pods = SortedByName(in.cluster_pods);
  for (const json* pod : cluster_pods)
    ScanPod(ctx, *pod, /*submitter=*/false);
  for (const json* pod : SortedByName(in.submitter_pods))
    ScanPod(ctx, *pod, /*submitter=*/true);
  ScanCreation(ctx);
  ScanUnschedulable(ctx, cluster_pods, SortedByName(in.submitter_pods));

  if (TakeBestFinding(ctx, &out)) return out;
  Finding w = Waiting(ctx, v, cluster_pods);
  out.reason = w.reason;
  out.message = OneLine(w.message);
  return out;
}

}  // namespace starforge::kuberay
