// The KubeRay RayJob controller (rayjob-controller), after KubeRay v1.7.0
// controllers/ray/rayjob_controller.go (and v1.4.2 where --operator-version v1.4 differs):
// validation, the finalizer, the state machine New → Initializing → Running → Complete/Failed
// (and Suspending/Suspended/Retrying/Waiting), the RayCluster, the submitter Job (K8sJobMode) or
// the operator's own submission (HTTPMode), <rayjob>-head-svc, job status from the head's Ray
// Jobs API, deadlines, TTL cleanup and deletion rules, events. upstream-facts §1.2, §2, §3.1, §5,
// §6, §9.
#include <algorithm>
#include <cstdio>

#include "controllers/controller.h"
#include "controllers/events.h"
#include "controllers/kuberay.h"
#include "controllers/kubeutil.h"
#include "controllers/operator.h"
#include "controllers/reconciler.h"
#include "parse_yaml.h"

namespace kubesim::controllers {

namespace {

namespace kube = starforge::kube;
using std::chrono::milliseconds;

bool IsJobTerminal(const std::string& s) {
  return s == "SUCCEEDED" || s == "FAILED" || s == "STOPPED";
}
bool IsDeploymentTerminal(const std::string& s) {
  return s == "Complete" || s == "Failed";
}

std::string GetS(const json& o, const char* k) {
  auto it = o.find(k);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}
void SetS(json& o, const char* k, const std::string& v) {
  if (v.empty()) {
    o.erase(k);
  } else {
    o[k] = v;
  }
}
int64_t GetI(const json& o, const char* k, int64_t fallback) {
  auto it = o.find(k);
  return it != o.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}
bool Has(const json& o, const char* k) {
  auto it = o.find(k);
  return it != o.end() && !it->is_null();
}

// The zero RayClusterStatus as Go serializes it.
json ZeroClusterStatus() {
  return {{"desiredCPU", "0"},
          {"desiredGPU", "0"},
          {"desiredMemory", "0"},
          {"desiredTPU", "0"},
          {"head", json::object()}};
}

// Fills in what Go's encoding of RayJobStatus always writes (rayJobInfo, rayClusterStatus with
// its Quantity fields and head) and drops empty omitempty strings.
void NormalizeStatus(json& st) {
  if (!st.contains("rayJobInfo") || !st["rayJobInfo"].is_object())
    st["rayJobInfo"] = json::object();
  if (!st.contains("rayClusterStatus") || !st["rayClusterStatus"].is_object()) {
    st["rayClusterStatus"] = ZeroClusterStatus();
  } else {
    json& rcs = st["rayClusterStatus"];
    for (const char* k : {"desiredCPU", "desiredGPU", "desiredMemory", "desiredTPU"})
      if (!rcs.contains(k)) rcs[k] = "0";
    if (!rcs.contains("head")) rcs["head"] = json::object();
  }
  for (const char* k : {"jobStatus", "jobDeploymentStatus", "reason", "message", "jobId",
                        "rayClusterName", "dashboardURL"}) {
    if (st.contains(k) && st[k].is_string() && st[k].get<std::string>().empty()) st.erase(k);
  }
}

// utils.InconsistentRayClusterStatus over the mirrored status.
bool ClusterStatusChanged(const json& a, const json& b) {
  auto field = [](const json& s, const char* k) -> json {
    if (!s.is_object() || !s.contains(k)) return json();
    const json& v = s[k];
    if (v.is_object() && v.empty()) return json();
    if (v.is_string() && v.get<std::string>().empty()) return json();
    if (v.is_number() && v == json(0)) return json();
    return v;
  };
  for (const char* k : {"state", "reason", "readyWorkerReplicas", "availableWorkerReplicas",
                        "desiredWorkerReplicas", "minWorkerReplicas", "maxWorkerReplicas",
                        "endpoints", "head", "conditions"}) {
    if (field(a, k) != field(b, k)) return true;
  }
  return false;
}

class RayJobController : public Controller, public Reconciler {
 public:
  // 16 workers unless --reconcile-concurrency says otherwise (KubeRay's flag defaults to 1):
  // kubesim's reconciles read children through the API and wait on the Ray dashboard (2 s
  // timeout), so hundreds of running RayJobs need them side by side to be looked at within
  // KubeRay's 30 s submitter grace period.
  RayJobController() : Reconciler("rayjob-controller", 16) {}
  ~RayJobController() override { Stop(); }
  void Start(const ControllerContext& ctx) override {
    f_ = OperatorFeatures::For(ctx.flags);
    resync_ = milliseconds(ctx.flags.resync_ms);
    set_workers(PositiveIntFlag(ctx.flags, kReconcileConcurrencyFlag, 16));
    StartReconciler(ctx);
  }
  void Stop() override { StopReconciler(); }

 protected:
  void SetUp() override {
    recorder_ = std::make_unique<EventRecorder>(
        *client_, EventSource{f_.events_api, "rayjob-controller", ""});
    kube::InformerOptions rj;
    rj.resource = kRayJobs;
    rayjobs_ = &AddInformer(rj, EnqueueSelf());
    // Owned objects carry the originated-from labels (RayCluster, submitter Job, head service).
    auto owner = [](const json& o) -> std::string {
      if (Str(o, {"metadata", "labels", kOriginCrdLabel}) != "RayJob") return "";
      const std::string n = Str(o, {"metadata", "labels", kOriginNameLabel});
      return n.empty() ? "" : Str(o, {"metadata", "namespace"}) + "/" + n;
    };
    const std::string sel = std::string(kOriginCrdLabel) + "=RayJob";
    for (auto [r, cache] :
         {std::pair{&kRayClusters, &clusters_}, std::pair{&kube::resources::kJobs, &jobs_},
          std::pair{&kube::resources::kServices, &services_}}) {
      kube::InformerOptions o;
      o.resource = *r;
      o.label_selector = sel;
      *cache = &AddInformer(o, EnqueueMapped(owner));
    }
  }

  // The object of `cache`, else (not cached yet) through the API. KubeRay reads everything
  // through controller-runtime's cache, and so does this controller: the RayJob it reconciles
  // (its GET per reconcile was 6.5 % of kubesim's CPU under a burst of RayJobs: bench/README.md,
  // kuberay_fleet_scale) and its children, the RayCluster, submitter Job and services (three GETs
  // on every 3 s poll of every running RayJob, the part of kubesim's work that grew with N times
  // the time jobs spent running). What it creates has a fixed name and is created only after a
  // miss here was confirmed through the API, so a stale cache delays work but never duplicates
  // it; a stale RayJob only makes the reconcile's write conflict (409, retried).
  // Throws the API's NotFound.
  json CachedOrGet(const kube::Informer* cache, const kube::ResourceRef& r, const std::string& ns,
                   const std::string& name) {
    if (cache != nullptr) {
      if (kube::ObjectPtr o = cache->Find(ns + "/" + name)) return *o;
    }
    return client_->Get(r, ns, name);
  }

  milliseconds Reconcile(const std::string& key) override {
    const std::string ns = key.substr(0, key.find('/'));
    const std::string name = key.substr(key.find('/') + 1);
    json rj;
    try {
      rj = CachedOrGet(rayjobs_, kRayJobs, ns, name);
    } catch (const kube::ApiError& e) {
      if (kube::IsNotFound(e)) return milliseconds(-1);
      throw;
    }
    const std::string managed_by = Str(rj, {"spec", "managedBy"});
    if (!managed_by.empty() && managed_by != "ray.io/kuberay-operator") return milliseconds(-1);
    const json& spec = rj["spec"];
    json old_status = rj.value("status", json::object());
    json st = old_status;

    if (IsDeleting(rj)) {
      if (!IsJobTerminal(GetS(st, "jobStatus"))) StopRayJobBestEffort(rj);
      json fin = json::array();
      for (const json& f : At(rj, {"metadata", "finalizers"}))
        if (f != kRayJobFinalizer) fin.push_back(f);
      rj["metadata"]["finalizers"] = fin;
      client_->Update(kRayJobs, ns, rj);
      return resync_;
    }

    // Validation (before the state switch, on every reconcile).
    std::string vtype;
    const std::string verr = Validate(rj, &vtype);
    if (!verr.empty()) {
      if (!f_.validation_failed) {
        // v1.4: an event on every pass and a requeue; no status.
        const std::string what = vtype == "InvalidRayJobMetadata" ? "metadata"
                                 : vtype == "InvalidRayJobStatus" ? "status"
                                                                  : "spec";
        recorder_->Emit(rj, "Warning", vtype, "",
                        "The RayJob " + what + " is invalid " + ns + "/" + name + ": " + verr);
        return resync_;
      }
      recorder_->Emit(rj, "Warning", vtype, "Validate", ns + "/" + name + ": " + verr);
      st["jobDeploymentStatus"] = "ValidationFailed";
      st["reason"] = "ValidationFailed";
      st["message"] = verr;
      WriteStatusIfChanged(rj, old_status, st);
      return milliseconds(-1);
    }

    const std::string mode = spec.value("submissionMode", "K8sJobMode");
    const std::string jds = GetS(st, "jobDeploymentStatus");
    if (jds.empty()) {
      // New: the finalizer, then ids and Initializing.
      bool has_fin = false;
      for (const json& f : At(rj, {"metadata", "finalizers"}))
        if (f == kRayJobFinalizer) has_fin = true;
      if (!has_fin) {
        json upd = rj;
        if (!upd["metadata"].contains("finalizers") || !upd["metadata"]["finalizers"].is_array())
          upd["metadata"]["finalizers"] = json::array();
        upd["metadata"]["finalizers"].push_back(kRayJobFinalizer);
        rj = client_->Update(kRayJobs, ns, upd);
      }
      InitStatus(rj, st, mode);
    } else if (jds == "Initializing") {
      if (!ToSuspending(spec, st) && !CheckActiveDeadline(spec, st) && !CheckPreRunning(spec, st)) {
        json cluster = GetOrCreateCluster(rj, st);
        bool go_on = true;
        if (GetS(st, "dashboardURL").empty()) {
          if (Str(cluster, {"status", "state"}) != "ready") {
            if (f_.mirror_cluster_status_initializing) {
              st["rayClusterStatus"] = cluster.value("status", json::object());
            }
            go_on = false;
          } else {
            const std::string url = DashboardUrl(cluster);
            if (url.empty()) throw std::runtime_error("dashboard port is not found");
            st["dashboardURL"] = url;
          }
        }
        if (go_on) {
          if (mode == "InteractiveMode") {
            st["jobDeploymentStatus"] = "Waiting";
          } else {
            if (mode == "K8sJobMode") CreateSubmitterIfNeeded(rj, st, cluster);
            st["jobDeploymentStatus"] = "Running";
          }
        }
      }
    } else if (jds == "Waiting") {
      if (!CheckPreRunning(spec, st)) {
        const std::string id = spec.value("jobId", "");
        if (id.empty()) return resync_;
        st["jobId"] = id;
        st["jobDeploymentStatus"] = "Running";
      }
    } else if (jds == "Running") {
      if (!ToSuspending(spec, st) && !CheckActiveDeadline(spec, st) && !CheckGracePeriod(st) &&
          !CheckStatusCheckTimeout(st)) {
        json cluster = GetOrCreateCluster(rj, st);
        if (f_.rayjob_head_service) ReconcileServices(rj, cluster);
        bool done = false;
        int64_t finished_at = -1;
        const bool has_submitter = mode == "K8sJobMode" || mode == "SidecarMode";
        if (mode == "K8sJobMode") {
          done = CheckSubmitter(rj, st, &finished_at);
          if (!done && finished_at >= 0 && NowUnix() >= finished_at + 30) {
            st["jobStatus"] = "FAILED";
            st["jobDeploymentStatus"] = "Failed";
            st["reason"] = "JobDeploymentStatusTransitionGracePeriodExceeded";
            st["message"] = "The RayJob submitter finished at " + GoDateTime(finished_at) +
                            " but the ray job did not reach terminal state within 30s";
            done = true;
          }
        }
        if (!done) {
          RayJobInfo info;
          int found = -1;
          std::string err;
          try {
            DashboardClient dc = Dashboard(cluster, st);
            found = dc.GetJobInfo(GetS(st, "jobId"), &info);
            if (found == 0 && mode == "HTTPMode") {
              try {
                dc.SubmitJob(SubmitRequest(rj, st));
                if (f_.status_check_timeout) st.erase("jobStatusCheckFailureStartTime");
              } catch (const std::exception& e) {
                if (!RecordCheckFailure(st)) return resync_;
              }
              found = -2;  // submitted (or failed to): status as it is now
            }
          } catch (const std::exception& e) {
            err = e.what();
          }
          if (found == -2) {
            // fall through to the status write
          } else if (!err.empty()) {
            if (!RecordCheckFailure(st)) return resync_;
          } else if (found == 0) {
            if (finished_at < 0) return resync_;
            st["jobDeploymentStatus"] = "Failed";
            st["reason"] = "AppFailed";
            st["message"] = "Submitter completed but Ray job not found in RayCluster.";
          } else {
            st.erase("jobStatusCheckFailureStartTime");
            std::string new_jds = "Running";
            std::string reason;
            bool terminal = IsJobTerminal(info.status);
            if (has_submitter) terminal = terminal && finished_at >= 0;
            if (terminal) {
              new_jds = "Complete";
              if (info.status == "FAILED") {
                new_jds = "Failed";
                reason = "AppFailed";
              }
            }
            st["rayClusterStatus"] = cluster.value("status", json::object());
            SetS(st, "jobStatus", info.status);
            st["jobDeploymentStatus"] = new_jds;
            SetS(st, "reason", reason);
            SetS(st, "message", info.message);
            json rji = st.value("rayJobInfo", json::object());
            if (info.start_time != 0) rji["startTime"] = Rfc3339(info.start_time / 1000);
            if (info.end_time != 0) rji["endTime"] = Rfc3339(info.end_time / 1000);
            st["rayJobInfo"] = rji;
          }
        }
      }
    } else if (jds == "Suspending" || jds == "Retrying") {
      const bool cluster_gone = DeleteCluster(rj, st);
      const bool job_gone = DeleteSubmitter(rj, mode);
      if (!cluster_gone || !job_gone) return resync_;
      st["rayClusterStatus"] = ZeroClusterStatus();
      for (const char* k : {"rayClusterName", "dashboardURL", "jobId", "message", "reason",
                            "jobStatusCheckFailureStartTime", "jobStatus"})
        st.erase(k);
      st["rayJobInfo"] = json::object();
      st["jobDeploymentStatus"] = jds == "Suspending" ? "Suspended" : "";
      SetS(st, "jobDeploymentStatus", GetS(st, "jobDeploymentStatus"));
    } else if (jds == "Suspended") {
      if (spec.value("suspend", false)) return milliseconds(-1);
      st.erase("jobStatus");
      st.erase("jobDeploymentStatus");
    } else if (jds == "Complete" || jds == "Failed") {
      return HandleFinished(rj);
    } else if (jds == "ValidationFailed") {
      // Effectively terminal: fixing the spec lands in the default branch (upstream-facts §1.1).
      return resync_;
    } else {
      return resync_;
    }

    CheckBackoffLimit(spec, st);
    WriteStatusIfChanged(rj, old_status, st);
    return resync_;
  }

 private:
  // ---- validation (utils/validation.go) -----------------------------------------------------
  std::string Validate(const json& rj, std::string* type) {
    const std::string spec_prefix = f_.validation_failed ? "The RayJob spec is invalid: " : "";
    const std::string name = Str(rj, {"metadata", "name"});
    *type = "InvalidRayJobMetadata";
    const std::string meta_prefix = f_.validation_failed ? "The RayJob metadata is invalid: " : "";
    if (name.size() > 47) return meta_prefix + "RayJob name should be no more than 47 characters";
    const std::string dns = Dns1035LabelErrors(name);
    if (!dns.empty())
      return meta_prefix + "RayJob name should be a valid DNS1035 label: [" + dns + "]";

    *type = "InvalidRayJobSpec";
    const json& spec = rj.value("spec", json::object());
    const bool suspend = spec.value("suspend", false);
    const bool shutdown = spec.value("shutdownAfterJobFinishes", false);
    const int64_t ttl = GetI(spec, "ttlSecondsAfterFinished", 0);
    const std::string mode = spec.value("submissionMode", "K8sJobMode");
    if (suspend && !shutdown) {
      return spec_prefix +
             "a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended";
    }
    if (ttl < 0) return spec_prefix + "TTLSecondsAfterFinished must be a non-negative integer";
    if (!shutdown && ttl > 0) {
      return spec_prefix +
             "a RayJob with shutdownAfterJobFinishes set to false cannot have "
             "TTLSecondsAfterFinished";
    }
    const json& ds = At(spec, {"deletionStrategy"});
    if (f_.validation_failed && ds.is_object()) {
      const bool legacy = Has(ds, "onSuccess") || Has(ds, "onFailure");
      const json& rules = At(ds, {"deletionRules"});
      const bool have_rules = rules.is_array() && !rules.empty();
      if (have_rules && shutdown) {
        return spec_prefix +
               "spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are "
               "mutually exclusive";
      }
      if (have_rules && legacy) {
        return spec_prefix +
               "Cannot use both legacy onSuccess/onFailure fields and deletionRules "
               "simultaneously";
      }
      if (!legacy && !have_rules) {
        return spec_prefix +
               "DeletionStrategy requires either BOTH onSuccess and onFailure, OR the "
               "deletionRules field (cannot be empty)";
      }
      if (legacy && (!Has(ds, "onSuccess") || !Has(ds, "onFailure"))) {
        return spec_prefix +
               "Both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when "
               "using legacy deletion policies";
      }
    }
    const json& selector = At(spec, {"clusterSelector"});
    const bool selector_mode = selector.is_object() && !selector.empty();
    if (suspend && selector_mode) {
      return spec_prefix + "the ClusterSelector mode doesn't support the suspend operation";
    }
    if (!Has(spec, "rayClusterSpec") && !selector_mode) {
      return spec_prefix + "one of RayClusterSpec or ClusterSelector must be set";
    }
    const json& backoff = At(spec, {"backoffLimit"});
    const int64_t backoff_limit = backoff.is_number_integer() ? backoff.get<int64_t>() : 0;
    if (selector_mode) {
      if (Str(selector, {"ray.io/cluster"}).empty())
        return "cluster name in ClusterSelector should not be empty";
      if (mode == "SidecarMode") return "ClusterSelector is not supported in SidecarMode";
      if (backoff_limit > 0)
        return spec_prefix + "BackoffLimit is incompatible with ClusterSelector mode";
    }
    if (mode == "InteractiveMode" && backoff_limit > 0) {
      return spec_prefix + "BackoffLimit is incompatible with InteractiveMode";
    }
    const json& rcs = At(spec, {"rayClusterSpec"});
    if (rcs.is_object()) {
      const json& hc = At(rcs, {"headGroupSpec", "template", "spec", "containers"});
      if (!hc.is_array() || hc.empty()) {
        return spec_prefix + "headGroupSpec should have at least one container";
      }
      const bool autoscaling = rcs.value("enableInTreeAutoscaling", false);
      for (const json& g : rcs.value("workerGroupSpecs", json::array())) {
        const std::string gn = g.value("groupName", "");
        const json& wc = At(g, {"template", "spec", "containers"});
        if (!wc.is_array() || wc.empty()) {
          return spec_prefix + "workerGroupSpec should have at least one container";
        }
        if (!autoscaling && (!Has(g, "minReplicas") || !Has(g, "maxReplicas"))) {
          return spec_prefix + "worker group " + gn +
                 " must set both minReplicas and maxReplicas when autoscaling is disabled";
        }
        const int64_t mn = GetI(g, "minReplicas", 0);
        const int64_t mx = GetI(g, "maxReplicas", 0);
        if (mn < 0)
          return spec_prefix + "worker group " + gn + " has negative minReplicas " +
                 std::to_string(mn);
        if (mx < 0)
          return spec_prefix + "worker group " + gn + " has negative maxReplicas " +
                 std::to_string(mx);
        if (Has(g, "minReplicas") && Has(g, "maxReplicas") && mn > mx) {
          return spec_prefix + "worker group " + gn + " has minReplicas " + std::to_string(mn) +
                 " greater than maxReplicas " + std::to_string(mx);
        }
      }
    }
    const std::string rt = spec.value("runtimeEnvYAML", "");
    if (!rt.empty()) {
      std::string yerr;
      try {
        json v = kubesim::ParseYamlOrThrow(rt);
        if (!v.is_object() && !v.is_null()) {
          yerr = "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal " +
                 std::string(v.is_array()    ? "array"
                             : v.is_string() ? "string"
                                             : "number") +
                 " into Go value of type types.RuntimeEnvType";
        }
      } catch (const std::exception& e) {
        yerr = std::string("error converting YAML to JSON: yaml: ") + e.what();
      }
      if (!yerr.empty()) return "failed to unmarshal RuntimeEnvYAML: " + rt + ": " + yerr;
    }
    if (Has(spec, "activeDeadlineSeconds") && GetI(spec, "activeDeadlineSeconds", 0) <= 0) {
      return spec_prefix + "activeDeadlineSeconds must be a positive integer";
    }
    if (f_.prerunning_deadline && Has(spec, "preRunningDeadlineSeconds") &&
        GetI(spec, "preRunningDeadlineSeconds", 0) <= 0) {
      return spec_prefix + "preRunningDeadlineSeconds must be a positive integer";
    }
    if (backoff.is_number_integer() && backoff_limit < 0) {
      return spec_prefix + "backoffLimit must be a positive integer";
    }
    *type = "InvalidRayJobStatus";
    if (Str(rj, {"status", "jobDeploymentStatus"}) == "Waiting" && mode != "InteractiveMode") {
      return std::string(f_.validation_failed ? "The RayJob status is invalid: " : "") +
             "JobDeploymentStatus cannot be `Waiting` when SubmissionMode is not InteractiveMode";
    }
    type->clear();
    return "";
  }

  // ---- state helpers ------------------------------------------------------------------------
  void InitStatus(const json& rj, json& st, const std::string& mode) {
    const json& spec = rj["spec"];
    const bool should = GetS(st, "jobId").empty() || GetS(st, "rayClusterName").empty() ||
                        GetS(st, "jobStatus").empty();
    if (!should) return;
    const std::string name = Str(rj, {"metadata", "name"});
    if (mode != "InteractiveMode" && GetS(st, "jobId").empty()) {
      const std::string id = spec.value("jobId", "");
      st["jobId"] = id.empty() ? name + "-" + Rand5() : id;
    }
    if (GetS(st, "rayClusterName").empty()) {
      const std::string sel = Str(spec, {"clusterSelector", "ray.io/cluster"});
      st["rayClusterName"] = sel.empty() ? name + "-" + Rand5() : sel;
    }
    st["jobDeploymentStatus"] = "Initializing";
    st["startTime"] = NowRfc3339();
  }

  static bool ToSuspending(const json& spec, json& st) {
    if (!spec.value("suspend", false)) return false;
    const std::string jds = GetS(st, "jobDeploymentStatus");
    if (jds != "Running" && jds != "Initializing") return false;
    st["jobDeploymentStatus"] = "Suspending";
    return true;
  }

  static bool CheckActiveDeadline(const json& spec, json& st) {
    if (!Has(spec, "activeDeadlineSeconds")) return false;
    const int64_t ads = GetI(spec, "activeDeadlineSeconds", 0);
    const int64_t start = ParseRfc3339(GetS(st, "startTime"));
    if (NowUnix() < start + ads) return false;
    st["jobDeploymentStatus"] = "Failed";
    st["reason"] = "DeadlineExceeded";
    st["message"] =
        "The RayJob has passed the activeDeadlineSeconds. StartTime: " + GoTimeString(start) +
        ". ActiveDeadlineSeconds: " + std::to_string(ads);
    return true;
  }

  bool CheckPreRunning(const json& spec, json& st) const {
    if (!f_.prerunning_deadline || !Has(spec, "preRunningDeadlineSeconds")) return false;
    const int64_t d = GetI(spec, "preRunningDeadlineSeconds", 0);
    const int64_t start = ParseRfc3339(GetS(st, "startTime"));
    if (NowUnix() < start + d) return false;
    st["jobDeploymentStatus"] = "Failed";
    st["reason"] = "PreRunningDeadlineExceeded";
    st["message"] =
        "The RayJob has passed the preRunningDeadlineSeconds. StartTime: " + GoTimeString(start) +
        ". PreRunningDeadlineSeconds: " + std::to_string(d);
    return true;
  }

  // RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS (300).
  static bool CheckGracePeriod(json& st) {
    const std::string js = GetS(st, "jobStatus");
    if (!IsJobTerminal(js) || GetS(st, "jobDeploymentStatus") != "Running") return false;
    const std::string end = Str(st, {"rayJobInfo", "endTime"});
    if (end.empty() || NowUnix() < ParseRfc3339(end) + 300) return false;
    st["jobDeploymentStatus"] = js == "FAILED" ? "Failed" : "Complete";
    st["reason"] = "JobDeploymentStatusTransitionGracePeriodExceeded";
    st["message"] =
        "JobDeploymentStatus does not transition to Complete or Failed within the grace period "
        "after JobStatus reaches a terminal state.";
    return true;
  }

  // RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS (300), v1.7.
  bool CheckStatusCheckTimeout(json& st) const {
    if (!f_.status_check_timeout) return false;
    const std::string t = GetS(st, "jobStatusCheckFailureStartTime");
    if (t.empty()) return false;
    const int64_t start = ParseRfc3339(t);
    if (NowUnix() < start + 300) return false;
    st["jobDeploymentStatus"] = "Failed";
    st["reason"] = "JobStatusCheckTimeoutExceeded";
    st["message"] = "Job status checks have been failing since " + GoDateTime(start) +
                    "; exceeded timeout of 300s";
    return true;
  }

  // True when the status must be written (the failure start time was just recorded).
  bool RecordCheckFailure(json& st) const {
    if (!f_.status_check_timeout || !GetS(st, "jobStatusCheckFailureStartTime").empty())
      return false;
    st["jobStatusCheckFailureStartTime"] = NowRfc3339();
    return true;
  }

  static void CheckBackoffLimit(const json& spec, json& st) {
    int64_t failed = GetI(st, "failed", 0);
    int64_t succeeded = GetI(st, "succeeded", 0);
    const std::string jds = GetS(st, "jobDeploymentStatus");
    if (jds == "Failed") ++failed;
    if (GetS(st, "jobStatus") == "SUCCEEDED" && jds == "Complete") ++succeeded;
    st["failed"] = failed;
    st["succeeded"] = succeeded;
    if (jds == "Failed" && Has(spec, "backoffLimit") &&
        failed < GetI(spec, "backoffLimit", 0) + 1) {
      const std::string reason = GetS(st, "reason");
      if (reason == "DeadlineExceeded" || reason == "JobStatusCheckTimeoutExceeded") return;
      st["jobDeploymentStatus"] = "Retrying";
    }
  }

  // updateRayJobStatus: one of jobStatus, jobDeploymentStatus, the mirrored cluster status or the
  // check-failure time changed → endTime when terminal, then PUT /status.
  void WriteStatusIfChanged(const json& rj, const json& old_st, json& st) {
    const bool changed = GetS(old_st, "jobStatus") != GetS(st, "jobStatus") ||
                         GetS(old_st, "jobDeploymentStatus") != GetS(st, "jobDeploymentStatus") ||
                         ClusterStatusChanged(old_st.value("rayClusterStatus", json::object()),
                                              st.value("rayClusterStatus", json::object())) ||
                         GetS(old_st, "jobStatusCheckFailureStartTime") !=
                             GetS(st, "jobStatusCheckFailureStartTime");
    if (!changed) return;
    if (IsDeploymentTerminal(GetS(st, "jobDeploymentStatus"))) st["endTime"] = NowRfc3339();
    NormalizeStatus(st);
    json upd = rj;
    upd["status"] = st;
    client_->UpdateStatus(kRayJobs, Str(rj, {"metadata", "namespace"}), upd);
  }

  // ---- children -----------------------------------------------------------------------------
  json GetOrCreateCluster(const json& rj, const json& st) {
    const std::string ns = Str(rj, {"metadata", "namespace"});
    const std::string cname = GetS(st, "rayClusterName");
    try {
      return CachedOrGet(clusters_, kRayClusters, ns, cname);
    } catch (const kube::ApiError& e) {
      if (!kube::IsNotFound(e)) throw;
    }
    const json& spec = rj["spec"];
    if (At(spec, {"clusterSelector"}).is_object() && !At(spec, {"clusterSelector"}).empty()) {
      recorder_->Emit(rj, "Warning", "RayClusterNotFound", "Validate",
                      "RayCluster " + ns + "/" + cname +
                          " set in the clusterSelector is not found. It must be created manually");
      throw std::runtime_error("clusterSelector mode is enabled, but RayCluster " + ns + "/" +
                               cname + " is not found");
    }
    json labels =
        At(rj, {"metadata", "labels"}).is_object() ? rj["metadata"]["labels"] : json::object();
    labels[kOriginNameLabel] = Str(rj, {"metadata", "name"});
    labels[kOriginCrdLabel] = "RayJob";
    if (f_.submission_mode_label)
      labels[kSubmissionModeLabel] = spec.value("submissionMode", "K8sJobMode");
    json md = {{"name", cname},
               {"namespace", ns},
               {"labels", labels},
               {"ownerReferences", json::array({ControllerRef(rj)})}};
    const json& ann = At(rj, {"metadata", "annotations"});
    if (ann.is_object() && !ann.empty()) md["annotations"] = ann;
    json cluster = {{"apiVersion", "ray.io/v1"},
                    {"kind", "RayCluster"},
                    {"metadata", md},
                    {"spec", spec.value("rayClusterSpec", json::object())}};
    try {
      cluster = client_->Create(kRayClusters, ns, cluster);
    } catch (const kube::ApiError& e) {
      recorder_->Emit(rj, "Warning", "FailedToCreateRayCluster", "Create",
                      "Failed to create RayCluster " + ns + "/" + cname + ": " + e.message());
      throw;
    }
    recorder_->Emit(rj, "Normal", "CreatedRayCluster", "Create",
                    "Created RayCluster " + ns + "/" + cname);
    return cluster;
  }

  std::string DashboardUrl(const json& cluster) {
    // The RayCluster's head service carries no originated-from label: a miss, read through the
    // API (once per RayJob).
    json svc = CachedOrGet(services_, kube::resources::kServices,
                           Str(cluster, {"metadata", "namespace"}), HeadServiceName(cluster));
    for (const json& p : At(svc, {"spec", "ports"})) {
      if (p.value("name", "") == "dashboard") {
        return Str(svc, {"metadata", "name"}) + "." + Str(svc, {"metadata", "namespace"}) +
               ".svc.cluster.local:" + std::to_string(p.value("port", 0));
      }
    }
    return "";
  }

  // The head pod's dashboard: status.podIP and the dashboard port (or --ray-dashboard-port).
  DashboardClient Dashboard(const json& cluster, const json& st) {
    std::string ip = Str(cluster, {"status", "head", "podIP"});
    if (ip.empty()) {
      kube::ListOptions lo;
      lo.label_selector = std::string(kRayClusterLabel) + "=" + Str(cluster, {"metadata", "name"}) +
                          "," + kRayNodeTypeLabel + "=head";
      json pods =
          client_->List(kube::resources::kPods, Str(cluster, {"metadata", "namespace"}), lo);
      for (const json& p : pods["items"]) {
        ip = Str(p, {"status", "podIP"});
        if (!ip.empty()) break;
      }
    }
    if (ip.empty()) throw std::runtime_error("the head pod has no IP yet");
    int port = ctx_.flags.ray_dashboard_port;
    if (port <= 0) {
      const std::string url = GetS(st, "dashboardURL");
      const auto colon = url.rfind(':');
      port = colon == std::string::npos ? 8265 : std::atoi(url.c_str() + colon + 1);
    }
    return DashboardClient(ip, port);
  }

  void StopRayJobBestEffort(const json& rj) {
    try {
      json st = rj.value("status", json::object());
      if (GetS(st, "rayClusterName").empty() || GetS(st, "jobId").empty()) return;
      json cluster = CachedOrGet(clusters_, kRayClusters, Str(rj, {"metadata", "namespace"}),
                                 GetS(st, "rayClusterName"));
      Dashboard(cluster, st).StopJob(GetS(st, "jobId"));
    } catch (const std::exception&) {
      // best effort (KubeRay logs and goes on)
    }
  }

  json SubmitRequest(const json& rj, const json& st) {
    const json& spec = rj["spec"];
    json req = {{"entrypoint", spec.value("entrypoint", "")}};
    if (!GetS(st, "jobId").empty()) req["submission_id"] = GetS(st, "jobId");
    const std::string rt = spec.value("runtimeEnvYAML", "");
    if (!rt.empty()) {
      json env = kubesim::ParseYamlOrThrow(rt);
      if (env.is_object() && !env.empty()) req["runtime_env"] = env;
    }
    if (At(spec, {"metadata"}).is_object() && !spec["metadata"].empty())
      req["metadata"] = spec["metadata"];
    if (spec.contains("entrypointNumCpus") && spec["entrypointNumCpus"].is_number() &&
        spec["entrypointNumCpus"].get<double>() != 0) {
      req["entrypoint_num_cpus"] = spec["entrypointNumCpus"];
    }
    if (spec.contains("entrypointNumGpus") && spec["entrypointNumGpus"].is_number() &&
        spec["entrypointNumGpus"].get<double>() != 0) {
      req["entrypoint_num_gpus"] = spec["entrypointNumGpus"];
    }
    const std::string res = spec.value("entrypointResources", "");
    if (!res.empty()) {
      json r = json::parse(res, nullptr, false);
      if (r.is_object() && !r.empty()) req["entrypoint_resources"] = r;
    }
    return req;
  }

  // common/job.go BuildJobSubmitCommand (K8sJobMode).
  std::string SubmitCommand(const json& rj, const json& st) {
    const json& spec = rj["spec"];
    std::string address = GetS(st, "dashboardURL");
    if (address.rfind("http://", 0) != 0) address = "http://" + address;
    const std::string job_id = GetS(st, "jobId");
    std::string entrypoint = spec.value("entrypoint", "");
    const auto b = entrypoint.find_first_not_of(" \t\n\r\v\f");
    const auto e = entrypoint.find_last_not_of(" \t\n\r\v\f");
    entrypoint = b == std::string::npos ? "" : entrypoint.substr(b, e - b + 1);
    std::vector<std::string> cmd;
    if (f_.gcs_wait_loop) {
      const std::string health =
          "python -c \"import urllib.request; r=urllib.request.urlopen('" + address +
          "/api/gcs_healthz', timeout=10); exit(0 if b'success' in r.read() else 1)\"";
      for (const std::string& s :
           {std::string("until"), health, std::string(">/dev/null"), std::string("2>&1"),
            std::string(";"), std::string("do"), std::string("echo"),
            GoQuote("Waiting for Ray Dashboard GCS to become healthy at " + address + " ..."),
            std::string(";"), std::string("sleep"), std::string("2"), std::string(";"),
            std::string("done"), std::string(";")})
        cmd.push_back(s);
    }
    for (const char* s : {"if", "!", "ray", "job", "status", "--address"})
      cmd.push_back(s);
    cmd.push_back(address);
    cmd.push_back(job_id);
    for (const char* s : {">/dev/null", "2>&1", ";", "then", "ray", "job", "submit", "--address"})
      cmd.push_back(s);
    cmd.push_back(address);
    cmd.push_back("--no-wait");
    const std::string rt = spec.value("runtimeEnvYAML", "");
    if (!rt.empty()) {
      cmd.push_back("--runtime-env-json");
      cmd.push_back(GoQuote(YamlToJson(rt)));
    }
    if (At(spec, {"metadata"}).is_object() && !spec["metadata"].empty()) {
      cmd.push_back("--metadata-json");
      cmd.push_back(GoQuote(GoJsonMarshal(spec["metadata"])));
    }
    if (!job_id.empty()) {
      cmd.push_back("--submission-id");
      cmd.push_back(job_id);
    }
    auto float_flag = [&](const char* field, const char* flag) {
      if (spec.contains(field) && spec[field].is_number() && spec[field].get<double>() > 0) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%f", static_cast<double>(spec[field].get<float>()));
        cmd.push_back(flag);
        cmd.push_back(buf);
      }
    };
    float_flag("entrypointNumCpus", "--entrypoint-num-cpus");
    float_flag("entrypointNumGpus", "--entrypoint-num-gpus");
    const std::string res = spec.value("entrypointResources", "");
    if (!res.empty()) {
      cmd.push_back("--entrypoint-resources");
      cmd.push_back(GoQuote(res));
    }
    for (const char* s : {"--"})
      cmd.push_back(s);
    cmd.push_back(entrypoint);
    for (const char* s : {";", "fi", ";", "ray", "job", "logs", "--address"})
      cmd.push_back(s);
    cmd.push_back(address);
    cmd.push_back("--follow");
    cmd.push_back(job_id);
    std::string out;
    for (const std::string& s : cmd)
      out += (out.empty() ? "" : " ") + s;
    return out;
  }

  void CreateSubmitterIfNeeded(const json& rj, const json& st, const json& cluster) {
    const std::string ns = Str(rj, {"metadata", "namespace"});
    const std::string name = Str(rj, {"metadata", "name"});
    try {
      CachedOrGet(jobs_, kube::resources::kJobs, ns, name);
      return;
    } catch (const kube::ApiError& e) {
      if (!kube::IsNotFound(e)) throw;
    }
    const json& spec = rj["spec"];
    json tmpl;
    if (At(spec, {"submitterPodTemplate"}).is_object()) {
      tmpl = spec["submitterPodTemplate"];
    } else {
      const json& hc = At(cluster, {"spec", "headGroupSpec", "template", "spec", "containers"});
      tmpl = {
          {"spec",
           {{"containers",
             json::array({{{"name", "ray-job-submitter"},
                           {"image", hc.is_array() && !hc.empty() ? hc[0].value("image", "") : ""},
                           {"resources",
                            {{"limits", {{"cpu", "1"}, {"memory", "1Gi"}}},
                             {"requests", {{"cpu", "500m"}, {"memory", "200Mi"}}}}}}})},
            {"restartPolicy", "Never"}}}};
    }
    json& c0 = tmpl["spec"]["containers"][0];
    if (!c0.contains("command") || !c0["command"].is_array() || c0["command"].empty()) {
      c0["command"] = json::array({"/bin/bash", "-ce", "--"});
      c0["args"] = json::array({SubmitCommand(rj, st)});
    }
    if (!c0.contains("env") || !c0["env"].is_array()) c0["env"] = json::array();
    c0["env"].push_back({{"name", "PYTHONUNBUFFERED"}, {"value", "1"}});
    c0["env"].push_back({{"name", "RAY_DASHBOARD_ADDRESS"}, {"value", GetS(st, "dashboardURL")}});
    c0["env"].push_back({{"name", "RAY_JOB_SUBMISSION_ID"}, {"value", GetS(st, "jobId")}});
    const json labels = {{kOriginNameLabel, name},
                         {kOriginCrdLabel, "RayJob"},
                         {kCreatedByLabel, "kuberay-operator"}};
    if (!tmpl.contains("metadata") || !tmpl["metadata"].is_object())
      tmpl["metadata"] = json::object();
    if (!tmpl["metadata"].contains("labels") || !tmpl["metadata"]["labels"].is_object())
      tmpl["metadata"]["labels"] = json::object();
    for (const auto& [k, v] : labels.items())
      tmpl["metadata"]["labels"][k] = v;
    int64_t backoff = 2;
    const json& sc = At(spec, {"submitterConfig", "backoffLimit"});
    if (sc.is_number_integer()) backoff = sc.get<int64_t>();
    json job = {{"apiVersion", "batch/v1"},
                {"kind", "Job"},
                {"metadata",
                 {{"name", name},
                  {"namespace", ns},
                  {"labels", labels},
                  {"ownerReferences", json::array({ControllerRef(rj)})}}},
                {"spec", {{"backoffLimit", backoff}, {"template", tmpl}}}};
    try {
      client_->Create(kube::resources::kJobs, ns, job);
    } catch (const kube::ApiError& e) {
      recorder_->Emit(
          rj, "Warning", "FailedToCreateRayJobSubmitter", "Create",
          "Failed to create new Kubernetes Job " + ns + "/" + name + ": " + e.message());
      throw;
    }
    recorder_->Emit(rj, "Normal", "CreatedRayJobSubmitter", "Create",
                    "Created Kubernetes Job " + ns + "/" + name);
  }

  // checkSubmitterAndUpdateStatusIfNeeded (K8sJobMode). `finished_at` gets the Complete/Failed
  // condition's lastTransitionTime.
  bool CheckSubmitter(const json& rj, json& st, int64_t* finished_at) {
    json job = CachedOrGet(jobs_, kube::resources::kJobs, Str(rj, {"metadata", "namespace"}),
                           Str(rj, {"metadata", "name"}));
    bool update = false;
    const json& conds = At(job, {"status", "conditions"});
    if (conds.is_array()) {
      for (const json& c : conds) {
        if (c.value("type", "") == "Failed" && c.value("status", "") == "True") {
          update = true;
          st["jobDeploymentStatus"] = "Failed";
          if (GetS(st, "jobStatus") == "FAILED") {
            st["reason"] = "AppFailed";
          } else {
            st["reason"] = "SubmissionFailed";
            st["message"] = "Job submission has failed. Reason: " + c.value("reason", "") +
                            ". Message: " + c.value("message", "");
          }
          break;
        }
      }
      for (const json& c : conds) {
        const std::string t = c.value("type", "");
        if ((t == "Complete" || t == "Failed") && c.value("status", "") == "True") {
          *finished_at = ParseRfc3339(c.value("lastTransitionTime", ""));
          break;
        }
      }
    }
    return update;
  }

  // reconcileServices: <rayjob>-head-svc pointing at the current cluster's head.
  void ReconcileServices(const json& rj, const json& cluster) {
    const json& sel = At(rj, {"spec", "clusterSelector"});
    if (sel.is_object() && !sel.empty()) return;
    const std::string ns = Str(rj, {"metadata", "namespace"});
    const std::string rname = Str(rj, {"metadata", "name"});
    json svc = BuildHeadService(cluster);
    svc["metadata"]["name"] = rname + "-head-svc";
    svc["metadata"]["namespace"] = ns;
    svc["metadata"]["labels"] = {{kOriginNameLabel, rname},
                                 {kOriginCrdLabel, "RayJob"},
                                 {kRayNodeTypeLabel, "head"},
                                 {kRayIdLabel, rname + "-head"}};
    json old;
    try {
      old = CachedOrGet(services_, kube::resources::kServices, ns, rname + "-head-svc");
    } catch (const kube::ApiError& e) {
      if (!kube::IsNotFound(e)) throw;
    }
    if (old.is_object()) {
      if (Str(old, {"spec", "selector", kRayClusterLabel}) ==
          Str(svc, {"spec", "selector", kRayClusterLabel})) {
        return;
      }
      json spec = svc["spec"];
      if (old["spec"].contains("clusterIP")) spec["clusterIP"] = old["spec"]["clusterIP"];
      old["spec"] = spec;
      try {
        client_->Update(kube::resources::kServices, ns, old);
      } catch (const kube::ApiError& e) {
        recorder_->Emit(
            rj, "Warning", "FailedToUpdateService", "Update",
            "Failed to update the service " + ns + "/" + rname + "-head-svc, " + e.message());
        throw;
      }
      recorder_->Emit(rj, "Normal", "UpdatedService", "Update",
                      "Updated the service " + ns + "/" + rname + "-head-svc");
      return;
    }
    svc["metadata"]["ownerReferences"] = json::array({ControllerRef(rj)});
    try {
      client_->Create(kube::resources::kServices, ns, svc);
    } catch (const kube::ApiError& e) {
      recorder_->Emit(
          rj, "Warning", "FailedToCreateService", "Create",
          "Failed to create the service " + ns + "/" + rname + "-head-svc, " + e.message());
      throw;
    }
    recorder_->Emit(rj, "Normal", "CreatedService", "Create",
                    "Created the service " + ns + "/" + rname + "-head-svc");
  }

  // deleteClusterResources: true once the cluster is gone.
  bool DeleteCluster(const json& rj, const json& st) {
    const json& sel = At(rj, {"spec", "clusterSelector"});
    if (sel.is_object() && !sel.empty()) return true;
    const std::string ns = Str(rj, {"metadata", "namespace"});
    const std::string cname = GetS(st, "rayClusterName");
    if (cname.empty()) return true;
    json cluster;
    try {
      cluster = CachedOrGet(clusters_, kRayClusters, ns, cname);
    } catch (const kube::ApiError& e) {
      if (kube::IsNotFound(e)) return true;
      throw;
    }
    if (IsDeleting(cluster)) return false;
    try {
      client_->Delete(kRayClusters, ns, cname);
    } catch (const kube::ApiError& e) {
      if (kube::IsNotFound(e)) return true;
      recorder_->Emit(rj, "Warning", "FailedToDeleteRayCluster", "Delete",
                      "Failed to delete cluster " + ns + "/" + cname + ": " + e.message());
      throw;
    }
    recorder_->Emit(rj, "Normal", "DeletedRayCluster", "Delete",
                    "Deleted cluster " + ns + "/" + cname);
    return false;  // the next pass sees it gone
  }

  bool DeleteSubmitter(const json& rj, const std::string& mode) {
    if (mode == "HTTPMode" || mode == "SidecarMode") return true;
    const std::string ns = Str(rj, {"metadata", "namespace"});
    const std::string name = Str(rj, {"metadata", "name"});
    json job;
    try {
      job = CachedOrGet(jobs_, kube::resources::kJobs, ns, name);
    } catch (const kube::ApiError& e) {
      if (kube::IsNotFound(e)) return true;
      throw;
    }
    if (IsDeleting(job)) return false;
    kube::DeleteOptions opts;
    opts.propagation_policy = "Background";
    try {
      client_->Delete(kube::resources::kJobs, ns, name, opts);
    } catch (const kube::ApiError& e) {
      if (kube::IsNotFound(e)) return true;
      recorder_->Emit(rj, "Warning", "FailedToDeleteRayJobSubmitter", "Delete",
                      "Failed to delete submitter K8s Job " + ns + "/" + name + ": " + e.message());
      throw;
    }
    recorder_->Emit(rj, "Normal", "DeletedRayJobSubmitter", "Delete",
                    "Deleted submitter K8s Job " + ns + "/" + name);
    return false;
  }

  void SuspendWorkerGroups(const json& rj) {
    const std::string ns = Str(rj, {"metadata", "namespace"});
    const std::string cname = Str(rj, {"status", "rayClusterName"});
    json cluster = client_->Get(kRayClusters, ns, cname);
    if (cluster["spec"].contains("workerGroupSpecs")) {
      for (json& g : cluster["spec"]["workerGroupSpecs"])
        g["suspend"] = true;
    }
    try {
      client_->Update(kRayClusters, ns, cluster);
    } catch (const kube::ApiError& e) {
      recorder_->Emit(
          rj, "Warning", "FailedToUpdateRayCluster", "Update",
          "Failed to suspend worker groups in cluster " + ns + "/" + cname + ": " + e.message());
      throw;
    }
    recorder_->Emit(
        rj, "Normal", "UpdatedRayCluster", "Update",
        "Set the `suspend` field to true for all worker groups in cluster " + ns + "/" + cname);
  }

  static milliseconds Until(int64_t unix_seconds) {
    return milliseconds(std::max<int64_t>(0, (unix_seconds - NowUnix()) * 1000) + 2000);
  }

  // Complete/Failed: clusterSelector → nothing; deletionStrategy (gate on since v1.6) → rules or
  // legacy; else shutdownAfterJobFinishes → delete the RayCluster at endTime + ttl.
  milliseconds HandleFinished(const json& rj) {
    const json& spec = rj["spec"];
    const json& sel = At(spec, {"clusterSelector"});
    if (sel.is_object() && !sel.empty()) return milliseconds(-1);
    const json& st = rj["status"];
    const int64_t end = ParseRfc3339(GetS(st, "endTime"));
    const json& ds = At(spec, {"deletionStrategy"});
    if (f_.validation_failed && ds.is_object()) {
      const json& rules = At(ds, {"deletionRules"});
      if (rules.is_array()) return HandleDeletionRules(rj, rules, end);
      std::string policy;
      if (GetS(st, "jobStatus") == "SUCCEEDED") policy = Str(ds, {"onSuccess", "policy"});
      if (GetS(st, "jobStatus") == "FAILED") policy = Str(ds, {"onFailure", "policy"});
      if (policy.empty() || policy == "DeleteNone") return milliseconds(-1);
      const int64_t due = end + GetI(spec, "ttlSecondsAfterFinished", 0);
      if (due > NowUnix()) return Until(due);
      ExecutePolicy(rj, policy);
      return milliseconds(-1);
    }
    if (!spec.value("shutdownAfterJobFinishes", false)) return milliseconds(-1);
    const int64_t due = end + GetI(spec, "ttlSecondsAfterFinished", 0);
    if (due > NowUnix()) return Until(due);
    DeleteCluster(rj, st);
    return milliseconds(-1);
  }

  milliseconds HandleDeletionRules(const json& rj, const json& rules, int64_t end) {
    const json& st = rj["status"];
    std::vector<std::string> overdue;
    int64_t next = -1;
    for (const json& r : rules) {
      const json& cond = r.value("condition", json::object());
      bool match = false;
      if (cond.contains("jobStatus")) {
        match = cond.value("jobStatus", "") == GetS(st, "jobStatus");
      } else {
        match = cond.value("jobDeploymentStatus", "") == GetS(st, "jobDeploymentStatus");
      }
      if (!match) continue;
      const int64_t due = end + cond.value("ttlSeconds", 0);
      if (NowUnix() < due) {
        if (next < 0 || due < next) next = due;
        continue;
      }
      const std::string policy = r.value("policy", "");
      if (PolicyDone(rj, policy)) continue;
      overdue.push_back(policy);
    }
    if (!overdue.empty()) {
      auto rank = [](const std::string& p) {
        return p == "DeleteSelf" ? 4 : p == "DeleteCluster" ? 3 : p == "DeleteWorkers" ? 2 : 1;
      };
      std::string best = overdue[0];
      for (const std::string& p : overdue)
        if (rank(p) > rank(best)) best = p;
      ExecutePolicy(rj, best);
    }
    if (next >= 0) return Until(next);
    return milliseconds(-1);
  }

  bool PolicyDone(const json& rj, const std::string& policy) {
    if (policy == "DeleteNone") return true;
    if (policy == "DeleteSelf") return false;
    json cluster;
    try {
      cluster = CachedOrGet(clusters_, kRayClusters, Str(rj, {"metadata", "namespace"}),
                            Str(rj, {"status", "rayClusterName"}));
    } catch (const kube::ApiError& e) {
      if (kube::IsNotFound(e)) return true;
      throw;
    }
    if (IsDeleting(cluster)) return true;
    if (policy == "DeleteCluster") return false;
    for (const json& g : At(cluster, {"spec", "workerGroupSpecs"}))
      if (!g.value("suspend", false)) return false;
    return true;
  }

  void ExecutePolicy(const json& rj, const std::string& policy) {
    if (policy == "DeleteCluster") {
      DeleteCluster(rj, rj["status"]);
    } else if (policy == "DeleteWorkers") {
      SuspendWorkerGroups(rj);
    } else if (policy == "DeleteSelf") {
      client_->Delete(kRayJobs, Str(rj, {"metadata", "namespace"}), Str(rj, {"metadata", "name"}));
    }
  }

  OperatorFeatures f_;
  const kube::Informer* rayjobs_ = nullptr;  // every RayJob
  // What RayJobs own (label ray.io/originated-from-crd=RayJob).
  const kube::Informer* clusters_ = nullptr;
  const kube::Informer* jobs_ = nullptr;
  const kube::Informer* services_ = nullptr;
  milliseconds resync_{3000};
  std::unique_ptr<EventRecorder> recorder_;
};

}  // namespace

std::unique_ptr<Controller> NewRayJobController() {
  return std::make_unique<RayJobController>();
}

}  // namespace kubesim::controllers
