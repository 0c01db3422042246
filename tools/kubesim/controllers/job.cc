// The batch/v1 Job controller (kube-controller-manager's job-controller, Kubernetes 1.32), the
// subset KubeRay's submitter Jobs and plain Jobs use: NonIndexed completions/parallelism, pods
// from the template with the job labels and a controller ownerReference, restartPolicy Never
// retries with exponential back-off until failures exceed backoffLimit, activeDeadlineSeconds,
// the 1.32 interim conditions (SuccessCriteriaMet / FailureTarget) before Complete / Failed, and
// the legacy core/v1 events SuccessfulCreate, SuccessfulDelete, Completed, BackoffLimitExceeded,
// DeadlineExceeded with source.component job-controller. See docs/kubesim.md.
#include <algorithm>
#include <map>
#include <mutex>

#include "controllers/controller.h"
#include "controllers/events.h"
#include "controllers/kubeutil.h"
#include "controllers/reconciler.h"

namespace kubesim::controllers {

namespace {

namespace kube = starforge::kube;
using std::chrono::milliseconds;

constexpr const char* kControllerUid = "batch.kubernetes.io/controller-uid";
constexpr const char* kJobName = "batch.kubernetes.io/job-name";

json Condition(const std::string& type, const std::string& reason, const std::string& message,
               const std::string& now) {
  return {{"type", type},         {"status", "True"},
          {"lastProbeTime", now}, {"lastTransitionTime", now},
          {"reason", reason},     {"message", message}};
}

bool HasCondition(const json& job, const std::string& type) {
  const json& conds = At(job, {"status", "conditions"});
  if (!conds.is_array()) return false;
  for (const json& c : conds) {
    if (c.value("type", "") == type && c.value("status", "") == "True") return true;
  }
  return false;
}

int64_t IntOr(const json& v, int64_t fallback) {
  return v.is_number_integer() ? v.get<int64_t>() : fallback;
}

class JobController : public Controller, public Reconciler {
 public:
  JobController() : Reconciler("job-controller", 4) {}
  ~JobController() override { Stop(); }

  void Start(const ControllerContext& ctx) override {
    backoff_base_ms_ = std::stoll(ctx.flags.Value("job-backoff-ms", "10000"));
    StartReconciler(ctx);
  }
  void Stop() override { StopReconciler(); }

 protected:
  void SetUp() override {
    recorder_ = std::make_unique<EventRecorder>(*client_, EventSource{false, "job-controller", ""});
    kube::InformerOptions jobs;
    jobs.resource = kube::resources::kJobs;
    AddInformer(jobs, EnqueueSelf());
    kube::InformerOptions pods;
    pods.resource = kube::resources::kPods;
    pods.label_selector = kControllerUid;
    AddInformer(pods, EnqueueMapped([](const json& pod) -> std::string {
                  const json& refs = At(pod, {"metadata", "ownerReferences"});
                  if (!refs.is_array()) return "";
                  for (const json& r : refs) {
                    if (r.value("kind", "") == "Job" && r.value("controller", false)) {
                      return Str(pod, {"metadata", "namespace"}) + "/" + r.value("name", "");
                    }
                  }
                  return "";
                }));
  }

  milliseconds Reconcile(const std::string& key) override {
    const std::string ns = key.substr(0, key.find('/'));
    const std::string name = key.substr(key.find('/') + 1);
    json job;
    try {
      job = client_->Get(kube::resources::kJobs, ns, name);
    } catch (const kube::ApiError& e) {
      if (kube::IsNotFound(e)) {
        std::lock_guard<std::mutex> lock(mu_);
        last_failure_.erase(key);
        return milliseconds(-1);
      }
      throw;
    }
    if (IsDeleting(job)) return milliseconds(-1);
    const std::string uid = Str(job, {"metadata", "uid"});
    const json& spec = job["spec"];
    if (spec.value("suspend", false)) return milliseconds(-1);

    kube::ListOptions lo;
    lo.label_selector = std::string(kControllerUid) + "=" + uid;
    json list = client_->List(kube::resources::kPods, ns, lo);
    std::vector<json> active;
    int64_t succeeded = 0;
    int64_t failed = 0;
    int64_t ready = 0;
    int64_t terminating = 0;
    for (json& p : list["items"]) {
      if (!IsControlledBy(p, uid)) continue;
      const std::string phase = PodPhase(p);
      if (phase == "Succeeded") {
        ++succeeded;
      } else if (phase == "Failed") {
        ++failed;
      } else if (IsDeleting(p)) {
        ++terminating;
      } else {
        if (PodReadyTrue(p)) ++ready;
        active.push_back(p);
      }
    }

    const bool finished = HasCondition(job, "Complete") || HasCondition(job, "Failed");
    json status = job.value("status", json::object());
    const std::string now = NowRfc3339();
    milliseconds requeue{-1};

    if (finished) {
      // A failed Job's remaining pods are terminated; nothing else changes.
      if (HasCondition(job, "Failed")) DeletePods(job, active);
      return requeue;
    }

    const int64_t completions = IntOr(spec.value("completions", json()), -1);  // -1 = nil
    const int64_t parallelism = IntOr(spec.value("parallelism", json()), 1);
    const int64_t backoff_limit = IntOr(spec.value("backoffLimit", json()), 6);
    if (!status.contains("startTime")) status["startTime"] = now;

    std::string fail_reason;
    std::string fail_message;
    const int64_t deadline = IntOr(spec.value("activeDeadlineSeconds", json()), -1);
    const int64_t started = ParseRfc3339(status.value("startTime", now));
    if (failed > backoff_limit) {
      fail_reason = "BackoffLimitExceeded";
      fail_message = "Job has reached the specified backoff limit";
    } else if (deadline > 0 && NowUnix() >= started + deadline) {
      fail_reason = "DeadlineExceeded";
      fail_message = "Job was active longer than specified deadline";
    } else if (deadline > 0) {
      requeue = milliseconds((started + deadline - NowUnix()) * 1000 + 100);
    }
    const bool complete =
        fail_reason.empty() &&
        (completions < 0 ? (succeeded > 0) : (succeeded >= std::max<int64_t>(completions, 1)));

    json conds = status.value("conditions", json::array());
    auto has = [&](const std::string& type) {
      for (const json& c : conds)
        if (c.value("type", "") == type) return true;
      return false;
    };
    bool emit_finished = false;
    if (!fail_reason.empty()) {
      // 1.32: FailureTarget first; Failed once no pod is left running.
      if (!has("FailureTarget"))
        conds.push_back(Condition("FailureTarget", fail_reason, fail_message, now));
      DeletePods(job, active);
      terminating += static_cast<int64_t>(active.size());
      active.clear();
      ready = 0;
      conds.push_back(Condition("Failed", fail_reason, fail_message, now));
      emit_finished = true;
    } else if (complete) {
      if (!has("SuccessCriteriaMet")) {
        conds.push_back(Condition("SuccessCriteriaMet", "CompletionsReached",
                                  "Reached expected number of succeeded pods", now));
      }
      if (completions < 0 && !active.empty()) {
        // Without completions, the others are stopped once one pod succeeded.
        DeletePods(job, active);
        terminating += static_cast<int64_t>(active.size());
        active.clear();
        ready = 0;
      }
      if (active.empty()) {
        conds.push_back(Condition("Complete", "CompletionsReached",
                                  "Reached expected number of succeeded pods", now));
        status["completionTime"] = now;
        emit_finished = true;
      }
    } else {
      // Keep min(parallelism, remaining completions) pods running, pausing after failures.
      int64_t want = parallelism;
      if (completions >= 0) want = std::min(parallelism, completions - succeeded);
      const int64_t missing = want - static_cast<int64_t>(active.size());
      if (missing > 0) {
        const int64_t wait_ms = BackoffRemainingMs(key, failed);
        if (wait_ms > 0) {
          requeue = requeue.count() >= 0 ? std::min(requeue, milliseconds(wait_ms))
                                         : milliseconds(wait_ms);
        } else {
          for (int64_t i = 0; i < missing; ++i) {
            active.push_back(CreatePod(job));
          }
        }
      }
    }

    if (active.empty()) {
      status.erase("active");
    } else {
      status["active"] = static_cast<int64_t>(active.size());
    }
    if (succeeded > 0) {
      status["succeeded"] = succeeded;
    } else {
      status.erase("succeeded");
    }
    if (failed > 0) {
      status["failed"] = failed;
    } else {
      status.erase("failed");
    }
    status["ready"] = ready;
    status["terminating"] = terminating;
    status["uncountedTerminatedPods"] = json::object();
    if (!conds.empty()) status["conditions"] = conds;

    if (status != job.value("status", json::object())) {
      json updated = job;
      updated["status"] = status;
      client_->UpdateStatus(kube::resources::kJobs, ns, updated);
    }
    if (emit_finished) {
      if (fail_reason.empty()) {
        recorder_->Emit(job, "Normal", "Completed", "", "Job completed");
      } else {
        recorder_->Emit(job, "Warning", fail_reason, "", fail_message);
      }
    }
    return requeue;
  }

 private:
  // Back-off before replacing failed pods: base * 2^(failures-1), capped at 6 minutes, counted
  // from when the last failure was observed.
  int64_t BackoffRemainingMs(const std::string& key, int64_t failed) {
    if (failed <= 0) return 0;
    std::lock_guard<std::mutex> lock(mu_);
    auto now = std::chrono::steady_clock::now();
    auto& rec = last_failure_[key];
    if (rec.first != failed) rec = {failed, now};
    int64_t delay = backoff_base_ms_;
    for (int64_t i = 1; i < failed && delay < 360000; ++i)
      delay *= 2;
    delay = std::min<int64_t>(delay, 360000);
    const int64_t elapsed = std::chrono::duration_cast<milliseconds>(now - rec.second).count();
    return std::max<int64_t>(0, delay - elapsed);
  }

  json CreatePod(const json& job) {
    const std::string ns = Str(job, {"metadata", "namespace"});
    const std::string name = Str(job, {"metadata", "name"});
    const std::string uid = Str(job, {"metadata", "uid"});
    const json& tmpl = At(job, {"spec", "template"});
    json md = tmpl.value("metadata", json::object());
    json labels = md.value("labels", json::object());
    labels[kControllerUid] = uid;
    labels[kJobName] = name;
    labels["controller-uid"] = uid;
    labels["job-name"] = name;
    json pod_md = {{"generateName", name + "-"},
                   {"namespace", ns},
                   {"labels", labels},
                   {"ownerReferences", json::array({ControllerRef(job)})}};
    if (md.contains("annotations")) pod_md["annotations"] = md["annotations"];
    json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", pod_md},
                {"spec", tmpl.value("spec", json::object())}};
    json created = client_->Create(kube::resources::kPods, ns, pod);
    recorder_->Emit(job, "Normal", "SuccessfulCreate", "",
                    "Created pod: " + Str(created, {"metadata", "name"}));
    return created;
  }

  void DeletePods(const json& job, const std::vector<json>& pods) {
    for (const json& p : pods) {
      try {
        client_->Delete(kube::resources::kPods, Str(p, {"metadata", "namespace"}),
                        Str(p, {"metadata", "name"}));
        recorder_->Emit(job, "Normal", "SuccessfulDelete", "",
                        "Deleted pod: " + Str(p, {"metadata", "name"}));
      } catch (const kube::ApiError& e) {
        if (!kube::IsNotFound(e)) throw;
      }
    }
  }

  std::unique_ptr<EventRecorder> recorder_;
  int64_t backoff_base_ms_ = 10000;
  std::mutex mu_;
  std::map<std::string, std::pair<int64_t, std::chrono::steady_clock::time_point>> last_failure_;
};

}  // namespace

KUBESIM_REGISTER_CONTROLLER({"jobs",
                             [] { return std::make_unique<JobController>(); },
                             {{"job-backoff-ms",
                               "Job controller: first back-off before replacing a failed pod "
                               "(default 10000, doubling; kube-controller-manager's 10 s)"}},
                             20});

}  // namespace kubesim::controllers
