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

#include "support/files.h"
#include "support/kubesim.h"
#include "support/poll.h"

namespace node_test {

using nlohmann::json;
namespace fs = std::filesystem;

inline const std::string kPods = "/api/v1/namespaces/default/pods";
inline const std::string kNodes = "/api/v1/nodes";
inline const std::string kEvents = "/api/v1/namespaces/default/events";

inline std::string Slurp(const fs::path& p) {
  return starforge::support::ReadFile(p);
}

class Cluster {
 public:
  // `nodes_yaml`: the --nodes inventory; `extra`: more kubesim flags.
  // `wrapper`: a command kubesim runs under (e.g. setpriv to drop root).
  explicit Cluster(const std::string& nodes_yaml, std::vector<std::string> extra = {},
                   std::vector<std::string> wrapper = {}) {
    const fs::path& dir = process_.dir();
    fs::create_directories(dir / "pv");
    starforge::support::WriteFile(dir / "nodes.yaml", nodes_yaml);
    std::vector<std::string> flags = {"--nodes",
                                      (dir / "nodes.yaml").string(),
                                      "--controllers",
                                      "scheduler,kubelet",
                                      "--kubelet-dir",
                                      (dir / "kubelet").string(),
                                      "--pv-root",
                                      (dir / "pv").string(),
                                      "--kubelet-sync-ms",
                                      "300",
                                      "--kubelet-backoff-ms",
                                      "800",
                                      "--kubelet-probe-max-ms",
                                      "300",
                                      "--scheduler-backoff-ms",
                                      "100"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    if (!wrapper.empty()) {
      for (const auto& d : {dir, dir / "pv"})
        fs::permissions(d, fs::perms::all);
    }
    starforge::support::ProcessOptions how;
    how.argv = wrapper;
    process_.Start(KUBESIM_BIN, flags, how);
  }
  int port() const { return process_.port(); }
  pid_t pid() const { return process_.pid(); }
  const fs::path& dir() const { return process_.dir(); }
  std::string Log() const { return process_.Log(); }

  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port());
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
  starforge::support::KubesimProcess process_;
};

// Polls `pred` until it holds or `timeout` passes.
inline bool WaitFor(const std::function<bool()>& pred,
                    std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  return starforge::support::Eventually(pred, timeout, std::chrono::milliseconds(50));
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
