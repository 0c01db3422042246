// Shared by scheduler_test.cc and kubelet_test.cc: the real kubesim binary with its scheduler and
// kubelet (short intervals), a node inventory, and small HTTP helpers over its API.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

namespace node_test {

using nlohmann::json;
namespace fs = std::filesystem;

inline const std::string kPods = "/api/v1/namespaces/default/pods";
inline const std::string kNodes = "/api/v1/nodes";
inline const std::string kEvents = "/api/v1/namespaces/default/events";

inline std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Cluster {
 public:
  // `nodes_yaml`: the --nodes inventory; `extra`: more kubesim flags.
  // `wrapper`: a command kubesim runs under (e.g. setpriv to drop root).
  explicit Cluster(const std::string& nodes_yaml, std::vector<std::string> extra = {},
                   std::vector<std::string> wrapper = {}) {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("kubesim-node-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "pv");
    {
      std::ofstream out(dir_ / "nodes.yaml");
      out << nodes_yaml;
    }
    const std::string port_file = (dir_ / "port").string();
    std::vector<std::string> args = {KUBESIM_BIN,
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--port-file",
                                     port_file,
                                     "--nodes",
                                     (dir_ / "nodes.yaml").string(),
                                     "--controllers",
                                     "scheduler,kubelet",
                                     "--kubelet-dir",
                                     (dir_ / "kubelet").string(),
                                     "--pv-root",
                                     (dir_ / "pv").string(),
                                     "--kubelet-sync-ms",
                                     "300",
                                     "--kubelet-backoff-ms",
                                     "800",
                                     "--kubelet-probe-max-ms",
                                     "300",
                                     "--scheduler-backoff-ms",
                                     "100"};
    args.insert(args.end(), extra.begin(), extra.end());
    if (!wrapper.empty()) {
      args.insert(args.begin(), wrapper.begin(), wrapper.end());
      for (const auto& d : {dir_, dir_ / "pv"})
        fs::permissions(d, fs::perms::all);
    }
    const std::string log = (dir_ / "kubesim.log").string();
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 600 && port_ == 0; ++i) {
      std::ifstream in(port_file);
      if (in >> port_) break;
      port_ = 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~Cluster() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  int port() const { return port_; }
  const fs::path& dir() const { return dir_; }
  std::string Log() const { return Slurp(dir_ / "kubesim.log"); }

  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    return c;
  }

  json Get(const std::string& path) const {
    auto c = Client();
    auto r = c.Get(path);
    if (!r) return json();
    return json::parse(r->body, nullptr, false);
  }
  // POST; returns the body (check "code"/"status" when a failure is expected).
  json Post(const std::string& path, const json& body, int* status = nullptr) const {
    auto c = Client();
    auto r = c.Post(path, body.dump(), "application/json");
    if (status != nullptr) *status = r ? r->status : 0;
    return r ? json::parse(r->body, nullptr, false) : json();
  }
  json Patch(const std::string& path, const json& patch) const {
    auto c = Client();
    auto r = c.Patch(path, patch.dump(), "application/merge-patch+json");
    return r ? json::parse(r->body, nullptr, false) : json();
  }
  json Delete(const std::string& path, const json& opts = json::object()) const {
    auto c = Client();
    auto r = c.Delete(path, opts.dump(), "application/json");
    return r ? json::parse(r->body, nullptr, false) : json();
  }
  json Pod(const std::string& name) const { return Get(kPods + "/" + name); }
  bool PodExists(const std::string& name) const {
    auto c = Client();
    auto r = c.Get(kPods + "/" + name);
    return r && r->status == 200;
  }
  // core/v1 events about `name`, oldest first.
  std::vector<json> Events(const std::string& name) const {
    json list = Get(kEvents + "?fieldSelector=involvedObject.name%3D" + name);
    std::vector<json> out;
    if (list.contains("items")) {
      for (const auto& e : list["items"])
        out.push_back(e);
    }
    return out;
  }
  // Messages of events with `reason` about `name`.
  std::vector<std::string> EventMessages(const std::string& name, const std::string& reason) const {
    std::vector<std::string> out;
    for (const auto& e : Events(name)) {
      if (e.value("reason", "") == reason) out.push_back(e.value("message", ""));
    }
    return out;
  }
  std::string Logs(const std::string& pod, const std::string& query = "") const {
    auto c = Client();
    auto r = c.Get(kPods + "/" + pod + "/log" + query);
    return r ? r->body : "";
  }

 private:
  fs::path dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// Polls `pred` until it holds or `timeout` passes.
inline bool WaitFor(const std::function<bool()>& pred,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

inline std::string Phase(const json& pod) {
  return pod.is_object() && pod.contains("status") ? pod["status"].value("phase", "") : "";
}

// The condition of `type` in a pod's status ({} when absent).
inline json Condition(const json& pod, const std::string& type) {
  if (!pod.is_object() || !pod.contains("status") || !pod["status"].contains("conditions")) {
    return json::object();
  }
  for (const auto& c : pod["status"]["conditions"]) {
    if (c.value("type", "") == type) return c;
  }
  return json::object();
}

// The status entry of container `name` (init containers too).
inline json ContainerStatus(const json& pod, const std::string& name) {
  if (!pod.contains("status")) return json();
  for (const char* list : {"containerStatuses", "initContainerStatuses"}) {
    if (!pod["status"].contains(list)) continue;
    for (const auto& c : pod["status"][list]) {
      if (c.value("name", "") == name) return c;
    }
  }
  return json();
}

// A pod with one container running `sh -c script`.
inline json ShPod(const std::string& name, const std::string& script,
                  const std::string& restart = "Never") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"restartPolicy", restart},
            {"terminationGracePeriodSeconds", 5},
            {"containers", json::array({{{"name", "main"},
                                         {"image", "busybox:1.36"},
                                         {"command", json::array({"sh", "-c", script})}}})}}}};
}

}  // namespace node_test
