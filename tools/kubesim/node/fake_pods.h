// kubesim's kubelet with --pods fake: the pods bound to the inventory's nodes run no process, as
// KWOK's fake kubelet does, but walk the status a kubelet writes (an address, init containers
// Completed, containers Running and Ready; Succeeded/Failed at the end; the grace-0 DELETE that
// confirms a deletion). What runs inside is played where StarForge and the operator look:
//   - a Ray head pod (label ray.io/node-type=head) holds a fake Ray dashboard at its address
//     (node/fake_ray.h) for the operator's Jobs API calls and the service proxy;
//   - a submitter pod (env RAY_JOB_SUBMISSION_ID and RAY_DASHBOARD_ADDRESS, as the operator's
//     submitter Job sets them) submits its job to the head of the service it names, runs until
//     that job ends (after --fake-job-ms, or KUBESIM_FAKE_JOB_MS of the job's runtime env:
//     node/fake_ray.h), writes a log as `ray job submit` + `ray job logs
//     --follow` would, and exits 0 when the job SUCCEEDED (1 otherwise);
//   - every other pod runs until deleted.
// So a thousand RayJobs fit on two cores; the process kubelet (node/kubelet.h) stays the default
// for everything that needs real programs. See docs/kubesim.md, "Fake pods".
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "controllers/controller.h"
#include "controllers/workqueue.h"
#include "node/pod_network.h"
#include "starforge/kube/client.h"
#include "starforge/kube/informer.h"

namespace kubesim::node {

class FakePods {
 public:
  FakePods() = default;
  ~FakePods();
  FakePods(const FakePods&) = delete;
  FakePods& operator=(const FakePods&) = delete;

  // Reads --fake-job-ms and --kubelet-dir from ctx.flags; starts informers and workers.
  void Start(const controllers::ControllerContext& ctx);
  void Stop();  // idempotent; joins every thread

 private:
  struct Pod {
    std::string uid, ns, name, ip, host_ip, start_time;
    bool head = false;
    std::string submission_id;  // a submitter's (RAY_JOB_SUBMISSION_ID), "" = not a submitter
    std::string head_ip;        // the head it submitted to
    std::chrono::milliseconds run{0};  // how long its job runs (--fake-job-ms or its runtime env)
    bool submitted = false;
    bool log_annotated = false;
    bool done = false;       // terminal status written
    bool confirmed = false;  // grace-0 DELETE sent
    nlohmann::json last_status;
  };
  void Worker();
  void Reconcile(const std::string& key);
  // The status of `p` (running, or terminal with `exit_code` for every main container).
  nlohmann::json Status(const Pod& p, const nlohmann::json& pod, bool terminal, int exit_code);
  void Write(Pod& p, const nlohmann::json& pod, nlohmann::json status);
  // The submitter's dashboard address resolved to a fake head's address ("" = not yet).
  std::string HeadIpFor(const nlohmann::json& pod, const std::string& address);
  std::string LogFile(const Pod& p) const;

  std::chrono::milliseconds job_run_{2000};
  std::string log_dir_;
  bool own_log_dir_ = false;
  std::unique_ptr<starforge::kube::Client> client_;
  std::unique_ptr<starforge::kube::Informer> pods_, nodes_, services_;
  controllers::WorkQueue queue_{true};
  IpPool ips_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;  // guards pods_rt_
  std::map<std::string, std::shared_ptr<Pod>> pods_rt_;
};

}  // namespace kubesim::node
