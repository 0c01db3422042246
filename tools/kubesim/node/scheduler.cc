#include "node/scheduler.h"

#include <cstdio>

#include "node/scheduling.h"
#include "starforge/common/json_read.h"

namespace kubesim::node {

using nlohmann::json;
namespace kube = starforge::kube;
using std::chrono::milliseconds;

namespace {

// Never-throwing reads (common/json_read.h); Obj is this file's name for Field.
constexpr auto& Obj = starforge::json_read::Field;
using starforge::json_read::Str;

bool Terminal(const json& pod) {
  const std::string phase = Str(Obj(pod, "status"), "phase");
  return phase == "Succeeded" || phase == "Failed";
}

// A pod this scheduler must place.
bool Pending(const json& pod) {
  const json& spec = Obj(pod, "spec");
  const std::string scheduler = Str(spec, "schedulerName");
  return Str(spec, "nodeName").empty() && (scheduler.empty() || scheduler == "default-scheduler") &&
         !Obj(pod, "metadata").contains("deletionTimestamp") && !Terminal(pod);
}

// A pod that holds node resources.
bool Holds(const json& pod) {
  return !Str(Obj(pod, "spec"), "nodeName").empty() && !Terminal(pod);
}

std::string Now() {
  return controllers::EventRecorder::NowSeconds();
}

kube::InformerOptions InformerFor(const kube::ResourceRef& r) {
  kube::InformerOptions o;
  o.resource = r;
  return o;
}

}  // namespace

Scheduler::~Scheduler() {
  Stop();
}

void Scheduler::Start(const controllers::ControllerContext& ctx) {
  auto ms_flag = [&](const char* name, milliseconds fallback) {
    const std::string v = ctx.flags.Value(name);
    if (v.empty()) return fallback;
    const long long n = std::stoll(v);
    if (n <= 0) throw std::invalid_argument(std::string("--") + name + " wants a number > 0");
    return milliseconds(n);
  };
  backoff_ = ms_flag("scheduler-backoff-ms", backoff_);
  resync_every_ = ms_flag("scheduler-resync-ms", resync_every_);
  client_ = ctx.make_client("default-scheduler");
  recorder_ = std::make_unique<controllers::EventRecorder>(
      *client_, controllers::EventSource{true, "default-scheduler", "default-scheduler-kubesim"});

  kube::InformerHandlers ph;
  ph.on_add = [this](const json& pod) {
    Track(pod);
    if (Pending(pod)) queue_.Add(kube::Informer::KeyOf(pod));
  };
  ph.on_update = [this](const json& old, const json& pod) {
    Track(pod);
    const std::string key = kube::Informer::KeyOf(pod);
    if (Pending(pod)) {
      // Our own condition write must not trigger another attempt; a spec change does.
      if (Obj(old, "spec") != Obj(pod, "spec") || !Pending(old)) queue_.Add(key);
      return;
    }
    if (Holds(old) && !Holds(pod)) RetryUnschedulable();  // resources were freed
  };
  ph.on_delete = [this](const json& pod) {
    const std::string key = kube::Informer::KeyOf(pod);
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_.erase(key);
      assumed_.erase(key);
      unschedulable_.erase(key);
      attempts_.erase(key);
      last_attempt_.erase(key);
    }
    if (Holds(pod)) RetryUnschedulable();
  };
  pods_ = std::make_unique<kube::Informer>(*client_, InformerFor(kube::resources::kPods), ph);
  kube::InformerHandlers nh;
  nh.on_add = [this](const json&) { RetryUnschedulable(); };
  nh.on_update = [this](const json& old, const json& node) {
    if (Obj(old, "spec") != Obj(node, "spec") ||
        Obj(Obj(old, "metadata"), "labels") != Obj(Obj(node, "metadata"), "labels") ||
        Obj(Obj(old, "status"), "allocatable") != Obj(Obj(node, "status"), "allocatable") ||
        Obj(Obj(old, "status"), "capacity") != Obj(Obj(node, "status"), "capacity") ||
        Obj(Obj(old, "status"), "conditions") != Obj(Obj(node, "status"), "conditions")) {
      RetryUnschedulable();
    }
  };
  nh.on_delete = [this](const json&) { RetryUnschedulable(); };
  nodes_ = std::make_unique<kube::Informer>(*client_, InformerFor(kube::resources::kNodes), nh);
  // A claim that appears or binds makes the pods waiting on it schedulable (kube-scheduler's
  // VolumeBinding registers the same PVC events).
  kube::InformerHandlers ch;
  ch.on_add = [this](const json&) { RetryUnschedulable(); };
  ch.on_update = [this](const json&, const json&) { RetryUnschedulable(); };
  claims_ = std::make_unique<kube::Informer>(
      *client_, InformerFor(kube::resources::kPersistentVolumeClaims), ch);
  nodes_->Start();
  claims_->Start();
  pods_->Start();
  worker_ = std::thread([this] { Worker(); });
  resync_ = std::thread([this] { Resync(); });
}

void Scheduler::Stop() {
  if (stop_.exchange(true)) return;
  queue_.ShutDown();
  if (pods_) pods_->Stop();
  if (nodes_) nodes_->Stop();
  if (claims_) claims_->Stop();
  if (worker_.joinable()) worker_.join();
  if (resync_.joinable()) resync_.join();
}

void Scheduler::Worker() {
  // Both caches first: deciding against an empty node list would report "no nodes available".
  while (!stop_ &&
         !(nodes_->WaitForSync(milliseconds(200)) && pods_->WaitForSync(milliseconds(200)) &&
           claims_->WaitForSync(milliseconds(200)))) {
  }
  while (auto key = queue_.Get()) {
    try {
      ScheduleOne(*key);
    } catch (const std::exception& e) {
      if (!stop_) {
        std::fprintf(stderr, "kubesim: scheduler: %s: %s\n", key->c_str(), e.what());
        Requeue(*key);
      }
    }
    queue_.Done(*key);
  }
}

void Scheduler::Resync() {
  auto next = std::chrono::steady_clock::now() + resync_every_;
  while (!stop_) {
    std::this_thread::sleep_for(milliseconds(50));
    if (std::chrono::steady_clock::now() < next) continue;
    next = std::chrono::steady_clock::now() + resync_every_;
    RetryUnschedulable();
  }
}

void Scheduler::Track(const json& pod) {
  const std::string key = kube::Informer::KeyOf(pod);
  std::lock_guard<std::mutex> lock(mu_);
  if (Holds(pod)) {
    held_[key] = {Str(Obj(pod, "spec"), "nodeName"), DemandOf(pod)};
    assumed_.erase(key);
  } else {
    held_.erase(key);
    if (!Pending(pod)) assumed_.erase(key);
  }
}

void Scheduler::Requeue(const std::string& key) {
  std::chrono::steady_clock::time_point last;
  int n = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = attempts_[key];
    last = last_attempt_[key];
  }
  // kube-scheduler's pod back-off: 1 s doubling to 10 s (scaled by --scheduler-backoff-ms).
  const milliseconds delay =
      std::min(backoff_ * 10, backoff_ * (1 << std::min(std::max(n - 1, 0), 4)));
  const auto ready = last + delay;
  const auto now = std::chrono::steady_clock::now();
  if (ready <= now) {
    queue_.Add(key);
  } else {
    queue_.AddAfter(key, std::chrono::duration_cast<milliseconds>(ready - now) + milliseconds(1));
  }
}

void Scheduler::RetryUnschedulable() {
  std::vector<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    keys.assign(unschedulable_.begin(), unschedulable_.end());
  }
  for (const auto& k : keys)
    Requeue(k);
}

void Scheduler::ScheduleOne(const std::string& key) {
  std::optional<json> pod = pods_->Get(key);
  if (!pod || !Pending(*pod)) {
    std::lock_guard<std::mutex> lock(mu_);
    unschedulable_.erase(key);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (assumed_.count(key) != 0) return;  // bound; the informer has not caught up yet
    ++attempts_[key];
    last_attempt_[key] = std::chrono::steady_clock::now();
  }
  std::map<std::string, json> nodes;
  for (auto& [k, n] : nodes_->Snapshot()) {
    const std::string node_name = Str(Obj(n, "metadata"), "name");
    nodes[node_name] = std::move(n);  // (json's operator= takes its argument by value)
  }
  std::map<std::string, NodeUsage> usage;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, h] : held_)
      AddPod(usage[h.node], h.demand);
    for (const auto& [k, h] : assumed_)
      AddPod(usage[h.node], h.demand);
  }
  const json& md = Obj(*pod, "metadata");
  const std::string ns = Str(md, "namespace");
  const std::string name = Str(md, "name");
  std::map<std::string, json> claims;
  const json& volumes = Obj(Obj(*pod, "spec"), "volumes");
  for (const json& v : volumes.is_array() ? volumes : json::array()) {
    const std::string claim = Str(Obj(v, "persistentVolumeClaim"), "claimName");
    if (claim.empty()) continue;
    if (auto c = claims_->Get(ns + "/" + claim)) claims[claim] = std::move(*c);
  }
  const Decision d = Schedule(*pod, nodes, usage, claims);
  if (!d.node.empty()) {
    json binding = {{"apiVersion", "v1"},
                    {"kind", "Binding"},
                    {"metadata", {{"name", name}, {"namespace", ns}, {"uid", Str(md, "uid")}}},
                    {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", d.node}}}};
    try {
      client_->Raw("POST", kube::resources::kPods.ObjectPath(ns, name, "binding"), {},
                   binding.dump(), "application/json");
    } catch (const kube::ApiError& e) {
      if (e.reason() == kube::Reason::kConflict || e.reason() == kube::Reason::kNotFound) return;
      throw;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Unless the informer already delivered the binding, count the pod on its node now.
      if (held_.count(key) == 0) assumed_[key] = {d.node, DemandOf(*pod)};
      unschedulable_.erase(key);
      attempts_.erase(key);
      last_attempt_.erase(key);
    }
    recorder_->Emit(*pod, "Normal", "Scheduled", "Binding",
                    "Successfully assigned " + ns + "/" + name + " to " + d.node);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    unschedulable_.insert(key);
  }
  recorder_->Emit(*pod, "Warning", "FailedScheduling", "Scheduling", d.message);
  // PodScheduled=False/Unschedulable, written only when it changes.
  const json& existing = Obj(Obj(*pod, "status"), "conditions");
  json conditions = json::array();
  bool same = false;
  std::string since = Now();
  for (const auto& c : existing.is_array() ? existing : json::array()) {
    if (Str(c, "type") == "PodScheduled") {
      same = Str(c, "status") == "False" && Str(c, "reason") == "Unschedulable" &&
             Str(c, "message") == d.message;
      if (Str(c, "status") == "False" && !Str(c, "lastTransitionTime").empty()) {
        since = Str(c, "lastTransitionTime");
      }
      continue;
    }
    conditions.push_back(c);
  }
  if (same) return;
  conditions.push_back({{"type", "PodScheduled"},
                        {"status", "False"},
                        {"reason", "Unschedulable"},
                        {"message", d.message},
                        {"lastProbeTime", nullptr},
                        {"lastTransitionTime", since}});
  try {
    client_->MergePatchStatus(kube::resources::kPods, ns, name,
                              {{"status", {{"conditions", conditions}}}});
  } catch (const kube::ApiError& e) {
    if (e.reason() != kube::Reason::kNotFound) throw;
  }
}

KUBESIM_REGISTER_CONTROLLER({"scheduler",
                             [] { return std::make_unique<Scheduler>(); },
                             {{"scheduler-backoff-ms", "first retry back-off of a pod (1000)"},
                              {"scheduler-resync-ms",
                               "periodic retry of unschedulable pods "
                               "(300000)"}},
                             150});

}  // namespace kubesim::node
