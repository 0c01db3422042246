// kubesim-node: kubesim's kubelet (node/kubelet.h) against an external API server, such as the
// real kube-apiserver of tools/k8s/controlplane. It registers the inventory's Nodes (Ready, with
// the inventory's capacity), renews each node's Lease in kube-node-lease as a kubelet does (so
// the node lifecycle controller keeps them Ready), and runs the pods the scheduler binds to them
// exactly as kubesim does. See docs/real-control-plane.md, "Nodes".
//
//   kubesim-node --kubeconfig FILE --nodes nodes.yaml [--<kubelet flag> VALUE]…
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "controllers/controller.h"
#include "controllers/kubeutil.h"
#include "starforge/common/yaml_json.h"
#include "starforge/kube/client.h"
#include "starforge/kube/client_config.h"
#include "starforge/kube/errors.h"
#include "starforge/kube/resource.h"

namespace {

using nlohmann::json;
namespace kube = starforge::kube;

const kube::ResourceRef kLeases{"coordination.k8s.io", "v1", "leases", true, "Lease"};
constexpr int kLeaseSeconds = 40;  // the kubelet's default nodeLeaseDurationSeconds

int Usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "kubesim-node: %s\n", why.c_str());
  std::fprintf(stderr,
               "usage: kubesim-node --kubeconfig FILE --nodes nodes.yaml [--<kubelet flag> V]…\n"
               "kubelet flags:\n");
  for (const auto& info : kubesim::controllers::RegisteredControllers()) {
    if (info.name != "kubelet") continue;
    for (const auto& f : info.flags)
      std::fprintf(stderr, "  --%s: %s\n", f.name.c_str(), f.help.c_str());
  }
  return 2;
}

// The inventory file as a list of Node objects (a YAML list, a List, or one document).
std::vector<json> LoadNodes(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read " + file);
  std::stringstream text;
  text << in.rdbuf();
  json doc = starforge::ParseYaml(text.str());
  if (doc.is_object() && doc.contains("items")) doc = doc["items"];
  if (doc.is_object()) doc = json::array({doc});
  if (!doc.is_array()) throw std::runtime_error(file + ": not a list of Nodes");
  return doc.get<std::vector<json>>();
}

// The Node a kubelet registers: the inventory's metadata and capacity, Ready, reachable by its
// name (the API server dials Hostname addresses first).
json NodeObject(json node) {
  node["apiVersion"] = "v1";
  node["kind"] = "Node";
  json& status = node["status"];
  if (!status.is_object()) status = json::object();
  for (const char* field : {"capacity", "allocatable"}) {
    if (!status[field].is_object()) status[field] = json::object();
    if (!status[field].contains("pods")) status[field]["pods"] = "110";
  }
  const std::string name = node["metadata"].value("name", "");
  const std::string now = kubesim::controllers::NowRfc3339();
  status["conditions"] = json::array({{{"type", "Ready"},
                                       {"status", "True"},
                                       {"reason", "KubeletReady"},
                                       {"message", "kubesim-node is posting ready status"},
                                       {"lastHeartbeatTime", now},
                                       {"lastTransitionTime", now}}});
  status["addresses"] = json::array({{{"type", "Hostname"}, {"address", name}}});
  status["nodeInfo"] = {{"kubeletVersion", "kubesim"},
                        {"operatingSystem", "linux"},
                        {"architecture", "amd64"},
                        {"containerRuntimeVersion", "kubesim://1"},
                        {"kernelVersion", ""},
                        {"osImage", "kubesim"},
                        {"kubeProxyVersion", ""},
                        {"machineID", ""},
                        {"systemUUID", ""},
                        {"bootID", ""}};
  return node;
}

// Creates the Node, or replaces the status of one that exists (a restarted kubelet).
void Register(kube::Client& client, const json& node) {
  const std::string name = node["metadata"]["name"];
  try {
    client.Create(kube::resources::kNodes, "", node);
  } catch (const kube::ApiError& e) {
    if (e.reason() != kube::Reason::kAlreadyExists) throw;
    json current = client.Get(kube::resources::kNodes, "", name);
    current["status"] = node["status"];
    client.UpdateStatus(kube::resources::kNodes, "", current);
  }
  std::fprintf(stderr, "kubesim-node: registered node %s\n", name.c_str());
}

// MicroTime, as Lease.spec.renewTime wants it.
std::string NowMicro() {
  const auto now = std::chrono::system_clock::now();
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  std::string s = kubesim::controllers::Rfc3339(us / 1000000);  // 2006-01-02T15:04:05Z
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%06lldZ", static_cast<long long>(us % 1000000));
  return s.substr(0, s.size() - 1) + frac;
}

void RenewLease(kube::Client& client, const std::string& node) {
  json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", node}, {"namespace", "kube-node-lease"}}},
                {"spec",
                 {{"holderIdentity", node},
                  {"leaseDurationSeconds", kLeaseSeconds},
                  {"renewTime", NowMicro()}}}};
  try {
    json current = client.Get(kLeases, "kube-node-lease", node);
    current["spec"] = lease["spec"];
    client.Update(kLeases, "kube-node-lease", current);
  } catch (const kube::ApiError& e) {
    if (e.reason() != kube::Reason::kNotFound) throw;
    client.Create(kLeases, "kube-node-lease", lease);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string kubeconfig, nodes_file;
  kubesim::controllers::ControllerContext ctx;
  ctx.flags.enabled = {"kubelet"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") return Usage("");
    if (a.rfind("--", 0) != 0 || i + 1 >= argc) return Usage("unexpected argument " + a);
    const std::string v = argv[++i];
    if (a == "--kubeconfig") {
      kubeconfig = v;
    } else if (a == "--nodes") {
      nodes_file = v;
    } else if (kubesim::controllers::IsControllerFlag(a.substr(2))) {
      ctx.flags.values[a.substr(2)] = v;
    } else {
      return Usage("unknown flag " + a);
    }
  }
  if (kubeconfig.empty() || nodes_file.empty())
    return Usage("--kubeconfig and --nodes are required");

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  try {
    const kube::ClientConfig config = kube::LoadKubeconfig({kubeconfig}, "");
    auto make_client = [config](const std::string& name) {
      kube::ClientOptions opts;
      opts.user_agent = "kubesim-node/" + name;
      return std::make_unique<kube::Client>(config, opts);
    };
    auto client = make_client("node-registration");
    std::vector<std::string> names;
    for (const json& node : LoadNodes(nodes_file)) {
      const json object = NodeObject(node);
      Register(*client, object);
      RenewLease(*client, object["metadata"]["name"]);
      names.push_back(object["metadata"]["name"]);
    }

    ctx.server_url = config.server;
    ctx.nodes_file = nodes_file;
    ctx.make_client = make_client;
    kubesim::controllers::ControllerSet controllers;
    controllers.StartAll(ctx);

    // Leases every leaseDuration/4, as the kubelet renews them.
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;
    std::thread renewer([&] {
      std::unique_lock<std::mutex> lock(mu);
      while (!cv.wait_for(lock, std::chrono::seconds(kLeaseSeconds / 4), [&] { return stop; })) {
        for (const auto& n : names) {
          try {
            RenewLease(*client, n);
          } catch (const std::exception& e) {
            std::fprintf(stderr, "kubesim-node: lease %s: %s\n", n.c_str(), e.what());
          }
        }
      }
    });
    std::fprintf(stderr, "kubesim-node: running %zu node(s) against %s\n", names.size(),
                 config.server.c_str());
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::fprintf(stderr, "kubesim-node: stopping\n");
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    renewer.join();
    controllers.StopAll();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kubesim-node: %s\n", e.what());
    return 1;
  }
  return 0;
}
