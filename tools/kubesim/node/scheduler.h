// kubesim's scheduler (controller "scheduler"): binds pending pods of schedulerName
// default-scheduler to nodes through the pods/binding subresource, as kube-scheduler does, and
// explains the pods that fit nowhere with the PodScheduled=False/Unschedulable condition and a
// FailedScheduling event (events.k8s.io, reportingController default-scheduler) carrying
// kube-scheduler 1.32's message (scheduling.h). Unschedulable pods are retried when nodes or
// PersistentVolumeClaims change or pods go away, and every --scheduler-resync-ms.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "controllers/controller.h"
#include "controllers/events.h"
#include "controllers/workqueue.h"
#include "node/scheduling.h"
#include "starforge/kube/client.h"
#include "starforge/kube/informer.h"

namespace kubesim::node {

class Scheduler : public controllers::Controller {
 public:
  ~Scheduler() override;
  void Start(const controllers::ControllerContext& ctx) override;
  void Stop() override;

 private:
  void Worker();
  void Resync();
  void ScheduleOne(const std::string& key);
  // Every unschedulable pod goes back to the queue (after its back-off).
  void RetryUnschedulable();
  void Requeue(const std::string& key);

  std::unique_ptr<starforge::kube::Client> client_;
  std::unique_ptr<controllers::EventRecorder> recorder_;
  std::unique_ptr<starforge::kube::Informer> pods_;
  std::unique_ptr<starforge::kube::Informer> nodes_;
  std::unique_ptr<starforge::kube::Informer> claims_;  // VolumeBinding's view of the claims
  controllers::WorkQueue queue_;
  std::atomic<bool> stop_{false};
  std::thread worker_;
  std::thread resync_;
  std::chrono::milliseconds backoff_{1000};
  std::chrono::milliseconds resync_every_{300000};

  // The scheduler's cache: what every pod holding node resources takes, kept by the pod
  // informer's handlers so that a decision does not copy every pod.
  void Track(const nlohmann::json& pod);
  struct Held {
    std::string node;
    PodDemand demand;
  };

  std::mutex mu_;
  std::map<std::string, Held> held_;     // pod key -> its node and demand
  std::map<std::string, Held> assumed_;  // bound by us; the informer has not caught up
  std::set<std::string> unschedulable_;
  std::map<std::string, int> attempts_;
  std::map<std::string, std::chrono::steady_clock::time_point> last_attempt_;
};

}  // namespace kubesim::node
