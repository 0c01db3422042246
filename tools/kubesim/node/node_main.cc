// kubesim-node: kubesim's kubelet (node/kubelet.h) against an external API server, such as the
// real kube-apiserver of tools/k8s/controlplane. It registers the inventory's Nodes (Ready, with
// the inventory's capacity), renews each node's Lease in kube-node-lease as a kubelet does (so
// the node lifecycle controller keeps them Ready), runs the pods the scheduler binds to them
// exactly as kubesim does, and serves the kubelet API's container logs over TLS, which is what
// kube-apiserver calls for `kubectl logs`. See docs/real-control-plane.md, "Nodes".
//
//   kubesim-node --kubeconfig FILE --nodes nodes.yaml [--kubelet-port N] [--<kubelet flag> V]…
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "apiserver/tls.h"
#include "controllers/controller.h"
#include "controllers/kubeutil.h"
#include "node/kubelet.h"
#include "node/pod_netns.h"
#include "parse_yaml.h"
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
  json doc = kubesim::ParseYamlOrThrow(text.str());
  if (doc.is_object() && doc.contains("items")) doc = doc["items"];
  if (doc.is_object()) doc = json::array({doc});
  if (!doc.is_array()) throw std::runtime_error(file + ": not a list of Nodes");
  return doc.get<std::vector<json>>();
}

// The Node a kubelet registers: the inventory's metadata and capacity, Ready, its kubelet API at
// `address` (its InternalIP), and `pod_cidr` as spec.podCIDR(s) when given (--pod-network netns:
// the kubelet hands out that node's pod addresses from it, as kube-controller-manager's node IPAM
// would have assigned; the inventory's own spec.podCIDR wins).
json NodeObject(json node, const std::string& address, int kubelet_port,
                const std::string& pod_cidr) {
  node["apiVersion"] = "v1";
  node["kind"] = "Node";
  if (!pod_cidr.empty() && !(node.contains("spec") && node["spec"].contains("podCIDR"))) {
    node["spec"]["podCIDR"] = pod_cidr;
    node["spec"]["podCIDRs"] = json::array({pod_cidr});
  }
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
  // InternalIP first: kube-apiserver dials it when run with
  // --kubelet-preferred-address-types=InternalIP,… (tools/k8s/controlplane does).
  status["addresses"] = json::array(
      {{{"type", "InternalIP"}, {"address", address}}, {{"type", "Hostname"}, {"address", name}}});
  status["daemonEndpoints"] = {{"kubeletEndpoint", {{"Port", kubelet_port}}}};
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

// The last `tail` lines of `text` (all when tail < 0).
std::string Tail(const std::string& text, long long tail) {
  if (tail < 0) return text;
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (long long n = 0; pos > 0; --pos) {
    if (text[pos - 1] == '\n' && ++n == tail) break;
  }
  return text.substr(pos);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The kubelet API's GET /containerLogs/{namespace}/{pod}/{container} (tailLines, limitBytes,
// follow, previous), read from the log file the kubelet names in the pod's annotation
// kubesim.starforge.dev/log-file.<container>. Unauthenticated: it listens on loopback only.
void ServeLogs(httplib::Server& server, kube::Client& client) {
  server.Get(R"(/containerLogs/([^/]+)/([^/]+)/([^/]+))", [&client](const httplib::Request& req,
                                                                    httplib::Response& res) {
    const std::string ns = req.matches[1], pod = req.matches[2], container = req.matches[3];
    std::string file;
    try {
      const json p = client.Get(kube::resources::kPods, ns, pod);
      const json& annotations = p["metadata"].value("annotations", json::object());
      file =
          annotations.value(std::string(kubesim::node::kLogFileAnnotationPrefix) + container, "");
    } catch (const std::exception& e) {
      res.status = 404;
      res.set_content(e.what(), "text/plain");
      return;
    }
    if (req.get_param_value("previous") == "true" && !file.empty()) {
      // The kubelet names each run's log "<dir>/<restart>.log": the previous run is one less.
      const auto slash = file.rfind('/');
      const int run = std::atoi(file.c_str() + slash + 1);
      file = run > 0 ? file.substr(0, slash + 1) + std::to_string(run - 1) + ".log" : "";
    }
    if (file.empty()) {
      res.status = 400;
      res.set_content("container \"" + container + "\" in pod \"" + pod + "\" has no log yet",
                      "text/plain");
      return;
    }
    long long tail = -1, limit = -1;
    if (req.has_param("tailLines")) tail = std::stoll(req.get_param_value("tailLines"));
    if (req.has_param("limitBytes")) limit = std::stoll(req.get_param_value("limitBytes"));
    std::string text = Tail(ReadFile(file), tail);
    if (limit >= 0 && static_cast<long long>(text.size()) > limit) text.resize(limit);
    if (req.get_param_value("follow") != "true") {
      res.set_content(text, "text/plain");
      return;
    }
    // Follow: what exists, then what is appended, until the pod ends or goes away.
    auto sent = std::make_shared<size_t>(ReadFile(file).size());
    auto first = std::make_shared<std::string>(text);
    res.set_chunked_content_provider(
        "text/plain", [&client, sent, first, file, ns, pod](size_t, httplib::DataSink& sink) {
          if (!first->empty()) {
            std::string s = std::move(*first);
            first->clear();
            return sink.write(s.data(), s.size());
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          bool ended = true;
          try {
            const std::string phase =
                client.Get(kube::resources::kPods, ns, pod)["status"].value("phase", "");
            ended = phase == "Succeeded" || phase == "Failed";
          } catch (const std::exception&) {
          }
          const std::string now = ReadFile(file);
          if (now.size() > *sent) {
            const std::string more = now.substr(*sent);
            *sent = now.size();
            if (!sink.write(more.data(), more.size())) return false;
          }
          if (ended) sink.done();
          return true;
        });
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::string kubeconfig, nodes_file;
  int kubelet_port = 0;
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
    } else if (a == "--kubelet-port") {
      kubelet_port = std::stoi(v);
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
    const starforge::StatusOr<kube::ClientConfig> loaded = kube::LoadKubeconfig({kubeconfig}, "");
    if (!loaded.ok()) {
      std::fprintf(stderr, "kubesim-node: %s\n", loaded.status().message().c_str());
      return 1;
    }
    const kube::ClientConfig& config = *loaded;
    auto make_client = [config](const std::string& name) {
      kube::ClientOptions opts;
      opts.user_agent = "kubesim-node/" + name;
      return std::make_unique<kube::Client>(config, opts);
    };
    auto client = make_client("node-registration");

    // The kubelet first: with --pod-network netns it makes the host bridge, whose address is
    // then the nodes' InternalIP and where the kubelet API listens (pods see the host there).
    const bool netns = ctx.flags.Value("pod-network", "loopback") == "netns";
    kubesim::node::Cidr cluster;
    if (netns) cluster = kubesim::node::ParseCidr(ctx.flags.Value("pod-cidr", "10.244.0.0/16"));
    const std::vector<json> inventory = LoadNodes(nodes_file);
    std::vector<std::string> pod_cidrs;  // per node ("" = none)
    for (size_t i = 0; i < inventory.size(); ++i) {
      pod_cidrs.push_back(
          netns ? kubesim::node::NodePodCidr(cluster, static_cast<int>(i)).ToString() : "");
    }
    ctx.server_url = config.server;
    ctx.nodes_file = nodes_file;
    ctx.make_client = make_client;
    kubesim::controllers::ControllerSet controllers;
    controllers.StartAll(ctx);
    const std::string address =
        netns ? kubesim::node::FormatIp(kubesim::node::GatewayOf(cluster)) : "127.0.0.1";

    // The kubelet API (HTTPS with a self-signed certificate: kube-apiserver does not verify
    // kubelets without --kubelet-certificate-authority), on that address only.
    const std::string state = ctx.flags.Value("kubelet-dir", "");
    const std::string tls_dir =
        state.empty() ? std::filesystem::temp_directory_path().string() : state;
    std::filesystem::create_directories(tls_dir);
    const std::string cert = tls_dir + "/kubelet-" + std::to_string(getpid()) + ".crt";
    const std::string key = tls_dir + "/kubelet-" + std::to_string(getpid()) + ".key";
    kubesim::WriteSelfSignedCert(cert, key);
    httplib::SSLServer api(cert.c_str(), key.c_str());
    std::filesystem::remove(key);
    std::filesystem::remove(cert);
    if (!api.is_valid()) throw std::runtime_error("cannot set up the kubelet API's TLS");
    api.set_tcp_nodelay(true);  // as Go's servers (the kubelet's): no Nagle delay per response
    auto logs_client = make_client("kubelet-api");
    ServeLogs(api, *logs_client);
    const int port = kubelet_port > 0
                         ? (api.bind_to_port(address, kubelet_port) ? kubelet_port : -1)
                         : api.bind_to_any_port(address);
    if (port <= 0) throw std::runtime_error("cannot listen on " + address + " for the kubelet API");
    std::thread api_thread([&api] { api.listen_after_bind(); });

    std::vector<std::string> names;
    for (size_t i = 0; i < inventory.size(); ++i) {
      const json object = NodeObject(inventory[i], address, port, pod_cidrs[i]);
      Register(*client, object);
      RenewLease(*client, object["metadata"]["name"]);
      names.push_back(object["metadata"]["name"]);
    }

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
    std::fprintf(stderr, "kubesim-node: running %zu node(s) against %s; kubelet API on %s:%d\n",
                 names.size(), config.server.c_str(), address.c_str(), port);
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::fprintf(stderr, "kubesim-node: stopping\n");
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    renewer.join();
    api.stop();
    api_thread.join();
    controllers.StopAll();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kubesim-node: %s\n", e.what());
    return 1;
  }
  return 0;
}
