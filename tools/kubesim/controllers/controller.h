// The controller frame of kubesim (docs/kubesim.md, "Operator and Job controller").
//
// kubesim's controllers (the KubeRay operator, the batch Job controller, the scheduler, the
// kubelet) are API clients of kubesim itself, as kube-controller-manager and the KubeRay operator
// are clients of kube-apiserver: they run as threads in the kubesim process, observe through
// starforge::kube::Informer and write through starforge::kube::Client over loopback, so every
// write passes admission, defaulting, validation, resourceVersions and watch fan-out.
//
// Every request of a controller's client carries `X-Kubesim-Controller: <name>` plus a key made
// at process start (`X-Kubesim-Controller-Key`), so the server can tell its own controllers from
// pods that happen to send the first header: such requests are an administrator, never faulted,
// and counted apart (GET /kubesim/requests?controllers=1), never in /kubesim/requests.
//
// A controller registers itself with KUBESIM_REGISTER_CONTROLLER (a static registration; the
// controller sources are linked as an OBJECT library, so no registration is dropped by the
// linker). It may declare flags of its own; main.cc accepts them and hands their values over in
// ControllerFlags::values.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "starforge/kube/client.h"

namespace kubesim::controllers {

// The header naming the controller, and the one carrying the process's controller key.
inline constexpr const char* kControllerHeader = "X-Kubesim-Controller";
inline constexpr const char* kControllerKeyHeader = "X-Kubesim-Controller-Key";

struct ControllerFlags {
  // --controllers all|none|a,b,c (default all). The resolved set of names to start.
  std::set<std::string> enabled;
  // --operator-version v1.4|v1.7 (default v1.7): events.k8s.io/v1 events with action and
  // ValidationFailed/PreRunning on v1.7; core/v1 events with source.component and no
  // ValidationFailed state / preRunningDeadlineSeconds on v1.4.
  std::string operator_version = "v1.7";
  // --resync-ms: the RayJob requeue interval (KubeRay: 3 s).
  int resync_ms = 3000;
  // --ray-dashboard-port: the port the operator uses to reach a head pod's dashboard at its
  // status.podIP (0 = the head service's `dashboard` port, 8265 by default; tests point it at
  // their fake Jobs API).
  int ray_dashboard_port = 0;
  // Values of flags declared by controllers (ControllerInfo::flags), keyed by flag name without
  // the leading dashes ("images" for --images).
  std::map<std::string, std::string> values;

  std::string Value(const std::string& name, const std::string& fallback = "") const {
    auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
  }
  bool OperatorAtLeast(int major, int minor) const;  // operator_version >= vMAJOR.MINOR
};

struct ControllerContext {
  // This kubesim over loopback: "http://127.0.0.1:PORT" or "https://127.0.0.1:PORT".
  std::string server_url;
  // --tls: kubesim's own certificate (the controllers' clients trust it).
  std::string ca_file;
  // The store's node inventory file (--nodes), for controllers that want it ("" = none).
  std::string nodes_file;
  ControllerFlags flags;
  // A new client whose requests carry the controller headers for `name` (e.g. "rayjob-controller",
  // "job-controller", "default-scheduler", "kubelet"). Thread-safe; each call makes a new client.
  std::function<std::unique_ptr<starforge::kube::Client>(const std::string& name)> make_client;
};

class Controller {
 public:
  virtual ~Controller() = default;
  // Starts the controller's threads and returns (informers need not have synced yet: the
  // listener accepts connections once Server::Run serves).
  virtual void Start(const ControllerContext& ctx) = 0;
  // Stops and joins every thread; idempotent; returns within a few seconds.
  virtual void Stop() = 0;
};

struct ControllerFlag {
  ControllerFlag(std::string name_, std::string help_,
                 std::function<std::string(const std::string&)> check_ = {})
      : name(std::move(name_)), help(std::move(help_)), check(std::move(check_)) {}
  std::string name;  // without dashes: "images"
  std::string help;  // one line for --help
  // Checks a value at startup: "" when it is good, else what is wrong (kubesim then exits with
  // the usage). Unset = any value.
  std::function<std::string(const std::string& value)> check;
};

// A ControllerFlag::check for a whole number >= 1.
std::string CheckPositiveInt(const std::string& value);
// The flag `name` as a number >= 1, or `fallback` when it was not given.
int PositiveIntFlag(const ControllerFlags& flags, const std::string& name, int fallback);
// Finds the declared flag `name` (null when none declares it).
const ControllerFlag* FindControllerFlag(const std::string& name);

struct ControllerInfo {
  std::string name;  // the --controllers name: operator, jobs, scheduler, kubelet
  std::function<std::unique_ptr<Controller>()> make;
  std::vector<ControllerFlag> flags;
  int order = 100;  // start order (lower first); all are stopped together
};

// Static registration (use the macro). Returns true.
bool RegisterController(ControllerInfo info);
// Every registered controller, by start order then name.
std::vector<ControllerInfo> RegisteredControllers();
// Whether `--<name> VALUE` is a flag declared by a registered controller.
bool IsControllerFlag(const std::string& name);

// Parses --controllers: "all", "none" or a comma list of registered names. Throws
// std::invalid_argument naming an unknown controller and the known ones.
std::set<std::string> ParseControllerSelection(const std::string& text);

// A random key for this process (hex), sent by controller clients and checked by the server.
const std::string& ControllerKey();

// Reconciles run per controller name (controllers/reconciler.h counts them), shown by
// `GET /kubesim/requests?controllers=1` beside the requests: what a reconcile costs the API is
// requests / reconciles, and a test can wait for "one more reconcile" without it sending any.
void CountReconcile(const std::string& name);
// The counts so far; `reset` clears them after reading.
std::map<std::string, uint64_t> ReconcileCounts(bool reset);

// The controllers a kubesim process runs: started after the listener is up, stopped before exit.
class ControllerSet {
 public:
  ~ControllerSet();
  // Makes and starts every enabled registered controller in order.
  void StartAll(const ControllerContext& ctx);
  // Stops them (side by side). Idempotent and thread-safe.
  void StopAll();

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Controller>> running_;
};

// The client factory for ControllerContext::make_client.
std::unique_ptr<starforge::kube::Client> MakeControllerClient(const std::string& server_url,
                                                              const std::string& ca_file,
                                                              const std::string& name);

}  // namespace kubesim::controllers

#define KUBESIM_CONTROLLER_CONCAT2(a, b) a##b
#define KUBESIM_CONTROLLER_CONCAT(a, b) KUBESIM_CONTROLLER_CONCAT2(a, b)
// KUBESIM_REGISTER_CONTROLLER({"jobs", [] { return std::make_unique<JobController>(); }, {}})
#define KUBESIM_REGISTER_CONTROLLER(...)                                                  \
  static const bool KUBESIM_CONTROLLER_CONCAT(kubesim_controller_registered_, __LINE__) = \
      ::kubesim::controllers::RegisterController(                                         \
          ::kubesim::controllers::ControllerInfo __VA_ARGS__)
