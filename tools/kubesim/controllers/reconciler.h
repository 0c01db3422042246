// The shape of a Kubernetes controller inside kubesim: informers (list+watch through the API)
// that enqueue keys, a work queue, and worker threads calling a level-triggered Reconcile(key)
// that may ask to be requeued. Reconcile reads what it creates on through the API (a consistent
// read, like an uncached client), so a stale informer cache can only delay work, never duplicate
// it; a controller may read the object it reconciles from its informer (as controller-runtime's
// cached client does: a stale copy only makes the write conflict, 409, retried with a back-off).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "controllers/controller.h"
#include "controllers/workqueue.h"
#include "starforge/kube/client.h"
#include "starforge/kube/errors.h"
#include "starforge/kube/informer.h"

namespace kubesim::controllers {

class Reconciler {
 public:
  // `name` is the controller identity (X-Kubesim-Controller, event reportingController).
  Reconciler(std::string name, int workers) : name_(std::move(name)), workers_(workers) {}
  virtual ~Reconciler() { StopReconciler(); }
  Reconciler(const Reconciler&) = delete;
  Reconciler& operator=(const Reconciler&) = delete;

  void StartReconciler(const ControllerContext& ctx) {
    ctx_ = ctx;
    client_ = ctx.make_client(name_);
    SetUp();
    for (auto& inf : informers_)
      inf->Start();
    for (int i = 0; i < workers_; ++i) {
      threads_.emplace_back([this] { Work(); });
    }
  }

  void StopReconciler() {
    if (stopped_.exchange(true)) return;
    stopping_ = true;
    queue_.ShutDown();
    // Each informer notices its stop flag within about a second: stop them side by side.
    std::vector<std::thread> stoppers;
    for (auto& inf : informers_)
      stoppers.emplace_back([&inf] { inf->Stop(); });
    for (auto& t : stoppers)
      t.join();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
  }

  const std::string& name() const { return name_; }
  // The number of worker threads (reconciles at once); call before StartReconciler.
  void set_workers(int workers) { workers_ = workers; }

 protected:
  // Adds informers (AddInformer) and anything else needed before work starts.
  virtual void SetUp() = 0;
  // Returns the requeue delay, or a negative duration for none. Exceptions are logged and the key
  // is retried with a backoff.
  virtual std::chrono::milliseconds Reconcile(const std::string& key) = 0;

  starforge::kube::Informer& AddInformer(starforge::kube::InformerOptions opts,
                                         starforge::kube::InformerHandlers handlers) {
    opts.min_watch_timeout = std::chrono::seconds(240);
    opts.backoff_base = std::chrono::milliseconds(100);
    opts.backoff_cap = std::chrono::milliseconds(2000);
    informers_.push_back(std::make_unique<starforge::kube::Informer>(*client_, std::move(opts),
                                                                     std::move(handlers)));
    return *informers_.back();
  }

  // Handlers that enqueue the object's own key on every change.
  starforge::kube::InformerHandlers EnqueueSelf() {
    starforge::kube::InformerHandlers h;
    h.on_add = [this](const nlohmann::json& o) { queue_.Add(starforge::kube::Informer::KeyOf(o)); };
    h.on_update = [this](const nlohmann::json&, const nlohmann::json& o) {
      queue_.Add(starforge::kube::Informer::KeyOf(o));
    };
    h.on_delete = [this](const nlohmann::json& o) {
      queue_.Add(starforge::kube::Informer::KeyOf(o));
    };
    return h;
  }

  // Handlers that enqueue the key `map(object)` returns ("" = nothing).
  starforge::kube::InformerHandlers EnqueueMapped(
      std::function<std::string(const nlohmann::json&)> map) {
    starforge::kube::InformerHandlers h;
    h.on_add = [this, map](const nlohmann::json& o) { AddMapped(map, o); };
    h.on_update = [this, map](const nlohmann::json& old, const nlohmann::json& o) {
      AddMapped(map, old);
      AddMapped(map, o);
    };
    h.on_delete = [this, map](const nlohmann::json& o) { AddMapped(map, o); };
    return h;
  }

  void Log(const char* fmt, const std::string& a, const std::string& b = "") const {
    std::fprintf(stderr, "kubesim: %s: ", name_.c_str());
    std::fprintf(stderr, fmt, a.c_str(), b.c_str());
    std::fprintf(stderr, "\n");
  }

  std::string name_;
  ControllerContext ctx_;
  std::unique_ptr<starforge::kube::Client> client_;
  WorkQueue queue_{/*events_first=*/true};  // see workqueue.h
  std::atomic<bool> stopping_{false};

 private:
  void AddMapped(const std::function<std::string(const nlohmann::json&)>& map,
                 const nlohmann::json& o) {
    const std::string key = map(o);
    if (!key.empty()) queue_.Add(key);
  }

  void Work() {
    std::map<std::string, int> failures;
    while (auto key = queue_.Get()) {
      std::chrono::milliseconds requeue{-1};
      try {
        requeue = Reconcile(*key);
        failures.erase(*key);
      } catch (const std::exception& e) {
        if (!stopping_) {
          const int n = ++failures[*key];
          // A conflict is ordinary (someone else wrote first, or a reconcile read a cached object
          // its watch had not updated yet): retry soon, quietly, backing off while it repeats.
          const auto* api = dynamic_cast<const starforge::kube::ApiError*>(&e);
          const bool conflict = api != nullptr && api->code() == 409;
          if (!conflict) Log("reconcile %s: %s", *key, e.what());
          requeue = std::chrono::milliseconds(conflict ? std::min(1000, 20 << std::min(n - 1, 6))
                                                       : std::min(5000, 100 << std::min(n, 6)));
        }
      }
      CountReconcile(name_);
      queue_.Done(*key);
      if (!stopping_ && requeue.count() >= 0) queue_.AddAfter(*key, requeue);
    }
  }

  int workers_;
  std::vector<std::unique_ptr<starforge::kube::Informer>> informers_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopped_{false};
};

}  // namespace kubesim::controllers
