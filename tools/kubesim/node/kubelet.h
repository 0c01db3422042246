// kubesim's kubelet (controller "kubelet", one for every node): runs the pods bound to the
// inventory's nodes as real local processes (sandbox.h), with kubelet's image-pull, config,
// volume, restart, readiness and termination behaviour, its events (legacy core/v1, source
// kubelet/<node>) and its pod status. See docs/kubesim.md, "Scheduler and kubelet".
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "controllers/controller.h"
#include "controllers/events.h"
#include "controllers/workqueue.h"
#include "node/fake_pods.h"
#include "node/image_policy.h"
#include "node/pod_env.h"
#include "node/pod_netns.h"
#include "node/pod_network.h"
#include "node/sandbox.h"
#include "starforge/kube/client.h"
#include "starforge/kube/informer.h"

namespace kubesim::node {

// Annotations the kubelet reads and writes.
inline constexpr const char* kHostPathAnnotation = "kubesim.starforge.dev/host-path";  // on PVCs
inline constexpr const char* kLogFileAnnotationPrefix = "kubesim.starforge.dev/log-file.";

struct KubeletOptions {
  std::string state_dir;  // "" = a fresh temp dir, removed at Stop
  std::string pv_root;    // "" = <state_dir>/pv
  std::string ray_bin_dir;
  std::string launcher;  // kubesim-sandbox
  ImagePolicy images;
  std::chrono::milliseconds sync{10000};     // resync of pods that wait (errors, back-offs)
  std::chrono::milliseconds backoff{10000};  // first image-pull / crash-loop back-off
  std::chrono::milliseconds backoff_cap{300000};
  std::chrono::milliseconds probe_cap{0};  // caps probe initialDelay/period (0 = none)
  int pod_cpu_shares = 1024;  // cpu.shares of the cgroup holding every container (0 = none)
  // --ray real: ray_bin_dir is a virtual environment's bin with real Ray, and containers get the
  // environment defaults that keep a Ray node small.
  bool real_ray = false;
  // --pod-network netns: a network namespace per pod on a host bridge (pod_netns.h), addresses
  // from the node's spec.podCIDR, else from pod_cidr. Default: loopback addresses (IpPool).
  bool netns = false;
  std::string pod_cidr = "10.244.0.0/16";
  // --cluster-hosts-file: a hosts file for programs on the host (the KubeRay operator), kept
  // current with every service's cluster names (see docs/real-control-plane.md).
  std::string cluster_hosts_file;
};

class Kubelet : public controllers::Controller {
 public:
  Kubelet() = default;
  ~Kubelet() override;
  void Start(const controllers::ControllerContext& ctx) override;
  void Stop() override;

  // Everything the kubelet knows about one container.
  struct Container {
    std::string name;
    bool init = false;
    size_t index = 0;
    nlohmann::json spec;
    pid_t pid = 0;  // the running process (0 = none)
    bool exited = false;
    int wait_status = 0;
    std::string run_dir, spec_file, log_file, error_file, ns_file;
    // The container's mount namespace, held open while it runs so that its id ("mnt:[N]") cannot
    // be reused by another container's namespace (ids are recycled once a namespace is freed).
    int ns_fd = -1;
    std::string ns_id;
    std::string container_id;
    nlohmann::json state;  // ContainerState; null = never tried
    nlohmann::json last_state = nlohmann::json::object();
    int restarts = 0;
    bool started_once = false;
    bool ready = false;
    std::chrono::steady_clock::time_point running_since{};
    std::chrono::system_clock::time_point finished_at{};
    int crash_step = 0;
    int pull_step = 0;
    std::chrono::steady_clock::time_point pull_backoff_until{};
    // readiness probe
    std::chrono::steady_clock::time_point next_probe{};
    int probe_failures = 0;
    int probe_successes = 0;
    bool probe_running = false;
    bool has_exit() const { return state.is_object() && state.contains("terminated"); }
  };

  struct Pod {
    std::mutex mu;
    std::string key, uid, ns, name, node;
    std::string dir, ip, host_ip, start_time;
    std::string netns;  // the pod's network namespace (/run/netns/…; "" = the host's)
    bool sandbox = false;
    bool volumes_ready = false;
    int mount_step = 0;  // failed volume set-ups so far (the retry back-off)
    std::map<std::string, std::string> volume_dirs;  // volume name -> host path
    std::map<std::string, bool> volume_files;        // volume name -> is a file (hostPath)
    std::vector<std::string> tmpfs;                  // mounted in kubesim's namespace
    std::vector<Container> inits, mains;
    bool killing = false;
    bool sigkilled = false;
    std::chrono::steady_clock::time_point kill_deadline{};
    std::chrono::steady_clock::time_point started{};  // with start_time (the active deadline's)
    bool deadline_exceeded = false;  // spec.activeDeadlineSeconds passed: being failed
    bool confirmed = false;          // DELETE with grace 0 sent
    bool done = false;               // terminal status written; nothing more runs
    std::string hosts_file;
    std::string hosts_content;
    std::string hosts_lines;  // the service lines it was rendered with
    uint64_t hosts_gen = 0;   // the generation of the views they came from
    nlohmann::json last_status;
    std::chrono::system_clock::time_point last_sync{};
  };

 private:
  void Worker();
  void Monitor();
  void Prober();
  void HostsUpdater();
  void Reconcile(const std::string& key);
  void SyncPod(Pod& p, const nlohmann::json& pod);
  void Terminate(Pod& p, const nlohmann::json& pod);
  // Stops every running container (SIGTERM, SIGKILL after `grace`); true while some still run
  // (the pod is requeued).
  bool StopContainers(Pod& p, const nlohmann::json& pod, int64_t grace);
  // The kubelet's active deadline handler (pkg/kubelet/active_deadline.go): how long the pod may
  // still run after its start under spec.activeDeadlineSeconds (nullopt: no deadline or not
  // started); past it, ExceedDeadline fails the pod.
  std::optional<std::chrono::milliseconds> DeadlineLeft(const Pod& p, const nlohmann::json& pod);
  void ExceedDeadline(Pod& p, const nlohmann::json& pod);
  void Teardown(Pod& p);
  bool EnsureSandbox(Pod& p, const nlohmann::json& pod);
  bool EnsureVolumes(Pod& p, const nlohmann::json& pod);
  // One CPU cgroup (cgroup v1 cpu controller) for all of this kubelet's containers, so that
  // hundreds of them share the CPU of one scheduling group instead of one each (every container
  // is a session: with autogroup scheduling each session weighs as much as kubesim) and cannot
  // starve kubesim's API server and controllers — a real cluster runs its control plane apart, or
  // keeps kube-reserved CPU. Best effort: without a writable cgroup fs containers run as before.
  void SetUpPodCgroup();
  void RemovePodCgroup();
  std::string pod_cgroup_;  // its dir ("" = none)
  // Tries to start `c` (image, command, config); false leaves it waiting with a reason.
  bool StartContainer(Pod& p, const nlohmann::json& pod, Container& c);
  // Its steps. Each false (or error) has left the container waiting and the pod requeued.
  bool WaitToStart(Pod& p, Container& c, const std::string& reason, const std::string& message,
                   std::chrono::milliseconds retry);
  // The image as the pull policy says, with the kubelet's events and pull back-off.
  bool PullImage(Pod& p, const nlohmann::json& pod, Container& c);
  // The container's volumeMounts as sandbox mounts; an error names a missing volume.
  std::string VolumeMounts(Pod& p, const nlohmann::json& pod, const Container& c,
                           const std::map<std::string, std::string>& env_map,
                           std::vector<SandboxMount>* mounts);
  // The process environment ("K=V", in order) and the mounts it needs (Ray's bin dir, hosts).
  std::vector<std::string> ProcessEnv(const Pod& p, const std::string& hostname,
                                      const std::vector<std::pair<std::string, std::string>>& env,
                                      std::vector<SandboxMount>* mounts);
  // Writes the sandbox spec and spawns the container; on success it is running.
  bool Launch(Pod& p, const nlohmann::json& pod, Container& c, SandboxSpec s);
  void ReapExit(Pod& p, const nlohmann::json& pod, Container& c);
  // Handles an exited container that may restart; true when it was (re)started or is waiting.
  void MaybeRestart(Pod& p, const nlohmann::json& pod, Container& c);
  void KillContainer(Container& c, int sig);
  // Pins the namespace of a running container once its launcher has made it.
  static void PinNamespace(Container& c);
  static void UnpinNamespace(Container& c);
  void WriteStatus(Pod& p, const nlohmann::json& pod, bool terminal);
  nlohmann::json ComputeStatus(Pod& p, const nlohmann::json& pod, bool terminal);
  void Event(const Pod& p, const nlohmann::json& pod, const Container* c, const std::string& type,
             const std::string& reason, const std::string& note);
  std::optional<nlohmann::json> Lookup(const std::string& kind, const std::string& ns,
                                       const std::string& name);
  // Every service with an endpoint, from the views; `gen`, when given, gets the views'
  // generation they were computed from.
  std::vector<ServiceAddress> ServiceAddresses(uint64_t* gen = nullptr);
  // Lists the services and puts them into the view (a version older than the view's, or one the
  // informer saw deleted, is left out): a new sandbox's /etc/hosts is made from every service
  // that exists, not only from those the services informer has delivered so far.
  void RefreshServices();
  void MarkHostsDirty();
  bool OwnsNode(const std::string& node);
  // Pods whose volumes wait for a ConfigMap or Secret ("configmaps/<ns>/<name>") are synced as
  // soon as it is created, not only at their next retry.
  void AwaitObject(const std::string& ref, const std::string& pod_key);
  void ObjectChanged(const char* resource, const nlohmann::json& obj);
  void ForgetAwaits(const std::string& pod_key);

  KubeletOptions opts_;
  std::unique_ptr<FakePods> fake_;  // --pods fake: it runs the pods instead (node/fake_pods.h)
  std::string sandbox_error_;       // "" = sandboxes can be made
  bool own_state_dir_ = false;
  std::unique_ptr<starforge::kube::Client> client_;
  std::unique_ptr<starforge::kube::Informer> pods_;
  std::unique_ptr<starforge::kube::Informer> services_;
  std::unique_ptr<starforge::kube::Informer> nodes_;
  std::unique_ptr<starforge::kube::Informer> configmaps_;
  std::unique_ptr<starforge::kube::Informer> secrets_;
  std::mutex awaits_mu_;
  std::map<std::string, std::set<std::string>> awaits_;  // object ref -> pod keys
  std::mutex recorders_mu_;
  std::map<std::string, std::unique_ptr<controllers::EventRecorder>> recorders_;  // per node
  controllers::WorkQueue queue_;
  IpPool ips_;
  PodNetns net_;            // --pod-network netns
  std::string host_hosts_;  // the host's /etc/hosts, head of the cluster hosts file
  void WriteClusterHosts(const std::vector<ServiceAddress>& addrs);
  // What `localhost` resolves to in the pods' /etc/hosts ("" = the pod's own address).
  std::string LocalhostIp() const;
  // The pod's address (and network namespace): false, with an event, when it cannot be made.
  bool AttachNetwork(Pod& p, const nlohmann::json& pod);
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;

  std::mutex mu_;  // guards pods_rt_ and images_
  std::map<std::string, std::shared_ptr<Pod>> pods_rt_;
  std::map<std::string, std::set<std::string>> images_;  // node -> images present

  // Trimmed copies of pods and services (what endpoints and /etc/hosts need), kept by the
  // informers' handlers: a Snapshot() per change would copy every pod.
  void ViewPod(const nlohmann::json& pod, bool gone);
  void ViewService(const nlohmann::json& svc, bool gone);
  std::mutex view_mu_;
  std::map<std::string, nlohmann::json> pod_view_;
  std::map<std::string, nlohmann::json> service_view_;
  uint64_t view_gen_ = 0;  // counts the views' changes
  // Services the informer delivered as deleted, with the deletion's resourceVersion: an older
  // list (RefreshServices) must not bring them back.
  std::map<std::string, std::string> service_gone_;

  std::mutex hosts_mu_;
  std::condition_variable hosts_cv_;
  bool hosts_dirty_ = false;
};

}  // namespace kubesim::node
