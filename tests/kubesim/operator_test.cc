// Tests of kubesim's controllers (the KubeRay operator and the batch Job controller) through
// the API, as a client sees them: the real binary runs with --controllers operator,jobs; the
// test plays the kubelet (pod status through /status) and the head pod's Ray Jobs API (an httplib
// server on 127.0.0.1, reached by the operator at the head pod's status.podIP and the port given
// with --ray-dashboard-port). Scenarios: docs/upstream-facts.md §2, §9.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "starforge/common/yaml_json.h"
#include "support/kubesim.h"

using nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// ---- the kubesim process -------------------------------------------------------------------

class Sim {
 public:
  explicit Sim(const std::vector<std::string>& extra) {
    starforge::support::ProcessOptions how;
    how.death_signal = SIGTERM;  // never outlive a crashed test
    process_.Start(KUBESIM_BIN, extra, how);
  }
  int port() const { return process_.port(); }
  std::string Log() const { return process_.Log(); }

  json Req(const std::string& method, const std::string& path, const json& body = json(),
           int* status = nullptr, const std::string& ctype = "application/json") const {
    httplib::Client c("127.0.0.1", port());
    c.set_read_timeout(20, 0);
    const std::string b = body.is_null() ? "" : body.dump();
    httplib::Result r = method == "GET"     ? c.Get(path)
                        : method == "POST"  ? c.Post(path, b, ctype)
                        : method == "PUT"   ? c.Put(path, b, ctype)
                        : method == "PATCH" ? c.Patch(path, b, ctype)
                        : b.empty()         ? c.Delete(path)
                                            : c.Delete(path, b, ctype);
    if (!r) {
      ADD_FAILURE() << method << " " << path << ": no response";
      return json();
    }
    if (status != nullptr) *status = r->status;
    return json::parse(r->body, nullptr, false);
  }
  json Get(const std::string& path, int* status = nullptr) const {
    return Req("GET", path, json(), status);
  }
  json Create(const std::string& path, const json& obj) const {
    int status = 0;
    json out = Req("POST", path, obj, &status);
    EXPECT_EQ(status, 201) << out.dump();
    return out;
  }
  json MergePatch(const std::string& path, const json& patch) const {
    int status = 0;
    json out = Req("PATCH", path, patch, &status, "application/merge-patch+json");
    EXPECT_EQ(status, 200) << path << ": " << out.dump();
    return out;
  }

 private:
  starforge::support::KubesimProcess process_;
};

// ---- a fake Ray Jobs API (the head pod's dashboard) ----------------------------------------

class FakeRay {
 public:
  FakeRay() {
    srv_.Get("/api/gcs_healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("success", "text/plain");
    });
    srv_.Get(R"(/api/jobs/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      ++gets_;
      auto it = jobs_.find(req.matches[1]);
      if (it == jobs_.end()) {
        res.status = 404;
        res.set_content("Job " + std::string(req.matches[1]) + " does not exist", "text/plain");
        return;
      }
      res.set_content(it->second.dump(), "application/json");
    });
    srv_.Post("/api/jobs/", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      json body = json::parse(req.body, nullptr, false);
      submissions_.push_back(body);
      const std::string id = body.value("submission_id", "raysubmit_x");
      if (jobs_.count(id) != 0) {
        res.status = 500;
        res.set_content("Job with submission_id " + id +
                            " already exists. Please use a different submission_id.",
                        "text/plain");
        return;
      }
      jobs_[id] = {{"status", "PENDING"},
                   {"message", "Job has not started yet."},
                   {"submission_id", id},
                   {"entrypoint", body.value("entrypoint", "")},
                   {"start_time", NowMs()}};
      res.set_content(json({{"job_id", id}, {"submission_id", id}}).dump(), "application/json");
    });
    srv_.Post(R"(/api/jobs/([^/]+)/stop)",
              [this](const httplib::Request& req, httplib::Response& res) {
                std::lock_guard<std::mutex> lock(mu_);
                stops_.push_back(req.matches[1]);
                auto it = jobs_.find(req.matches[1]);
                if (it != jobs_.end()) it->second["status"] = "STOPPED";
                res.set_content(R"({"stopped": true})", "application/json");
              });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    while (!srv_.is_running())
      std::this_thread::sleep_for(5ms);
  }
  ~FakeRay() {
    srv_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  static int64_t NowMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  // What the submitter's `ray job submit` would have done, then the job's progress.
  void Set(const std::string& id, const std::string& status, const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    json& j = jobs_[id];
    j["submission_id"] = id;
    j["status"] = status;
    j["message"] = message;
    if (!j.contains("start_time")) j["start_time"] = NowMs();
    if (status == "SUCCEEDED" || status == "FAILED" || status == "STOPPED") j["end_time"] = NowMs();
  }
  std::vector<json> submissions() {
    std::lock_guard<std::mutex> lock(mu_);
    return submissions_;
  }
  std::vector<std::string> stops() {
    std::lock_guard<std::mutex> lock(mu_);
    return stops_;
  }

 private:
  httplib::Server srv_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::map<std::string, json> jobs_;
  std::vector<json> submissions_;
  std::vector<std::string> stops_;
  int gets_ = 0;
};

// ---- watching a RayJob's status ------------------------------------------------------------

// Records every distinct status a RayJob shows, in order, from a watch stream.
class StatusRecorder {
 public:
  StatusRecorder(const Sim& sim, const std::string& ns, const std::string& name) {
    // The watch starts at the resourceVersion of a list taken now, so every change made after
    // the constructor returns is seen however late the watch thread connects.
    const std::string list_path =
        "/apis/ray.io/v1/namespaces/" + ns + "/rayjobs?fieldSelector=metadata.name%3D" + name;
    std::string rv;
    {
      httplib::Client c("127.0.0.1", sim.port());
      auto res = c.Get(list_path);
      if (res && res->status == 200) {
        const json list = json::parse(res->body, nullptr, false);
        if (list.is_object()) rv = list["metadata"].value("resourceVersion", "");
      }
    }
    thread_ = std::thread([this, port = sim.port(), list_path, rv] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(60, 0);
      std::string buf;
      c.Get(list_path + "&watch=true&allowWatchBookmarks=true" +
                (rv.empty() ? std::string() : "&resourceVersion=" + rv),
            [&](const char* data, size_t len) {
              buf.append(data, len);
              size_t nl;
              while ((nl = buf.find('\n')) != std::string::npos) {
                json ev = json::parse(buf.substr(0, nl), nullptr, false);
                buf.erase(0, nl + 1);
                if (!ev.is_object() || ev.value("type", "") == "BOOKMARK") continue;
                std::lock_guard<std::mutex> lock(mu_);
                const json st = ev["object"].value("status", json::object());
                if (ev.value("type", "") == "DELETED") deleted_ = true;
                if (statuses_.empty() || statuses_.back() != st) statuses_.push_back(st);
              }
              return !stop_;
            });
    });
  }
  ~StatusRecorder() {
    stop_ = true;
    thread_.join();
  }
  std::vector<json> statuses() {
    std::lock_guard<std::mutex> lock(mu_);
    return statuses_;
  }
  bool deleted() {
    std::lock_guard<std::mutex> lock(mu_);
    return deleted_;
  }
  // Waits (up to 5 s) until the sequence of `field` equals `want`, then returns it.
  std::vector<std::string> SequenceSoon(const std::string& field,
                                        const std::vector<std::string>& want) {
    for (int i = 0; i < 100 && Sequence(field) != want; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return Sequence(field);
  }
  // The sequence of a field's values, consecutive duplicates collapsed ("" = absent).
  std::vector<std::string> Sequence(const std::string& field) {
    std::vector<std::string> out;
    for (const json& s : statuses()) {
      const std::string v = s.value(field, "");
      if (out.empty() || out.back() != v) out.push_back(v);
    }
    return out;
  }

 private:
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<json> statuses_;
  bool deleted_ = false;
};

// ---- helpers -------------------------------------------------------------------------------

std::string Enc(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return pred();
}

std::string RjPath(const std::string& ns, const std::string& name = "") {
  return "/apis/ray.io/v1/namespaces/" + ns + "/rayjobs" + (name.empty() ? "" : "/" + name);
}
std::string RcPath(const std::string& ns, const std::string& name = "") {
  return "/apis/ray.io/v1/namespaces/" + ns + "/rayclusters" + (name.empty() ? "" : "/" + name);
}
std::string PodsPath(const std::string& ns, const std::string& selector = "") {
  return "/api/v1/namespaces/" + ns + "/pods" +
         (selector.empty() ? "" : "?labelSelector=" + Enc(selector));
}
std::string JobPath(const std::string& ns, const std::string& name = "") {
  return "/apis/batch/v1/namespaces/" + ns + "/jobs" + (name.empty() ? "" : "/" + name);
}
std::string SvcPath(const std::string& ns, const std::string& name = "") {
  return "/api/v1/namespaces/" + ns + "/services" + (name.empty() ? "" : "/" + name);
}

json RayJobStatus(const Sim& sim, const std::string& ns, const std::string& name) {
  return sim.Get(RjPath(ns, name)).value("status", json::object());
}

// A RayJob in the shape of the KubeRay sample: a head with named ports and one worker group.
json MakeRayJob(const std::string& name, json spec_overrides = json::object()) {
  json rj = {
      {"apiVersion", "ray.io/v1"},
      {"kind", "RayJob"},
      {"metadata", {{"name", name}}},
      {"spec",
       {{"entrypoint", "python /home/ray/samples/sample_code.py"},
        {"runtimeEnvYAML",
         "pip:\n  - requests==2.26.0\nenv_vars:\n  counter_name: \"test_counter\"\n"},
        {"rayClusterSpec",
         {{"rayVersion", "2.52.0"},
          {"headGroupSpec",
           {{"rayStartParams", json::object()},
            {"template",
             {{"spec",
               {{"containers",
                 json::array(
                     {{{"name", "ray-head"},
                       {"image", "rayproject/ray:2.52.0"},
                       {"ports", json::array({{{"containerPort", 6379}, {"name", "gcs-server"}},
                                              {{"containerPort", 8265}, {"name", "dashboard"}},
                                              {{"containerPort", 10001}, {"name", "client"}}})},
                       {"resources",
                        {{"limits", {{"cpu", "1"}, {"memory", "5Gi"}}},
                         {"requests", {{"cpu", "1"}, {"memory", "2Gi"}}}}}}})}}}}}}},
          {"workerGroupSpecs",
           json::array(
               {{{"groupName", "small-group"},
                 {"replicas", 1},
                 {"minReplicas", 1},
                 {"maxReplicas", 5},
                 {"rayStartParams", json::object()},
                 {"template",
                  {{"spec",
                    {{"containers",
                      json::array(
                          {{{"name", "ray-worker"},
                            {"image", "rayproject/ray:2.52.0"},
                            {"resources",
                             {{"limits",
                               {{"cpu", "1"}, {"memory", "1Gi"}, {"nvidia.com/gpu", "1"}}},
                              {"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}})}}}}}}})}}}}}};
  for (const auto& [k, v] : spec_overrides.items()) {
    if (v.is_null()) {
      rj["spec"].erase(k);
    } else {
      rj["spec"][k] = v;
    }
  }
  return rj;
}

// Plays the kubelet for every pod matching `selector`: Running, Ready, podIP 127.0.0.1.
void MakePodsReady(const Sim& sim, const std::string& ns, const std::string& selector) {
  json pods = sim.Get(PodsPath(ns, selector));
  for (const json& p : pods["items"]) {
    if (p.value("status", json::object()).value("phase", "") == "Running") continue;
    sim.MergePatch(
        PodsPath(ns) + "/" + p["metadata"]["name"].get<std::string>() + "/status",
        {{"status",
          {{"phase", "Running"},
           {"podIP", "127.0.0.1"},
           {"hostIP", "127.0.0.1"},
           {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}},
                                       {{"type", "PodScheduled"}, {"status", "True"}}})}}}});
  }
}

void SetPodPhase(const Sim& sim, const std::string& ns, const std::string& pod,
                 const std::string& phase) {
  sim.MergePatch(PodsPath(ns) + "/" + pod + "/status",
                 {{"status", {{"phase", phase}, {"conditions", json::array()}}}});
}

std::vector<json> Items(const json& list) {
  std::vector<json> out;
  if (list.is_object() && list.contains("items"))
    for (const json& i : list["items"])
      out.push_back(i);
  return out;
}

// events.k8s.io/v1 events regarding an object.
std::vector<json> EventsV1(const Sim& sim, const std::string& ns, const std::string& kind,
                           const std::string& name) {
  return Items(sim.Get("/apis/events.k8s.io/v1/namespaces/" + ns + "/events?fieldSelector=" +
                       Enc("regarding.kind=" + kind + ",regarding.name=" + name)));
}
// core/v1 events about an object.
std::vector<json> EventsCore(const Sim& sim, const std::string& ns, const std::string& kind,
                             const std::string& name) {
  return Items(sim.Get("/api/v1/namespaces/" + ns + "/events?fieldSelector=" +
                       Enc("involvedObject.kind=" + kind + ",involvedObject.name=" + name)));
}

std::multiset<std::string> Reasons(const std::vector<json>& events) {
  std::multiset<std::string> out;
  for (const json& e : events)
    out.insert(e.value("reason", ""));
  return out;
}

const json* FindEvent(const std::vector<json>& events, const std::string& reason) {
  for (const json& e : events)
    if (e.value("reason", "") == reason) return &e;
  return nullptr;
}
// The first event with this reason, or an empty object (so a missing event fails, not crashes).
json Ev(const std::vector<json>& events, const std::string& reason) {
  const json* e = FindEvent(events, reason);
  return e == nullptr ? json::object() : *e;
}

std::string EnvValue(const json& container, const std::string& name) {
  for (const json& e : container.value("env", json::array()))
    if (e.value("name", "") == name)
      return e.contains("value") ? e["value"].get<std::string>() : e.dump();
  return "<absent>";
}

const std::regex kRand5("[bcdfghjklmnpqrstvwxz2456789]{5}");

std::vector<std::string> Args(int dashboard_port, std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"--bookmark-interval-ms",
                                "200",
                                "--controllers",
                                "operator,jobs",
                                "--resync-ms",
                                "200",
                                "--job-backoff-ms",
                                "100",
                                "--ray-dashboard-port",
                                std::to_string(dashboard_port)};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

// ---- scenarios -----------------------------------------------------------------------------

// upstream-facts §2 "Success (K8sJobMode)" and §9 with operator v1.7.
TEST(Operator, SuccessK8sJobModeWithTtlCleanup) {
  FakeRay ray;
  Sim sim(Args(ray.port()));
  ASSERT_GT(sim.port(), 0) << sim.Log();
  sim.Create("/api/v1/namespaces",
             {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "ml"}}}});
  StatusRecorder rec(sim, "ml", "train-42");
  json rj =
      MakeRayJob("train-42", {{"shutdownAfterJobFinishes", true}, {"ttlSecondsAfterFinished", 2}});
  rj["metadata"]["labels"] = {{"team", "vision"}};
  rj["metadata"]["annotations"] = {{"starforge.dev/run", "r1"}};
  json created = sim.Create(RjPath("ml"), rj);
  const std::string uid = created["metadata"]["uid"];

  // Initializing with ids; the finalizer.
  ASSERT_TRUE(WaitFor([&] {
    return RayJobStatus(sim, "ml", "train-42").value("jobDeploymentStatus", "") == "Initializing";
  })) << sim.Log();
  json obj = sim.Get(RjPath("ml", "train-42"));
  EXPECT_EQ(obj["metadata"]["finalizers"], json::array({"ray.io/rayjob-finalizer"}));
  json st = obj["status"];
  const std::string cluster = st.value("rayClusterName", "");
  const std::string job_id = st.value("jobId", "");
  EXPECT_TRUE(std::regex_match(cluster, std::regex("train-42-[bcdfghjklmnpqrstvwxz2456789]{5}")))
      << cluster;
  EXPECT_TRUE(std::regex_match(job_id, std::regex("train-42-[bcdfghjklmnpqrstvwxz2456789]{5}")))
      << job_id;
  EXPECT_FALSE(st.contains("jobStatus"));
  EXPECT_TRUE(st.contains("startTime"));
  EXPECT_EQ(st["rayJobInfo"], json::object());
  EXPECT_EQ(st["succeeded"], 0);
  EXPECT_EQ(st["failed"], 0);

  // The RayCluster: labels, annotations, owner.
  json rc;
  ASSERT_TRUE(WaitFor([&] {
    int code = 0;
    rc = sim.Get(RcPath("ml", cluster), &code);
    return code == 200;
  }));
  EXPECT_EQ(rc["metadata"]["labels"], json({{"team", "vision"},
                                            {"ray.io/originated-from-cr-name", "train-42"},
                                            {"ray.io/originated-from-crd", "RayJob"},
                                            {"ray.io/job-submission-mode", "K8sJobMode"}}));
  EXPECT_EQ(rc["metadata"]["annotations"], json({{"starforge.dev/run", "r1"}}));
  ASSERT_EQ(rc["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(rc["metadata"]["ownerReferences"][0], json({{"apiVersion", "ray.io/v1"},
                                                        {"kind", "RayJob"},
                                                        {"name", "train-42"},
                                                        {"uid", uid},
                                                        {"controller", true},
                                                        {"blockOwnerDeletion", true}}));

  // The head service.
  json svc;
  ASSERT_TRUE(WaitFor([&] {
    int code = 0;
    svc = sim.Get(SvcPath("ml", cluster + "-head-svc"), &code);
    return code == 200;
  }));
  const json head_labels = {{"ray.io/cluster", cluster},
                            {"ray.io/node-type", "head"},
                            {"ray.io/identifier", cluster + "-head"},
                            {"app.kubernetes.io/name", "kuberay"},
                            {"app.kubernetes.io/created-by", "kuberay-operator"}};
  EXPECT_EQ(svc["metadata"]["labels"], head_labels);
  EXPECT_EQ(svc["spec"]["selector"], head_labels);
  EXPECT_EQ(svc["spec"]["clusterIP"], "None");
  EXPECT_EQ(svc["spec"]["publishNotReadyAddresses"], true);
  EXPECT_EQ(svc["spec"]["ports"], json::parse(R"([
              {"appProtocol":"tcp","name":"client","port":10001,"protocol":"TCP","targetPort":10001},
              {"appProtocol":"tcp","name":"dashboard","port":8265,"protocol":"TCP","targetPort":8265},
              {"appProtocol":"tcp","name":"gcs-server","port":6379,"protocol":"TCP","targetPort":6379},
              {"appProtocol":"tcp","name":"metrics","port":8080,"protocol":"TCP","targetPort":8080}])"));
  EXPECT_EQ(svc["metadata"]["ownerReferences"][0]["kind"], "RayCluster");

  // Head and worker pods.
  std::vector<json> heads, workers;
  ASSERT_TRUE(WaitFor([&] {
    heads = Items(sim.Get(PodsPath("ml", "ray.io/cluster=" + cluster + ",ray.io/node-type=head")));
    workers =
        Items(sim.Get(PodsPath("ml", "ray.io/cluster=" + cluster + ",ray.io/node-type=worker")));
    return heads.size() == 1 && workers.size() == 1;
  })) << sim.Log();
  const json& head = heads[0];
  EXPECT_EQ(head["metadata"]["generateName"], cluster + "-head-");
  EXPECT_TRUE(std::regex_match(head["metadata"]["name"].get<std::string>(),
                               std::regex(cluster + "-head-[bcdfghjklmnpqrstvwxz2456789]{5}")));
  EXPECT_EQ(head["metadata"]["labels"],
            json({{"ray.io/is-ray-node", "yes"},
                  {"ray.io/cluster", cluster},
                  {"ray.io/node-type", "head"},
                  {"ray.io/group", "headgroup"},
                  {"ray.io/identifier", cluster + "-head"},
                  {"app.kubernetes.io/name", "kuberay"},
                  {"app.kubernetes.io/created-by", "kuberay-operator"}}));
  EXPECT_EQ(head["metadata"]["ownerReferences"][0]["name"], cluster);
  EXPECT_EQ(head["metadata"]["annotations"]["ray.io/kuberay-version"], "v1.7.0");
  EXPECT_EQ(head["metadata"]["annotations"]["ray.io/ft-enabled"], "false");
  const json& hc = head["spec"]["containers"][0];
  const std::string head_start =
      "ray start --head  --block  --dashboard-agent-listen-port=52365  --dashboard-host=0.0.0.0  "
      "--memory=5368709120  --metrics-export-port=8080  --num-cpus=1 ";
  EXPECT_EQ(hc["command"], json::array({"/bin/bash", "-c", "--"}));
  EXPECT_EQ(hc["args"],
            json::array({"ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; " + head_start}));
  EXPECT_EQ(EnvValue(hc, "KUBERAY_GEN_RAY_START_CMD"), head_start);
  EXPECT_EQ(EnvValue(hc, "RAY_ADDRESS"), "127.0.0.1:6379");
  EXPECT_EQ(EnvValue(hc, "RAY_PORT"), "6379");
  EXPECT_EQ(EnvValue(hc, "RAY_USAGE_STATS_KUBERAY_IN_USE"), "1");
  EXPECT_EQ(EnvValue(hc, "RAY_USAGE_STATS_EXTRA_TAGS"),
            "kuberay_version=v1.7.0;kuberay_crd=RayJob");
  EXPECT_EQ(EnvValue(hc, "RAY_CLUSTER_NAME"),
            json({{"name", "RAY_CLUSTER_NAME"},
                  {"valueFrom",
                   {{"fieldRef",
                     {{"apiVersion", "v1"}, {"fieldPath", "metadata.labels['ray.io/cluster']"}}}}}})
                .dump());
  EXPECT_EQ(EnvValue(hc, "RAY_CLUSTER_NAMESPACE"),
            json({{"name", "RAY_CLUSTER_NAMESPACE"},
                  {"valueFrom",
                   {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", "metadata.namespace"}}}}}})
                .dump());
  // (apiVersion and protocol: kube-apiserver's defaults, which kubesim applies to pods.)
  EXPECT_EQ(hc["ports"].back(),
            json({{"name", "metrics"}, {"containerPort", 8080}, {"protocol", "TCP"}}));
  // (Then the ServiceAccount admission's token volume and mount, as kube-apiserver adds them.)
  ASSERT_EQ(hc["volumeMounts"].size(), 2u) << hc["volumeMounts"].dump();
  EXPECT_EQ(hc["volumeMounts"][0], json::parse(R"({"mountPath":"/dev/shm","name":"shared-mem"})"));
  ASSERT_EQ(head["spec"]["volumes"].size(), 2u) << head["spec"]["volumes"].dump();
  EXPECT_EQ(
      head["spec"]["volumes"][0],
      json::parse(R"({"name":"shared-mem","emptyDir":{"medium":"Memory","sizeLimit":"5Gi"}})"));
  const std::string token_volume = head["spec"]["volumes"][1]["name"];
  EXPECT_EQ(token_volume.rfind("kube-api-access-", 0), 0u);
  EXPECT_EQ(hc["volumeMounts"][1],
            json({{"name", token_volume},
                  {"readOnly", true},
                  {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"}}));

  const json& worker = workers[0];
  const std::string fqdn = cluster + "-head-svc.ml.svc.cluster.local";
  EXPECT_EQ(worker["metadata"]["generateName"], cluster + "-small-group-worker-");
  EXPECT_EQ(worker["metadata"]["labels"]["ray.io/group"], "small-group");
  EXPECT_EQ(worker["metadata"]["labels"]["ray.io/identifier"], cluster + "-worker");
  EXPECT_EQ(worker["metadata"]["labels"]["ray.io/worker-group-replica-index"], "0");
  const json& wc = worker["spec"]["containers"][0];
  const std::string worker_start = "ray start  --address=" + fqdn +
                                   ":6379  --block  --dashboard-agent-listen-port=52365  "
                                   "--memory=1073741824  --metrics-export-port=8080  --num-cpus=1  "
                                   "--num-gpus=1 ";
  EXPECT_EQ(EnvValue(wc, "KUBERAY_GEN_RAY_START_CMD"), worker_start);
  EXPECT_EQ(EnvValue(wc, "RAY_ADDRESS"), fqdn + ":6379");
  EXPECT_EQ(EnvValue(wc, "FQ_RAY_IP"), fqdn);
  EXPECT_EQ(EnvValue(wc, "RAY_IP"), cluster + "-head-svc");
  ASSERT_EQ(worker["spec"]["initContainers"].size(), 1u);
  const json& init = worker["spec"]["initContainers"][0];
  EXPECT_EQ(init["name"], "wait-gcs-ready");
  EXPECT_EQ(init["image"], "rayproject/ray:2.52.0");
  EXPECT_EQ(init["command"], json::array({"/bin/bash", "-c", "--"}));
  EXPECT_NE(init["args"][0].get<std::string>().find("if ray health-check --address " + fqdn +
                                                    ":6379 > /dev/null 2>&1; then"),
            std::string::npos);
  EXPECT_EQ(init["resources"]["limits"], json({{"cpu", "200m"}, {"memory", "256Mi"}}));
  EXPECT_EQ(EnvValue(init, "FQ_RAY_IP"), fqdn);

  // Pending modelling: no state, conditions False, the RayJob mirrors them and stays Initializing.
  ASSERT_TRUE(WaitFor([&] {
    rc = sim.Get(RcPath("ml", cluster));
    return rc["status"].contains("conditions");
  }));
  EXPECT_FALSE(rc["status"].contains("state"));
  EXPECT_EQ(rc["status"]["desiredWorkerReplicas"], 1);
  EXPECT_EQ(rc["status"]["desiredCPU"], "2");
  EXPECT_EQ(rc["status"]["desiredMemory"], "3Gi");
  EXPECT_EQ(rc["status"]["desiredGPU"], "1");
  std::map<std::string, json> conds;
  for (const json& c : rc["status"]["conditions"])
    conds[c["type"]] = c;
  EXPECT_EQ(conds["HeadPodReady"]["status"], "False");
  EXPECT_EQ(conds["HeadPodReady"]["reason"], "Unknown");
  EXPECT_EQ(conds["RayClusterProvisioned"]["status"], "False");
  EXPECT_EQ(conds["RayClusterProvisioned"]["reason"], "RayClusterPodsProvisioning");
  EXPECT_EQ(conds["RayClusterProvisioned"]["message"],
            "RayCluster Pods are being provisioned for first time");
  ASSERT_TRUE(WaitFor([&] {
    return RayJobStatus(sim, "ml", "train-42")["rayClusterStatus"].contains("conditions");
  }));
  EXPECT_EQ(RayJobStatus(sim, "ml", "train-42")["jobDeploymentStatus"], "Initializing");

  // The kubelet's part: all pods Running and Ready.
  MakePodsReady(sim, "ml", "ray.io/cluster=" + cluster);
  ASSERT_TRUE(WaitFor([&] {
    return sim.Get(RcPath("ml", cluster)).value("status", json::object()).value("state", "") ==
           "ready";
  })) << sim.Log();
  rc = sim.Get(RcPath("ml", cluster));
  EXPECT_EQ(rc["status"]["head"], json({{"podIP", "127.0.0.1"},
                                        {"podName", head["metadata"]["name"]},
                                        {"serviceIP", "127.0.0.1"},
                                        {"serviceName", cluster + "-head-svc"}}));
  EXPECT_EQ(rc["status"]["readyWorkerReplicas"], 1);
  EXPECT_EQ(rc["status"]["endpoints"], json({{"client", "10001"},
                                             {"dashboard", "8265"},
                                             {"gcs-server", "6379"},
                                             {"metrics", "8080"}}));
  conds.clear();
  for (const json& c : rc["status"]["conditions"])
    conds[c["type"]] = c;
  EXPECT_EQ(conds["HeadPodReady"]["status"], "True");
  EXPECT_EQ(conds["HeadPodReady"]["reason"], "HeadPodRunningAndReady");
  EXPECT_EQ(conds["RayClusterProvisioned"]["status"], "True");
  EXPECT_EQ(conds["RayClusterProvisioned"]["reason"], "AllPodRunningAndReadyFirstTime");

  // Running, the submitter Job, <rayjob>-head-svc.
  ASSERT_TRUE(WaitFor([&] {
    return RayJobStatus(sim, "ml", "train-42").value("jobDeploymentStatus", "") == "Running";
  })) << sim.Log();
  st = RayJobStatus(sim, "ml", "train-42");
  EXPECT_EQ(st["dashboardURL"], cluster + "-head-svc.ml.svc.cluster.local:8265");
  json job = sim.Get(JobPath("ml", "train-42"));
  ASSERT_EQ(job.value("kind", ""), "Job") << job.dump();
  const json origin = {{"ray.io/originated-from-cr-name", "train-42"},
                       {"ray.io/originated-from-crd", "RayJob"},
                       {"app.kubernetes.io/created-by", "kuberay-operator"}};
  EXPECT_EQ(job["metadata"]["labels"], origin);
  // The template also carries the labels kube-apiserver generates with the Job's selector.
  json tmpl_labels = origin;
  const std::string job_uid = job["metadata"]["uid"];
  for (const char* k : {"batch.kubernetes.io/controller-uid", "controller-uid"})
    tmpl_labels[k] = job_uid;
  for (const char* k : {"batch.kubernetes.io/job-name", "job-name"})
    tmpl_labels[k] = "train-42";
  EXPECT_EQ(job["spec"]["template"]["metadata"]["labels"], tmpl_labels);
  EXPECT_EQ(job["spec"]["selector"],
            json({{"matchLabels", {{"batch.kubernetes.io/controller-uid", job_uid}}}}));
  EXPECT_EQ(job["spec"]["backoffLimit"], 2);
  EXPECT_EQ(job["metadata"]["ownerReferences"][0]["uid"], uid);
  const json& sc = job["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(sc["name"], "ray-job-submitter");
  EXPECT_EQ(sc["image"], "rayproject/ray:2.52.0");
  EXPECT_EQ(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
  EXPECT_EQ(sc["command"], json::array({"/bin/bash", "-ce", "--"}));
  const std::string addr = "http://" + cluster + "-head-svc.ml.svc.cluster.local:8265";
  const std::string expected_cmd =
      "until python -c \"import urllib.request; r=urllib.request.urlopen('" + addr +
      "/api/gcs_healthz', timeout=10); exit(0 if b'success' in r.read() else 1)\" >/dev/null 2>&1 "
      "; "
      "do echo \"Waiting for Ray Dashboard GCS to become healthy at " +
      addr +
      " ...\" ; sleep 2 ; done ; "
      "if ! ray job status --address " +
      addr + " " + job_id +
      " >/dev/null 2>&1 ; then "
      "ray job submit --address " +
      addr +
      " --no-wait --runtime-env-json "
      "\"{\\\"env_vars\\\":{\\\"counter_name\\\":\\\"test_counter\\\"},\\\"pip\\\":[\\\"requests=="
      "2.26.0\\\"]}\" "
      "--submission-id " +
      job_id +
      " -- python /home/ray/samples/sample_code.py ; fi ; "
      "ray job logs --address " +
      addr + " --follow " + job_id;
  EXPECT_EQ(sc["args"], json::array({expected_cmd}));
  EXPECT_EQ(EnvValue(sc, "PYTHONUNBUFFERED"), "1");
  EXPECT_EQ(EnvValue(sc, "RAY_DASHBOARD_ADDRESS"), cluster + "-head-svc.ml.svc.cluster.local:8265");
  EXPECT_EQ(EnvValue(sc, "RAY_JOB_SUBMISSION_ID"), job_id);
  EXPECT_EQ(EnvValue(sc, "RAY_ADDRESS"), "<absent>");
  json rsvc;
  ASSERT_TRUE(WaitFor([&] {
    int code = 0;
    rsvc = sim.Get(SvcPath("ml", "train-42-head-svc"), &code);
    return code == 200;
  }));
  EXPECT_EQ(rsvc["metadata"]["labels"], json({{"ray.io/originated-from-cr-name", "train-42"},
                                              {"ray.io/originated-from-crd", "RayJob"},
                                              {"ray.io/node-type", "head"},
                                              {"ray.io/identifier", "train-42-head"}}));
  EXPECT_EQ(rsvc["spec"]["selector"], head_labels);
  EXPECT_EQ(rsvc["metadata"]["ownerReferences"][0]["uid"], uid);

  // The submitter pod (created by the Job controller) "submits"; Ray reports progress.
  std::vector<json> submitter;
  ASSERT_TRUE(WaitFor([&] {
    submitter = Items(sim.Get(PodsPath("ml", "batch.kubernetes.io/job-name=train-42")));
    return submitter.size() == 1;
  }));
  EXPECT_EQ(submitter[0]["metadata"]["labels"]["job-name"], "train-42");
  ray.Set(job_id, "PENDING",
          "Job has not started yet. It may be waiting for the runtime environment to be set up.");
  ASSERT_TRUE(WaitFor(
      [&] { return RayJobStatus(sim, "ml", "train-42").value("jobStatus", "") == "PENDING"; }));
  ray.Set(job_id, "RUNNING", "Job is currently running.");
  ASSERT_TRUE(WaitFor(
      [&] { return RayJobStatus(sim, "ml", "train-42").value("jobStatus", "") == "RUNNING"; }));
  st = RayJobStatus(sim, "ml", "train-42");
  EXPECT_EQ(st["message"], "Job is currently running.");
  EXPECT_EQ(st["jobDeploymentStatus"], "Running");
  EXPECT_FALSE(st.contains("reason"));
  EXPECT_TRUE(st["rayJobInfo"].contains("startTime"));
  EXPECT_EQ(st["rayClusterStatus"]["state"], "ready");
  ray.Set(job_id, "SUCCEEDED", "Job finished successfully.");
  ASSERT_TRUE(WaitFor(
      [&] { return RayJobStatus(sim, "ml", "train-42").value("jobStatus", "") == "SUCCEEDED"; }));
  st = RayJobStatus(sim, "ml", "train-42");
  EXPECT_EQ(st["jobDeploymentStatus"], "Running");  // until the submitter Job completes
  EXPECT_TRUE(st["rayJobInfo"].contains("endTime"));
  SetPodPhase(sim, "ml", submitter[0]["metadata"]["name"], "Succeeded");
  ASSERT_TRUE(WaitFor([&] {
    return RayJobStatus(sim, "ml", "train-42").value("jobDeploymentStatus", "") == "Complete";
  })) << sim.Log();
  st = RayJobStatus(sim, "ml", "train-42");
  EXPECT_EQ(st["succeeded"], 1);
  EXPECT_EQ(st["failed"], 0);
  EXPECT_TRUE(st.contains("endTime"));
  EXPECT_EQ(st["message"], "Job finished successfully.");

  // The status sequences a watcher saw.
  const std::vector<std::string> want_jds = {"", "Initializing", "Running", "Complete"};
  EXPECT_EQ(rec.SequenceSoon("jobDeploymentStatus", want_jds), want_jds);
  const std::vector<std::string> want_js = {"", "PENDING", "RUNNING", "SUCCEEDED"};
  EXPECT_EQ(rec.SequenceSoon("jobStatus", want_js), want_js);

  // The submitter Job completed (job controller, 1.32 conditions).
  job = sim.Get(JobPath("ml", "train-42"));
  ASSERT_EQ(job["status"]["conditions"].size(), 2u);
  EXPECT_EQ(job["status"]["conditions"][0]["type"], "SuccessCriteriaMet");
  EXPECT_EQ(job["status"]["conditions"][1]["type"], "Complete");
  EXPECT_EQ(job["status"]["conditions"][1]["reason"], "CompletionsReached");
  EXPECT_EQ(job["status"]["succeeded"], 1);

  // TTL: only the RayCluster goes (with its pods and services), the rest stays, no status change.
  ASSERT_TRUE(WaitFor(
      [&] {
        int code = 0;
        sim.Get(RcPath("ml", cluster), &code);
        return code == 404;
      },
      15s))
      << sim.Log();
  EXPECT_TRUE(
      WaitFor([&] { return Items(sim.Get(PodsPath("ml", "ray.io/cluster=" + cluster))).empty(); }));
  int code = 0;
  sim.Get(SvcPath("ml", cluster + "-head-svc"), &code);
  EXPECT_EQ(code, 404);
  sim.Get(JobPath("ml", "train-42"), &code);
  EXPECT_EQ(code, 200);
  sim.Get(SvcPath("ml", "train-42-head-svc"), &code);
  EXPECT_EQ(code, 200);
  EXPECT_EQ(Items(sim.Get(PodsPath("ml", "batch.kubernetes.io/job-name=train-42"))).size(), 1u);
  json final_st = RayJobStatus(sim, "ml", "train-42");
  EXPECT_EQ(final_st["rayClusterName"], cluster);
  EXPECT_EQ(final_st["jobDeploymentStatus"], "Complete");

  // Events: events.k8s.io/v1 from rayjob-controller / raycluster-controller; none for transitions.
  std::vector<json> ev;
  ASSERT_TRUE(WaitFor([&] {
    ev = EventsV1(sim, "ml", "RayJob", "train-42");
    return Reasons(ev).count("DeletedRayCluster") == 1;
  }));
  EXPECT_EQ(Reasons(ev), (std::multiset<std::string>{"CreatedRayCluster", "CreatedRayJobSubmitter",
                                                     "CreatedService", "DeletedRayCluster"}));
  const json* e = FindEvent(ev, "CreatedRayCluster");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ((*e)["note"], "Created RayCluster ml/" + cluster);
  EXPECT_EQ((*e)["type"], "Normal");
  EXPECT_EQ((*e)["action"], "Create");
  EXPECT_EQ((*e)["reportingController"], "rayjob-controller");
  EXPECT_EQ((*e)["regarding"]["uid"], uid);
  EXPECT_TRUE((*e)["eventTime"].is_string());
  EXPECT_EQ(Ev(ev, "CreatedRayJobSubmitter")["note"], "Created Kubernetes Job ml/train-42");
  EXPECT_EQ(Ev(ev, "CreatedService")["note"], "Created the service ml/train-42-head-svc");
  EXPECT_EQ(Ev(ev, "DeletedRayCluster")["note"], "Deleted cluster ml/" + cluster);
  EXPECT_EQ(Ev(ev, "DeletedRayCluster")["action"], "Delete");
  // Through the core API the same events show reportingComponent and no source.component.
  std::vector<json> core = EventsCore(sim, "ml", "RayJob", "train-42");
  ASSERT_FALSE(core.empty());
  EXPECT_EQ(core[0]["reportingComponent"], "rayjob-controller");
  EXPECT_FALSE(core[0].contains("source") && core[0]["source"].contains("component"));
  std::vector<json> rcev = EventsV1(sim, "ml", "RayCluster", cluster);
  EXPECT_EQ(Reasons(rcev),
            (std::multiset<std::string>{"CreatedService", "CreatedHeadPod", "CreatedWorkerPod"}));
  EXPECT_EQ(Ev(rcev, "CreatedHeadPod")["note"],
            "Created head Pod ml/" + head["metadata"]["name"].get<std::string>());
  EXPECT_EQ(Ev(rcev, "CreatedService")["note"], "Created service ml/" + cluster + "-head-svc");
  EXPECT_EQ(Ev(rcev, "CreatedHeadPod")["reportingController"], "raycluster-controller");
  // The job controller's legacy events.
  std::vector<json> jev = EventsCore(sim, "ml", "Job", "train-42");
  EXPECT_EQ(Reasons(jev), (std::multiset<std::string>{"SuccessfulCreate", "Completed"}));
  EXPECT_EQ(Ev(jev, "Completed")["message"], "Job completed");
  EXPECT_EQ(Ev(jev, "Completed")["source"]["component"], "job-controller");

  // The controllers' requests are counted apart from StarForge's own.
  json counts = sim.Get("/kubesim/requests");
  EXPECT_EQ(counts["requests"].value("update rayjobs/status", 0), 0) << counts.dump();
  EXPECT_EQ(counts["requests"].value("create rayclusters", 0), 0) << counts.dump();
  json ccounts = sim.Get("/kubesim/requests?controllers=1");
  EXPECT_GT(ccounts["controllers"]["rayjob-controller"].value("update rayjobs/status", 0), 0)
      << ccounts.dump();
  EXPECT_EQ(ccounts["controllers"]["rayjob-controller"].value("create rayclusters", 0), 1);
  EXPECT_GT(ccounts["controllers"]["raycluster-controller"].value("create pods", 0), 1);
  EXPECT_EQ(ccounts["controllers"]["job-controller"].value("create pods", 0), 1);
}

namespace {

// Creates a RayJob, waits for its RayCluster, plays the kubelet, waits for Running. Returns the
// status at Running.
json RunToRunning(const Sim& sim, const std::string& ns, const json& rj) {
  const std::string name = rj["metadata"]["name"];
  sim.Create(RjPath(ns), rj);
  std::string cluster;
  EXPECT_TRUE(WaitFor([&] {
    cluster = RayJobStatus(sim, ns, name).value("rayClusterName", "");
    return !cluster.empty() && !Items(sim.Get(PodsPath(ns, "ray.io/cluster=" + cluster))).empty();
  })) << sim.Log();
  // Wait for every desired pod, then make them ready.
  EXPECT_TRUE(WaitFor([&] {
    json rc = sim.Get(RcPath(ns, cluster));
    if (!rc.value("status", json::object()).contains("conditions")) return false;
    const int64_t want = rc["status"].value("desiredWorkerReplicas", 0) + 1;
    return static_cast<int64_t>(Items(sim.Get(PodsPath(ns, "ray.io/cluster=" + cluster))).size()) ==
           want;
  }));
  MakePodsReady(sim, ns, "ray.io/cluster=" + cluster);
  EXPECT_TRUE(WaitFor([&] {
    return RayJobStatus(sim, ns, name).value("jobDeploymentStatus", "") == "Running";
  })) << sim.Log();
  return RayJobStatus(sim, ns, name);
}

std::string WaitJds(const Sim& sim, const std::string& ns, const std::string& name,
                    const std::string& want, std::chrono::milliseconds timeout = 60s) {
  std::string got;
  WaitFor(
      [&] {
        got = RayJobStatus(sim, ns, name).value("jobDeploymentStatus", "");
        return got == want;
      },
      timeout);
  return got;
}

std::vector<json> SubmitterPods(const Sim& sim, const std::string& ns, const std::string& job) {
  return Items(sim.Get(PodsPath(ns, "batch.kubernetes.io/job-name=" + job)));
}

}  // namespace

// upstream-facts §2 "Application failure", §9.
TEST(Operator, AppFailure) {
  FakeRay ray;
  Sim sim(Args(ray.port()));
  StatusRecorder rec(sim, "default", "app-fail");
  json st = RunToRunning(sim, "default",
                         MakeRayJob("app-fail", {{"submitterConfig", {{"backoffLimit", 0}}}}));
  const std::string id = st["jobId"];
  const std::string cluster = st["rayClusterName"];
  ray.Set(id, "RUNNING", "Job is currently running.");
  ASSERT_TRUE(WaitFor([&] {
    return RayJobStatus(sim, "default", "app-fail").value("jobStatus", "") == "RUNNING";
  }));
  const std::string msg =
      "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 "
      "chars):\nZeroDivisionError: division by zero\n";
  ray.Set(id, "FAILED", msg);
  ASSERT_TRUE(WaitFor(
      [&] { return RayJobStatus(sim, "default", "app-fail").value("jobStatus", "") == "FAILED"; }));
  EXPECT_EQ(RayJobStatus(sim, "default", "app-fail")["jobDeploymentStatus"], "Running");
  // The submitter's `ray job logs --follow` ends; the Job (backoffLimit 0) fails.
  std::vector<json> pods;
  ASSERT_TRUE(
      WaitFor([&] { return (pods = SubmitterPods(sim, "default", "app-fail")).size() == 1; }));
  SetPodPhase(sim, "default", pods[0]["metadata"]["name"], "Failed");
  EXPECT_EQ(WaitJds(sim, "default", "app-fail", "Failed"), "Failed") << sim.Log();
  st = RayJobStatus(sim, "default", "app-fail");
  EXPECT_EQ(st["reason"], "AppFailed");
  EXPECT_EQ(st["message"], msg);
  EXPECT_EQ(st["jobStatus"], "FAILED");
  EXPECT_EQ(st["failed"], 1);
  EXPECT_EQ(st["succeeded"], 0);
  EXPECT_TRUE(st.contains("endTime"));
  const std::vector<std::string> want = {"", "Initializing", "Running", "Failed"};
  EXPECT_EQ(rec.SequenceSoon("jobDeploymentStatus", want), want);
  // No shutdown: the cluster stays.
  std::this_thread::sleep_for(600ms);
  int code = 0;
  sim.Get(RcPath("default", cluster), &code);
  EXPECT_EQ(code, 200);
}

// upstream-facts §2 "Submitter failure", §9: three submitter pods, BackoffLimitExceeded, jobStatus
// absent.
TEST(Operator, SubmitterFailure) {
  FakeRay ray;
  Sim sim(Args(ray.port()));
  StatusRecorder rec(sim, "default", "sub-fail");
  RunToRunning(sim, "default", MakeRayJob("sub-fail"));
  std::set<std::string> seen;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::string pending;
    ASSERT_TRUE(WaitFor([&] {
      for (const json& p : SubmitterPods(sim, "default", "sub-fail")) {
        if (p.value("status", json::object()).value("phase", "") == "Pending")
          pending = p["metadata"]["name"];
      }
      return !pending.empty();
    })) << "attempt "
        << attempt << "\n"
        << sim.Log();
    seen.insert(pending);
    SetPodPhase(sim, "default", pending, "Failed");
  }
  EXPECT_EQ(WaitJds(sim, "default", "sub-fail", "Failed"), "Failed") << sim.Log();
  json st = RayJobStatus(sim, "default", "sub-fail");
  EXPECT_EQ(st["reason"], "SubmissionFailed");
  EXPECT_EQ(st["message"],
            "Job submission has failed. Reason: BackoffLimitExceeded. Message: Job has reached the "
            "specified backoff limit");
  EXPECT_FALSE(st.contains("jobStatus"));
  EXPECT_EQ(st["failed"], 1);
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(SubmitterPods(sim, "default", "sub-fail").size(), 3u);
  json job = sim.Get(JobPath("default", "sub-fail"));
  EXPECT_EQ(job["status"]["failed"], 3);
  ASSERT_EQ(job["status"]["conditions"].size(), 2u);
  EXPECT_EQ(job["status"]["conditions"][0]["type"], "FailureTarget");
  EXPECT_EQ(job["status"]["conditions"][1]["type"], "Failed");
  EXPECT_EQ(job["status"]["conditions"][1]["reason"], "BackoffLimitExceeded");
  std::vector<json> jev;
  WaitFor([&] {
    return Reasons(jev = EventsCore(sim, "default", "Job", "sub-fail"))
               .count("BackoffLimitExceeded") == 1;
  });
  EXPECT_EQ(Reasons(jev), (std::multiset<std::string>{"SuccessfulCreate", "SuccessfulCreate",
                                                      "SuccessfulCreate", "BackoffLimitExceeded"}));
  EXPECT_EQ(Ev(jev, "BackoffLimitExceeded")["type"], "Warning");
  EXPECT_EQ(Ev(jev, "BackoffLimitExceeded")["message"],
            "Job has reached the specified backoff limit");
  const std::vector<std::string> want = {"", "Initializing", "Running", "Failed"};
  EXPECT_EQ(rec.SequenceSoon("jobDeploymentStatus", want), want);
  EXPECT_EQ(rec.Sequence("jobStatus"), (std::vector<std::string>{""}));
}

// upstream-facts §2 "activeDeadlineSeconds exceeded": Failed/DeadlineExceeded while Running;
// jobStatus is left as it was; with shutdownAfterJobFinishes (ttl 0) the cluster goes right away.
TEST(Operator, ActiveDeadlineWhileRunning) {
  FakeRay ray;
  Sim sim(Args(ray.port()));
  json st = RunToRunning(
      sim, "default",
      MakeRayJob("deadline", {{"activeDeadlineSeconds", 4}, {"shutdownAfterJobFinishes", true}}));
  const std::string cluster = st["rayClusterName"];
  ray.Set(st["jobId"], "RUNNING", "Job is currently running.");
  ASSERT_TRUE(WaitFor([&] {
    return RayJobStatus(sim, "default", "deadline").value("jobStatus", "") == "RUNNING";
  }));
  EXPECT_EQ(WaitJds(sim, "default", "deadline", "Failed", 30s), "Failed");
  st = RayJobStatus(sim, "default", "deadline");
  EXPECT_EQ(st["reason"], "DeadlineExceeded");
  EXPECT_EQ(st["jobStatus"], "RUNNING");
  const std::string start = st["startTime"];  // 2006-01-02T15:04:05Z
  const std::string go_time = start.substr(0, 10) + " " + start.substr(11, 8) + " +0000 UTC";
  EXPECT_EQ(st["message"], "The RayJob has passed the activeDeadlineSeconds. StartTime: " +
                               go_time + ". ActiveDeadlineSeconds: 4");
  EXPECT_EQ(st["failed"], 1);
  EXPECT_TRUE(WaitFor([&] {
    int code = 0;
    sim.Get(RcPath("default", cluster), &code);
    return code == 404;
  }));
  int code = 0;
  sim.Get(JobPath("default", "deadline"), &code);
  EXPECT_EQ(code, 200);
}

// activeDeadlineSeconds while the cluster never becomes ready (§9).
TEST(Operator, ActiveDeadlineWhileInitializing) {
  FakeRay ray;
  Sim sim(Args(ray.port()));
  // The deadline is shortened only once the RayJob mirrors its Pending cluster's status, so a slow
  // machine cannot let it pass before the operator ever saw the cluster.
  sim.Create(RjPath("default"), MakeRayJob("stuck", {{"activeDeadlineSeconds", 3600}}));
  auto provisioning = [](const json& st) {
    const json rcs = st.value("rayClusterStatus", json::object());
    for (const json& c : rcs.value("conditions", json::array())) {
      if (c.value("type", "") == "RayClusterProvisioned" &&
          c.value("reason", "") == "RayClusterPodsProvisioning") {
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(WaitFor([&] { return provisioning(RayJobStatus(sim, "default", "stuck")); }))
      << RayJobStatus(sim, "default", "stuck").dump();
  sim.MergePatch(RjPath("default", "stuck"), {{"spec", {{"activeDeadlineSeconds", 1}}}});
  EXPECT_EQ(WaitJds(sim, "default", "stuck", "Failed", 30s), "Failed");
  json st = RayJobStatus(sim, "default", "stuck");
  EXPECT_EQ(st["reason"], "DeadlineExceeded");
  EXPECT_FALSE(st.contains("jobStatus"));
  EXPECT_TRUE(st.contains("endTime"));
  EXPECT_NE(st["message"].get<std::string>().find("ActiveDeadlineSeconds: 1"), std::string::npos);
  // Pending: the mirrored cluster status still shows why.
  EXPECT_TRUE(provisioning(st)) << st.dump();
}

// preRunningDeadlineSeconds (v1.6+ semantics).
TEST(Operator, PreRunningDeadline) {
  FakeRay ray;
  Sim sim(Args(ray.port()));
  sim.Create(RjPath("default"), MakeRayJob("prerun", {{"preRunningDeadlineSeconds", 2}}));
  EXPECT_EQ(WaitJds(sim, "default", "prerun", "Failed", 30s), "Failed");
  json st = RayJobStatus(sim, "default", "prerun");
  EXPECT_EQ(st["reason"], "PreRunningDeadlineExceeded");
  const std::string start = st["startTime"];
  EXPECT_EQ(st["message"], "The RayJob has passed the preRunningDeadlineSeconds. StartTime: " +
                               start.substr(0, 10) + " " + start.substr(11, 8) +
                               " +0000 UTC. PreRunningDeadlineSeconds: 2");
  EXPECT_FALSE(st.contains("jobStatus"));
}

// upstream-facts §2 "Suspend / unsuspend", §9.
TEST(Operator, SuspendAndResume) {
  FakeRay ray;
  Sim sim(Args(ray.port()));
  StatusRecorder rec(sim, "default", "susp");
  sim.Create(RjPath("default"),
             MakeRayJob("susp", {{"suspend", true}, {"shutdownAfterJobFinishes", true}}));
  ASSERT_EQ(WaitJds(sim, "default", "susp", "Suspended"), "Suspended") << sim.Log();
  json st = RayJobStatus(sim, "default", "susp");
  EXPECT_FALSE(st.contains("jobId"));
  EXPECT_FALSE(st.contains("rayClusterName"));
  EXPECT_FALSE(st.contains("dashboardURL"));
  EXPECT_TRUE(st.contains("startTime"));
  EXPECT_EQ(st["succeeded"], 0);
  EXPECT_EQ(st["failed"], 0);
  EXPECT_TRUE(Items(sim.Get(RcPath("default"))).empty());
  const std::string first_start = st["startTime"];
  std::vector<std::string> want = {"", "Initializing", "Suspending", "Suspended"};
  EXPECT_EQ(rec.SequenceSoon("jobDeploymentStatus", want), want);

  std::this_thread::sleep_for(1100ms);  // startTime has second precision
  sim.MergePatch(RjPath("default", "susp"), {{"spec", {{"suspend", false}}}});
  ASSERT_EQ(WaitJds(sim, "default", "susp", "Initializing"), "Initializing");
  std::string cluster;
  ASSERT_TRUE(WaitFor([&] {
    cluster = RayJobStatus(sim, "default", "susp").value("rayClusterName", "");
    int code = 0;
    if (!cluster.empty()) sim.Get(RcPath("default", cluster), &code);
    return code == 200;
  }));
  st = RayJobStatus(sim, "default", "susp");
  EXPECT_NE(st["startTime"], first_start);
  EXPECT_TRUE(st.contains("jobId"));

  // Suspend again from Initializing: the cluster is deleted and the ids cleared.
  sim.MergePatch(RjPath("default", "susp"), {{"spec", {{"suspend", true}}}});
  ASSERT_EQ(WaitJds(sim, "default", "susp", "Suspended"), "Suspended") << sim.Log();
  EXPECT_TRUE(WaitFor([&] { return Items(sim.Get(RcPath("default"))).empty(); }));
  st = RayJobStatus(sim, "default", "susp");
  EXPECT_FALSE(st.contains("rayClusterName"));
  EXPECT_FALSE(st.contains("jobId"));
  want = {"", "Initializing", "Suspending", "Suspended",
          "", "Initializing", "Suspending", "Suspended"};
  EXPECT_EQ(rec.SequenceSoon("jobDeploymentStatus", want), want);
  std::vector<json> ev = EventsV1(sim, "default", "RayJob", "susp");
  EXPECT_EQ(Reasons(ev), (std::multiset<std::string>{"CreatedRayCluster", "DeletedRayCluster"}));
  EXPECT_EQ(Ev(ev, "DeletedRayCluster")["note"], "Deleted cluster default/" + cluster);
}

// upstream-facts §2 "Deletion while running", §9: stop, finalizer removed, children collected, no
// status change and no events.
TEST(Operator, DeletionWhileRunning) {
  FakeRay ray;
  Sim sim(Args(ray.port()));
  StatusRecorder rec(sim, "default", "del");
  json st = RunToRunning(sim, "default", MakeRayJob("del"));
  const std::string id = st["jobId"];
  const std::string cluster = st["rayClusterName"];
  ray.Set(id, "RUNNING", "Job is currently running.");
  ASSERT_TRUE(WaitFor(
      [&] { return RayJobStatus(sim, "default", "del").value("jobStatus", "") == "RUNNING"; }));
  ASSERT_TRUE(WaitFor([&] {
    int code = 0;
    sim.Get(SvcPath("default", "del-head-svc"), &code);
    return code == 200;
  }));
  std::this_thread::sleep_for(300ms);
  const size_t before = rec.statuses().size();
  const std::multiset<std::string> events_before =
      Reasons(EventsV1(sim, "default", "RayJob", "del"));
  int code = 0;
  sim.Req("DELETE", RjPath("default", "del"), json(), &code);
  EXPECT_EQ(code, 200);
  ASSERT_TRUE(WaitFor([&] {
    sim.Get(RjPath("default", "del"), &code);
    return code == 404;
  })) << sim.Log();
  // Stopped, and only this job. Possibly twice: like KubeRay's controller, which reads the
  // RayJob from controller-runtime's cache, a reconcile queued before the finalizer's removal
  // can still find the deleting RayJob in a cache that has not seen it go, and stops it again
  // (StopJob of a stopped job is harmless in Ray); the Update that follows then fails.
  const std::vector<std::string> stops = ray.stops();
  EXPECT_FALSE(stops.empty());
  EXPECT_LE(stops.size(), 2u);
  for (const std::string& stopped : stops)
    EXPECT_EQ(stopped, id);
  EXPECT_TRUE(WaitFor([&] {
    int a = 0, b = 0, c = 0;
    sim.Get(RcPath("default", cluster), &a);
    sim.Get(JobPath("default", "del"), &b);
    sim.Get(SvcPath("default", "del-head-svc"), &c);
    return a == 404 && b == 404 && c == 404 && Items(sim.Get(PodsPath("default"))).empty();
  })) << sim.Log();
  EXPECT_EQ(rec.statuses().size(), before);
  EXPECT_EQ(Reasons(EventsV1(sim, "default", "RayJob", "del")), events_before);
}

// upstream-facts §9: ValidationFailed with the operator's wording, ×4.
TEST(Operator, ValidationFailed) {
  FakeRay ray;
  Sim sim(Args(ray.port()));
  struct Case {
    std::string name;
    json overrides;
    std::string type;
    std::string message;
  };
  const std::string long_name(48, 'a');
  const std::vector<Case> cases = {
      {"ttl-no-shutdown",
       {{"ttlSecondsAfterFinished", 10}},
       "InvalidRayJobSpec",
       "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false cannot "
       "have "
       "TTLSecondsAfterFinished"},
      {"suspend-no-shutdown",
       {{"suspend", true}},
       "InvalidRayJobSpec",
       "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is not "
       "allowed to be suspended"},
      {"rules-and-shutdown",
       {{"shutdownAfterJobFinishes", true},
        {"deletionStrategy",
         {{"deletionRules",
           json::array({{{"policy", "DeleteCluster"},
                         {"condition", {{"jobStatus", "SUCCEEDED"}, {"ttlSeconds", 0}}}}})}}}},
       "InvalidRayJobSpec",
       "The RayJob spec is invalid: spec.shutdownAfterJobFinishes and "
       "spec.deletionStrategy.deletionRules are mutually exclusive"},
      {long_name, json::object(), "InvalidRayJobMetadata",
       "The RayJob metadata is invalid: RayJob name should be no more than 47 characters"},
  };
  for (const Case& c : cases)
    sim.Create(RjPath("default"), MakeRayJob(c.name, c.overrides));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(WaitJds(sim, "default", c.name, "ValidationFailed"), "ValidationFailed") << sim.Log();
    json obj = sim.Get(RjPath("default", c.name));
    json want = {{"jobDeploymentStatus", "ValidationFailed"},
                 {"reason", "ValidationFailed"},
                 {"message", c.message},
                 {"rayJobInfo", json::object()},
                 {"rayClusterStatus",
                  {{"desiredCPU", "0"},
                   {"desiredGPU", "0"},
                   {"desiredMemory", "0"},
                   {"desiredTPU", "0"},
                   {"head", json::object()}}},
                 {"succeeded", 0},
                 {"failed", 0}};
    EXPECT_EQ(obj["status"], want);
    EXPECT_FALSE(obj["metadata"].contains("finalizers"));
    std::vector<json> ev = EventsV1(sim, "default", "RayJob", c.name);
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0]["reason"], c.type);
    EXPECT_EQ(ev[0]["type"], "Warning");
    EXPECT_EQ(ev[0]["action"], "Validate");
    EXPECT_EQ(ev[0]["note"], "default/" + c.name + ": " + c.message);
    EXPECT_EQ(ev[0]["reportingController"], "rayjob-controller");
  }
  // Terminal: nothing is created and the status is not written again.
  const std::string rv =
      sim.Get(RjPath("default", "ttl-no-shutdown"))["metadata"]["resourceVersion"];
  std::this_thread::sleep_for(800ms);
  EXPECT_EQ(sim.Get(RjPath("default", "ttl-no-shutdown"))["metadata"]["resourceVersion"], rv);
  EXPECT_TRUE(Items(sim.Get(RcPath("default"))).empty());
  EXPECT_TRUE(Items(sim.Get(JobPath("default"))).empty());
}

// --operator-version v1.4 (with the v1.4.0 CRDs): core/v1 events with source.component, no
// ValidationFailed state (an event on every pass), no job-submission-mode label, no GCS wait
// loop, no preRunningDeadlineSeconds.
TEST(Operator, OperatorV14) {
  FakeRay ray;
  Sim sim(Args(ray.port(), {"--operator-version", "v1.4", "--crd-version", "v1.4.0"}));
  sim.Create(RjPath("default"), MakeRayJob("v14-bad", {{"ttlSecondsAfterFinished", 10}}));
  std::vector<json> ev;
  ASSERT_TRUE(WaitFor([&] {
    ev = EventsCore(sim, "default", "RayJob", "v14-bad");
    return !ev.empty() && ev[0].value("count", 0) >= 2;
  })) << sim.Log();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["reason"], "InvalidRayJobSpec");
  EXPECT_EQ(ev[0]["type"], "Warning");
  EXPECT_EQ(
      ev[0]["message"],
      "The RayJob spec is invalid default/v14-bad: a RayJob with shutdownAfterJobFinishes set "
      "to false cannot have TTLSecondsAfterFinished");
  EXPECT_EQ(ev[0]["source"]["component"], "rayjob-controller");
  EXPECT_TRUE(ev[0]["firstTimestamp"].is_string());
  EXPECT_FALSE(RayJobStatus(sim, "default", "v14-bad").contains("jobDeploymentStatus"));

  // preRunningDeadlineSeconds is not in the v1.4 CRD (pruned): the job runs anyway.
  json st = RunToRunning(sim, "default", MakeRayJob("v14-ok", {{"preRunningDeadlineSeconds", 1}}));
  const std::string cluster = st["rayClusterName"];
  EXPECT_FALSE(sim.Get(RjPath("default", "v14-ok"))["spec"].contains("preRunningDeadlineSeconds"));
  json rc = sim.Get(RcPath("default", cluster));
  EXPECT_FALSE(rc["metadata"]["labels"].contains("ray.io/job-submission-mode"));
  json job = sim.Get(JobPath("default", "v14-ok"));
  const std::string args = job["spec"]["template"]["spec"]["containers"][0]["args"][0];
  EXPECT_EQ(
      args.rfind("if ! ray job status --address http://" + cluster +
                     "-head-svc.default.svc.cluster.local:8265 " + st["jobId"].get<std::string>() +
                     " >/dev/null 2>&1 ; then ray job submit",
                 0),
      0u)
      << args;
  json head = Items(
      sim.Get(PodsPath("default", "ray.io/cluster=" + cluster + ",ray.io/node-type=head")))[0];
  const json& hc = head["spec"]["containers"][0];
  EXPECT_EQ(EnvValue(hc, "RAY_USAGE_STATS_EXTRA_TAGS"),
            "kuberay_version=v1.4.2;kuberay_crd=RayJob");
  EXPECT_EQ(EnvValue(hc, "RAY_CLUSTER_NAMESPACE"), "<absent>");
  std::vector<json> okev = EventsCore(sim, "default", "RayJob", "v14-ok");
  const json* created = FindEvent(okev, "CreatedRayCluster");
  ASSERT_NE(created, nullptr);
  EXPECT_EQ((*created)["message"], "Created RayCluster default/" + cluster);
  EXPECT_EQ((*created)["source"]["component"], "rayjob-controller");
  EXPECT_FALSE(created->contains("action") && !(*created)["action"].get<std::string>().empty());
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(RayJobStatus(sim, "default", "v14-ok")["jobDeploymentStatus"], "Running");
}

// Where kubesim's v1.4 mode once differed from the real KubeRay v1.4.2 (docs/kubesim.md,
// "Differences found"): the head pod's ray.io/ft-enabled annotation, the plain `ulimit -n 65536`,
// and a RayJob that mirrors nothing of its RayCluster's status while Initializing (v1.4.2 returns
// before its status update until the cluster is ready).
TEST(Operator, OperatorV14AsKubeRay142) {
  FakeRay ray;
  Sim sim(Args(ray.port(), {"--operator-version", "v1.4", "--crd-version", "v1.4.0"}));
  sim.Create(RjPath("default"), MakeRayJob("v14-init"));
  std::string cluster;
  ASSERT_TRUE(WaitFor([&] {
    cluster = RayJobStatus(sim, "default", "v14-init").value("rayClusterName", "");
    return !cluster.empty() && sim.Get(RcPath("default", cluster))
                                   .value("status", json::object())
                                   .contains("conditions");
  })) << sim.Log();
  // Two more reconciles by the RayJob controller: one whole reconcile (status write included)
  // saw the cluster's status.
  auto reconciles = [&] {
    return sim.Get("/kubesim/requests?controllers=1")["reconciles"].value("rayjob-controller", 0);
  };
  const int64_t reads = reconciles();
  ASSERT_TRUE(WaitFor([&] { return reconciles() >= reads + 2; })) << sim.Log();
  json st = RayJobStatus(sim, "default", "v14-init");
  EXPECT_EQ(st["jobDeploymentStatus"], "Initializing");
  EXPECT_EQ(st["rayClusterStatus"], json({{"desiredCPU", "0"},
                                          {"desiredGPU", "0"},
                                          {"desiredMemory", "0"},
                                          {"desiredTPU", "0"},
                                          {"head", json::object()}}))
      << st.dump();

  json head = Items(
      sim.Get(PodsPath("default", "ray.io/cluster=" + cluster + ",ray.io/node-type=head")))[0];
  EXPECT_EQ(head["metadata"]["annotations"]["ray.io/ft-enabled"], "false");
  const std::string args = head["spec"]["containers"][0]["args"][0];
  EXPECT_EQ(args.rfind("ulimit -n 65536; ray start --head ", 0), 0u) << args;
  for (const json& w : Items(sim.Get(
           PodsPath("default", "ray.io/cluster=" + cluster + ",ray.io/node-type=worker")))) {
    EXPECT_FALSE(w["metadata"].value("annotations", json::object()).contains("ray.io/ft-enabled"));
  }
  // Once the cluster is ready the RayJob goes on as before.
  MakePodsReady(sim, "default", "ray.io/cluster=" + cluster);
  EXPECT_EQ(WaitJds(sim, "default", "v14-init", "Running"), "Running") << sim.Log();
  // v1.4.2's RayJob controller has no reconcileServices: the RayCluster's head service is the
  // job's only service (v1.5+ add "<rayjob>-head-svc"; the real v1.4.2's audit log shows one
  // `create services` per job). Two more reconciles: a whole Running reconcile went by (the
  // one that would have created it, right after reading the cluster).
  const int64_t running_reads = reconciles();
  ASSERT_TRUE(WaitFor([&] { return reconciles() >= running_reads + 2; })) << sim.Log();
  std::vector<std::string> names;
  for (const json& s : Items(sim.Get("/api/v1/namespaces/default/services")))
    names.push_back(s["metadata"]["name"]);
  EXPECT_EQ(names, std::vector<std::string>{cluster + "-head-svc"});
}

// --reconcile-concurrency (KubeRay's flag): one worker runs a RayJob to Running and through its
// deletion; the RayJob controller reads the RayJob it reconciles from its informer, as KubeRay's
// cached client does (no `get rayjobs` until the RayJob is gone from the cache).
TEST(Operator, ReconcileConcurrencyAndCachedRayJob) {
  FakeRay ray;
  Sim sim(Args(ray.port(), {"--reconcile-concurrency", "1"}));
  ASSERT_GT(sim.port(), 0) << sim.Log();
  json st = RunToRunning(sim, "default", MakeRayJob("one-worker"));
  auto rayjob_reads = [&] {
    return sim.Get("/kubesim/requests?controllers=1")["controllers"]["rayjob-controller"].value(
        "get rayjobs", 0);
  };
  EXPECT_EQ(rayjob_reads(), 0) << sim.Get("/kubesim/requests?controllers=1").dump();
  int code = 0;
  sim.Req("DELETE", RjPath("default", "one-worker"), json(), &code);
  EXPECT_EQ(code, 200);
  ASSERT_TRUE(WaitFor([&] {
    sim.Get(RjPath("default", "one-worker"), &code);
    return code == 404;
  })) << sim.Log();
}

// The RayJob controller reads its children (RayCluster, submitter Job, services) from its
// informers, as KubeRay does: a running RayJob's 3 s poll (here 200 ms) costs the API nothing
// while nothing changes. /kubesim/requests?controllers=1 counts the reconciles and the 409s.
TEST(Operator, RunningPollReadsChildrenFromCache) {
  FakeRay ray;
  Sim sim(Args(ray.port()));
  ASSERT_GT(sim.port(), 0) << sim.Log();
  json st = RunToRunning(sim, "default", MakeRayJob("polled"));
  ASSERT_EQ(st.value("jobDeploymentStatus", ""), "Running") << sim.Log();
  // Let the submitter Job and service settle, then count over several polls.
  std::this_thread::sleep_for(1s);
  auto counts = [&] { return sim.Get("/kubesim/requests?controllers=1"); };
  const json before = counts();
  ASSERT_TRUE(before.contains("conflicts")) << before.dump();
  ASSERT_TRUE(before["conflicts"].is_object()) << before.dump();
  const int64_t reconciles = before["reconciles"].value("rayjob-controller", 0);
  EXPECT_GT(reconciles, 0) << before.dump();
  ASSERT_TRUE(WaitFor([&] {
    return counts()["reconciles"].value("rayjob-controller", 0) >= reconciles + 4;
  })) << sim.Log();
  const json after = counts();
  for (const char* k : {"get rayclusters", "get jobs", "get services", "get rayjobs"}) {
    EXPECT_EQ(after["controllers"]["rayjob-controller"].value(k, 0),
              before["controllers"]["rayjob-controller"].value(k, 0))
        << k << ": " << after.dump();
  }
  EXPECT_EQ(RayJobStatus(sim, "default", "polled").value("jobDeploymentStatus", ""), "Running");
  // DELETE resets every count.
  int code = 0;
  json cleared = sim.Req("DELETE", "/kubesim/requests?controllers=1", json(), &code);
  EXPECT_EQ(code, 200);
  EXPECT_EQ(cleared["total"], 0) << cleared.dump();
  EXPECT_EQ(cleared["reconciles"].value("rayjob-controller", 0), 0) << cleared.dump();
}

TEST(Operator, ReconcileConcurrencyMustBePositive) {
  for (const char* bad : {"0", "-2", "many", "3x"}) {
    Sim sim({"--controllers", "operator", "--reconcile-concurrency", bad});
    EXPECT_EQ(sim.port(), 0) << bad;
    EXPECT_NE(sim.Log().find("--reconcile-concurrency wants a whole number >= 1"),
              std::string::npos)
        << sim.Log();
  }
}

// HTTPMode: the operator submits to the head's Jobs API itself; no submitter Job.
TEST(Operator, HttpMode) {
  FakeRay ray;
  Sim sim(Args(ray.port()));
  StatusRecorder rec(sim, "default", "http");
  json st = RunToRunning(sim, "default",
                         MakeRayJob("http", {{"submissionMode", "HTTPMode"},
                                             {"metadata", {{"owner", "forge"}}},
                                             {"entrypointNumCpus", 1}}));
  const std::string id = st["jobId"];
  ASSERT_TRUE(WaitFor([&] { return !ray.submissions().empty(); })) << sim.Log();
  json sub = ray.submissions()[0];
  EXPECT_EQ(sub, json({{"entrypoint", "python /home/ray/samples/sample_code.py"},
                       {"submission_id", id},
                       {"runtime_env",
                        {{"env_vars", {{"counter_name", "test_counter"}}},
                         {"pip", json::array({"requests==2.26.0"})}}},
                       {"metadata", {{"owner", "forge"}}},
                       {"entrypoint_num_cpus", 1}}));
  ASSERT_TRUE(WaitFor(
      [&] { return RayJobStatus(sim, "default", "http").value("jobStatus", "") == "PENDING"; }));
  int code = 0;
  sim.Get(JobPath("default", "http"), &code);
  EXPECT_EQ(code, 404);
  ray.Set(id, "RUNNING", "Job is currently running.");
  ASSERT_TRUE(WaitFor(
      [&] { return RayJobStatus(sim, "default", "http").value("jobStatus", "") == "RUNNING"; }));
  ray.Set(id, "SUCCEEDED", "Job finished successfully.");
  EXPECT_EQ(WaitJds(sim, "default", "http", "Complete"), "Complete");
  EXPECT_EQ(RayJobStatus(sim, "default", "http")["succeeded"], 1);
  EXPECT_EQ(ray.submissions().size(), 1u);
  const std::vector<std::string> want = {"", "PENDING", "RUNNING", "SUCCEEDED"};
  EXPECT_EQ(rec.SequenceSoon("jobStatus", want), want);
}

// A STOPPED Ray job ends Complete without counting a success (upstream-facts §2).
TEST(Operator, StoppedIsComplete) {
  FakeRay ray;
  Sim sim(Args(ray.port()));
  json st = RunToRunning(sim, "default", MakeRayJob("stopped", {{"submissionMode", "HTTPMode"}}));
  ASSERT_TRUE(WaitFor([&] { return !ray.submissions().empty(); }));
  ray.Set(st["jobId"], "STOPPED", "Job was intentionally stopped.");
  EXPECT_EQ(WaitJds(sim, "default", "stopped", "Complete"), "Complete");
  st = RayJobStatus(sim, "default", "stopped");
  EXPECT_EQ(st["jobStatus"], "STOPPED");
  EXPECT_EQ(st["succeeded"], 0);
  EXPECT_EQ(st["failed"], 0);
}

// The batch/v1 Job controller on its own: pods, back-off, BackoffLimitExceeded, success.
TEST(JobController, BackoffLimitAndSuccess) {
  Sim sim({"--controllers", "jobs", "--job-backoff-ms", "1000"});
  const json tmpl = {{"metadata", {{"labels", {{"app", "x"}}}}},
                     {"spec",
                      {{"restartPolicy", "Never"},
                       {"containers", json::array({{{"name", "c"}, {"image", "busybox"}}})}}}};
  json j1 = sim.Create(JobPath("default"), {{"apiVersion", "batch/v1"},
                                            {"kind", "Job"},
                                            {"metadata", {{"name", "j1"}}},
                                            {"spec", {{"backoffLimit", 1}, {"template", tmpl}}}});
  const std::string uid = j1["metadata"]["uid"];
  std::vector<json> pods;
  ASSERT_TRUE(WaitFor([&] { return (pods = SubmitterPods(sim, "default", "j1")).size() == 1; }))
      << sim.Log();
  const json& p = pods[0];
  EXPECT_TRUE(std::regex_match(p["metadata"]["name"].get<std::string>(),
                               std::regex("j1-[bcdfghjklmnpqrstvwxz2456789]{5}")));
  EXPECT_EQ(p["metadata"]["generateName"], "j1-");
  EXPECT_EQ(p["metadata"]["labels"], json({{"app", "x"},
                                           {"batch.kubernetes.io/controller-uid", uid},
                                           {"batch.kubernetes.io/job-name", "j1"},
                                           {"controller-uid", uid},
                                           {"job-name", "j1"}}));
  EXPECT_EQ(p["metadata"]["ownerReferences"], json::array({{{"apiVersion", "batch/v1"},
                                                            {"kind", "Job"},
                                                            {"name", "j1"},
                                                            {"uid", uid},
                                                            {"controller", true},
                                                            {"blockOwnerDeletion", true}}}));
  json job;
  ASSERT_TRUE(WaitFor([&] {
    return (job = sim.Get(JobPath("default", "j1")))
               .value("status", json::object())
               .value("active", 0) == 1;
  }));
  EXPECT_TRUE(job["status"].contains("startTime"));
  EXPECT_EQ(job["status"]["ready"], 0);
  EXPECT_EQ(job["status"]["uncountedTerminatedPods"], json::object());

  SetPodPhase(sim, "default", p["metadata"]["name"], "Failed");
  // Back-off (1 s here; 10 s in kube-controller-manager) before the replacement.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(SubmitterPods(sim, "default", "j1").size(), 1u);
  std::string second;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const json& q : SubmitterPods(sim, "default", "j1"))
          if (q.value("status", json::object()).value("phase", "") == "Pending")
            second = q["metadata"]["name"];
        return !second.empty();
      },
      5s));
  SetPodPhase(sim, "default", second, "Failed");
  ASSERT_TRUE(
      WaitFor([&] { return sim.Get(JobPath("default", "j1"))["status"].contains("conditions"); }));
  job = sim.Get(JobPath("default", "j1"));
  EXPECT_EQ(job["status"]["failed"], 2);
  EXPECT_FALSE(job["status"].contains("active"));
  EXPECT_FALSE(job["status"].contains("completionTime"));
  ASSERT_EQ(job["status"]["conditions"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(job["status"]["conditions"][i]["type"], i == 0 ? "FailureTarget" : "Failed");
    EXPECT_EQ(job["status"]["conditions"][i]["status"], "True");
    EXPECT_EQ(job["status"]["conditions"][i]["reason"], "BackoffLimitExceeded");
    EXPECT_EQ(job["status"]["conditions"][i]["message"],
              "Job has reached the specified backoff limit");
  }
  std::vector<json> ev;
  WaitFor([&] {
    return Reasons(ev = EventsCore(sim, "default", "Job", "j1")).count("BackoffLimitExceeded") == 1;
  });
  EXPECT_EQ(Reasons(ev), (std::multiset<std::string>{"SuccessfulCreate", "SuccessfulCreate",
                                                     "BackoffLimitExceeded"}));
  EXPECT_EQ(Ev(ev, "SuccessfulCreate")["message"].get<std::string>().rfind("Created pod: j1-", 0),
            0u);
  EXPECT_EQ(Ev(ev, "BackoffLimitExceeded")["type"], "Warning");
  EXPECT_EQ(Ev(ev, "BackoffLimitExceeded")["source"], json({{"component", "job-controller"}}));
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(SubmitterPods(sim, "default", "j1").size(), 2u);  // no more pods once failed

  sim.Create(JobPath("default"), {{"apiVersion", "batch/v1"},
                                  {"kind", "Job"},
                                  {"metadata", {{"name", "j2"}}},
                                  {"spec", {{"template", tmpl}}}});
  ASSERT_TRUE(WaitFor([&] { return (pods = SubmitterPods(sim, "default", "j2")).size() == 1; }));
  SetPodPhase(sim, "default", pods[0]["metadata"]["name"], "Succeeded");
  ASSERT_TRUE(WaitFor(
      [&] { return sim.Get(JobPath("default", "j2"))["status"].contains("completionTime"); }));
  job = sim.Get(JobPath("default", "j2"));
  EXPECT_EQ(job["status"]["succeeded"], 1);
  EXPECT_EQ(job["status"]["conditions"][0]["type"], "SuccessCriteriaMet");
  EXPECT_EQ(job["status"]["conditions"][1]["type"], "Complete");
  EXPECT_EQ(job["status"]["conditions"][1]["message"], "Reached expected number of succeeded pods");
  std::vector<json> j2ev;
  WaitFor([&] {
    return Reasons(j2ev = EventsCore(sim, "default", "Job", "j2")).count("Completed") == 1;
  });
  EXPECT_EQ(Reasons(j2ev), (std::multiset<std::string>{"SuccessfulCreate", "Completed"}));
}

// The controllers' identity: admin under --tls --token, never faulted, and the header alone (a
// pod could send it) is not enough.
TEST(Controllers, IdentityTlsTokenFaults) {
  Sim sim({"--controllers", "jobs", "--tls", "--token", "s3cret"});
  ASSERT_GT(sim.port(), 0) << sim.Log();
  httplib::SSLClient c("127.0.0.1", sim.port());
  c.enable_server_certificate_verification(false);
  c.set_read_timeout(10, 0);
  const httplib::Headers auth = {{"Authorization", "Bearer s3cret"}};
  auto r = c.Post("/kubesim/faults", R"({"rules":[{"verb":"*","resource":"pods","code":500}]})",
                  "application/json");
  ASSERT_TRUE(r);
  json job = {{"apiVersion", "batch/v1"},
              {"kind", "Job"},
              {"metadata", {{"name", "j"}}},
              {"spec",
               {{"template",
                 {{"spec",
                   {{"restartPolicy", "Never"},
                    {"containers", json::array({{{"name", "c"}, {"image", "busybox"}}})}}}}}}}};
  r = c.Post("/apis/batch/v1/namespaces/default/jobs", auth, job.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201) << r->body;
  // The job controller's pod creation is not faulted; ours is.
  EXPECT_TRUE(WaitFor([&] {
    auto s = c.Get("/apis/batch/v1/namespaces/default/jobs/j", auth);
    return s && json::parse(s->body).value("status", json::object()).value("active", 0) == 1;
  })) << sim.Log();
  r = c.Get("/api/v1/namespaces/default/pods", auth);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  // The name header without the process's key is an ordinary (here: unauthenticated) request.
  r = c.Get("/apis/batch/v1/namespaces/default/jobs/j",
            {{"X-Kubesim-Controller", "job-controller"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  json counts = json::parse(c.Get("/kubesim/requests")->body);
  EXPECT_EQ(counts["requests"].value("create pods", 0), 0) << counts.dump();
  EXPECT_EQ(counts["requests"].value("get pods", 0) + counts["requests"].value("list pods", 0), 1);
  json cc = json::parse(c.Get("/kubesim/requests?controllers=1")->body);
  EXPECT_EQ(cc["controllers"]["job-controller"].value("create pods", 0), 1) << cc.dump();
}

// --controllers validation.
TEST(Controllers, UnknownControllerIsAnError) {
  Sim sim({"--controllers", "operator,nope"});
  EXPECT_EQ(sim.port(), 0);
  EXPECT_NE(sim.Log().find("unknown controller \"nope\""), std::string::npos) << sim.Log();
}

namespace {

// The YAML documents of a manifest file, as JSON.
std::vector<json> ReadManifests(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<json> docs;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t sep = text.find("\n---", start);
    json doc = starforge::ParseYaml(
                   text.substr(start, sep == std::string::npos ? std::string::npos : sep - start))
                   .value();
    if (doc.is_object()) docs.push_back(doc);
    if (sep == std::string::npos) break;
    start = sep + 4;
  }
  return docs;
}

std::string PodLog(const Sim& sim, const std::string& ns, const std::string& pod) {
  httplib::Client c("127.0.0.1", sim.port());
  auto r = c.Get(PodsPath(ns) + "/" + pod + "/log");
  return r ? r->body : "";
}

}  // namespace

// With every controller (the scheduler, kubelet and Ray emulator of h/k-kubelet and h/k-ray):
// KubeRay's sample runs for real. Its script imports the `ray` library, which is not emulated,
// so it ends Failed/AppFailed with ModuleNotFoundError in the driver log; the same RayJob with
// `python3 -c 'print(42)'` ends Complete/SUCCEEDED with 42 in the submitter's log.
TEST(OperatorRealRun, KubeRaySample) {
  Sim sim({"--nodes", std::string(KUBESIM_TESTDATA) + "/nodes.yaml", "--resync-ms", "300",
           "--kubelet-backoff-ms", "500", "--scheduler-backoff-ms", "200", "--kubelet-sync-ms",
           "1000", "--bookmark-interval-ms", "200"});
  ASSERT_GT(sim.port(), 0) << sim.Log();
  std::vector<json> docs = ReadManifests(std::string(KUBESIM_TESTDATA) + "/ray-job.sample.yaml");
  ASSERT_EQ(docs.size(), 2u);
  json rayjob = docs[0];
  json configmap = docs[1];
  ASSERT_EQ(rayjob["kind"], "RayJob");
  ASSERT_EQ(configmap["kind"], "ConfigMap");
  sim.Create("/api/v1/namespaces/default/configmaps", configmap);
  json print42 = rayjob;
  print42["metadata"]["name"] = "rayjob-print42";
  print42["spec"]["entrypoint"] = "python3 -c 'print(42)'";
  StatusRecorder rec_sample(sim, "default", "rayjob-sample");
  StatusRecorder rec_42(sim, "default", "rayjob-print42");
  sim.Create(RjPath("default"), rayjob);
  sim.Create(RjPath("default"), print42);

  EXPECT_EQ(WaitJds(sim, "default", "rayjob-sample", "Failed", 50s), "Failed") << sim.Log();
  EXPECT_EQ(WaitJds(sim, "default", "rayjob-print42", "Complete", 20s), "Complete") << sim.Log();

  json st = RayJobStatus(sim, "default", "rayjob-sample");
  EXPECT_EQ(st["reason"], "AppFailed");
  EXPECT_EQ(st["jobStatus"], "FAILED");
  EXPECT_EQ(st["failed"], 1);
  EXPECT_NE(st.value("message", "").find("Job entrypoint command failed with exit code 1"),
            std::string::npos);
  EXPECT_NE(st.value("message", "").find("ModuleNotFoundError: No module named 'ray'"),
            std::string::npos);
  std::vector<json> pods = SubmitterPods(sim, "default", "rayjob-sample");
  ASSERT_FALSE(pods.empty());
  EXPECT_FALSE(pods[0]["spec"].value("nodeName", "").empty());
  EXPECT_NE(PodLog(sim, "default", pods[0]["metadata"]["name"])
                .find("ModuleNotFoundError: No module named 'ray'"),
            std::string::npos);
  const std::vector<std::string> failed_seq = {"", "Initializing", "Running", "Failed"};
  EXPECT_EQ(rec_sample.SequenceSoon("jobDeploymentStatus", failed_seq), failed_seq);
  EXPECT_EQ(rec_sample.Sequence("jobStatus").back(), "FAILED");

  st = RayJobStatus(sim, "default", "rayjob-print42");
  EXPECT_EQ(st["jobStatus"], "SUCCEEDED");
  EXPECT_EQ(st["succeeded"], 1);
  EXPECT_EQ(st["message"], "Job finished successfully.");
  pods = SubmitterPods(sim, "default", "rayjob-print42");
  ASSERT_FALSE(pods.empty());
  const std::string log = PodLog(sim, "default", pods[0]["metadata"]["name"]);
  EXPECT_NE(log.find("\n42\n"), std::string::npos) << log;
  const std::vector<std::string> ok_seq = {"", "Initializing", "Running", "Complete"};
  EXPECT_EQ(rec_42.SequenceSoon("jobDeploymentStatus", ok_seq), ok_seq);
  const std::vector<std::string> js = rec_42.Sequence("jobStatus");
  EXPECT_EQ(js.front(), "");
  EXPECT_EQ(js.back(), "SUCCEEDED");
  // The clusters ran on the inventory's nodes with the kubelet's pod addresses.
  json rc = sim.Get(RcPath("default", st["rayClusterName"]));
  EXPECT_EQ(rc["status"]["state"], "ready");
  EXPECT_EQ(rc["status"]["head"]["podIP"].get<std::string>().rfind("127.", 0), 0u);
}

// --pods fake (node/fake_pods.h): the same RayJob walks the same states with no process: the
// pods get addresses and statuses, the fake head answers the operator and the service proxy, the
// submitter's log reads like `ray job submit` + `ray job logs`, and deleting the RayJob takes its
// pods away (the kubelet's grace-0 DELETE).
TEST(OperatorFakePods, RayJobCompletesWithoutProcesses) {
  Sim sim({"--nodes", std::string(KUBESIM_TESTDATA) + "/nodes.yaml", "--resync-ms", "300",
           "--scheduler-backoff-ms", "200", "--bookmark-interval-ms", "200", "--pods", "fake",
           "--fake-job-ms", "500"});
  ASSERT_GT(sim.port(), 0) << sim.Log();
  std::vector<json> docs = ReadManifests(std::string(KUBESIM_TESTDATA) + "/ray-job.sample.yaml");
  ASSERT_FALSE(docs.empty());
  json rayjob = docs[0];
  rayjob["metadata"]["name"] = "rayjob-fake";
  rayjob["spec"]["entrypoint"] = "python3 -c 'print(42)'";
  rayjob["spec"].erase("ttlSecondsAfterFinished");
  rayjob["spec"]["shutdownAfterJobFinishes"] = false;
  StatusRecorder rec(sim, "default", "rayjob-fake");
  sim.Create(RjPath("default"), rayjob);
  ASSERT_EQ(WaitJds(sim, "default", "rayjob-fake", "Complete", 30s), "Complete") << sim.Log();
  const json st = RayJobStatus(sim, "default", "rayjob-fake");
  EXPECT_EQ(st["jobStatus"], "SUCCEEDED");
  EXPECT_EQ(st["message"], "Job finished successfully.");
  const std::vector<std::string> ok_seq = {"", "Initializing", "Running", "Complete"};
  EXPECT_EQ(rec.SequenceSoon("jobDeploymentStatus", ok_seq), ok_seq);
  const json rc = sim.Get(RcPath("default", st["rayClusterName"]));
  EXPECT_EQ(rc["status"]["state"], "ready");
  EXPECT_EQ(rc["status"]["head"]["podIP"].get<std::string>().rfind("127.", 0), 0u);

  std::vector<json> pods = SubmitterPods(sim, "default", "rayjob-fake");
  ASSERT_FALSE(pods.empty());
  EXPECT_EQ(pods[0]["status"]["phase"], "Succeeded");
  const std::string log = PodLog(sim, "default", pods[0]["metadata"]["name"]);
  EXPECT_NE(log.find("Job '" + st["jobId"].get<std::string>() + "' submitted successfully"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("python3 -c 'print(42)'"), std::string::npos) << log;
  EXPECT_NE(log.find("SUCCEEDED"), std::string::npos) << log;
  // Ray's own job log, as StarForge reads it: through the service proxy.
  const json ray_log = sim.Get(
      "/api/v1/namespaces/default/services/rayjob-fake-head-svc:dashboard/"
      "proxy/api/jobs/" +
      st["jobId"].get<std::string>() + "/logs");
  EXPECT_NE(ray_log.value("logs", "").find("print(42)"), std::string::npos) << ray_log.dump();

  sim.Req("DELETE", RjPath("default", "rayjob-fake"));
  EXPECT_TRUE(WaitFor(
      [&] {
        return Items(sim.Get(PodsPath("default",
                                      "ray.io/cluster=" + st["rayClusterName"].get<std::string>())))
            .empty();
      },
      30s))
      << sim.Log();
}

// A fake job runs --fake-job-ms unless its runtime env sets KUBESIM_FAKE_JOB_MS (what lets a bench
// keep a thousand jobs running at once while its single jobs stay short): the submitter reads it
// from the operator's `--runtime-env-json`, as `ray job submit` would post it.
TEST(OperatorFakePods, RuntimeEnvSetsHowLongAJobRuns) {
  Sim sim({"--nodes", std::string(KUBESIM_TESTDATA) + "/nodes.yaml", "--resync-ms", "300",
           "--scheduler-backoff-ms", "200", "--bookmark-interval-ms", "200", "--pods", "fake",
           "--fake-job-ms", "300"});
  ASSERT_GT(sim.port(), 0) << sim.Log();
  std::vector<json> docs = ReadManifests(std::string(KUBESIM_TESTDATA) + "/ray-job.sample.yaml");
  ASSERT_FALSE(docs.empty());
  for (const char* name : {"short", "long"}) {
    json rayjob = docs[0];
    rayjob["metadata"]["name"] = name;
    rayjob["spec"].erase("ttlSecondsAfterFinished");
    rayjob["spec"]["shutdownAfterJobFinishes"] = false;
    rayjob["spec"]["runtimeEnvYAML"] =
        std::string(name) == "long"
            ? "env_vars:\n  counter_name: \"test_counter\"\n  KUBESIM_FAKE_JOB_MS: \"6000\"\n"
            : "env_vars:\n  counter_name: \"test_counter\"\n";
    sim.Create(RjPath("default"), rayjob);
  }
  ASSERT_EQ(WaitJds(sim, "default", "short", "Complete", 30s), "Complete") << sim.Log();
  ASSERT_EQ(WaitJds(sim, "default", "long", "Running", 30s), "Running") << sim.Log();
  // Both were submitted within a second or so; the short one ended 300 ms after its start, the
  // long one still runs. Its jobStatus is empty until the operator first reads Ray's job status
  // after the submitter started (jobDeploymentStatus Running comes first, as with KubeRay).
  std::string long_status;
  ASSERT_TRUE(WaitFor(
      [&] {
        const json st = RayJobStatus(sim, "default", "long");
        long_status = st.contains("jobStatus") && st["jobStatus"].is_string()
                          ? st["jobStatus"].get<std::string>()
                          : std::string();
        return !long_status.empty() && long_status != "PENDING";
      },
      30s))
      << sim.Log();
  EXPECT_EQ(long_status, "RUNNING");
  ASSERT_EQ(WaitJds(sim, "default", "long", "Complete", 30s), "Complete") << sim.Log();
  const json st = RayJobStatus(sim, "default", "long");
  EXPECT_EQ(st["jobStatus"], "SUCCEEDED");
  const json details =
      sim.Get("/api/v1/namespaces/default/services/long-head-svc:dashboard/proxy/api/jobs/" +
              st["jobId"].get<std::string>());
  EXPECT_GE(details.value("end_time", 0LL) - details.value("start_time", 0LL), 6000)
      << details.dump();
}

// upstream-facts §9: backoffLimit > 0 retries with a new RayCluster and jobId.
TEST(Operator, RetryWithBackoffLimit) {
  FakeRay ray;
  Sim sim(Args(ray.port()));
  StatusRecorder rec(sim, "default", "retry");
  json st = RunToRunning(
      sim, "default", MakeRayJob("retry", {{"submissionMode", "HTTPMode"}, {"backoffLimit", 1}}));
  const std::string first_cluster = st["rayClusterName"];
  const std::string first_id = st["jobId"];
  ASSERT_TRUE(WaitFor([&] { return !ray.submissions().empty(); }));
  ray.Set(first_id, "FAILED",
          "Job entrypoint command failed with exit code 1, last available logs (truncated to "
          "20,000 chars):\n");
  // The second attempt: a new cluster and job id, from Initializing again.
  std::string second_cluster;
  ASSERT_TRUE(WaitFor([&] {
    json s = RayJobStatus(sim, "default", "retry");
    second_cluster = s.value("rayClusterName", "");
    return s.value("jobDeploymentStatus", "") == "Initializing" && !second_cluster.empty() &&
           second_cluster != first_cluster;
  })) << sim.Log();
  st = RayJobStatus(sim, "default", "retry");
  EXPECT_NE(st["jobId"], first_id);
  EXPECT_EQ(st["failed"], 1);
  int code = 0;
  sim.Get(RcPath("default", first_cluster), &code);
  EXPECT_EQ(code, 404);
  ASSERT_TRUE(WaitFor([&] {
    return Items(sim.Get(PodsPath("default", "ray.io/cluster=" + second_cluster))).size() == 2;
  }));
  MakePodsReady(sim, "default", "ray.io/cluster=" + second_cluster);
  ASSERT_EQ(WaitJds(sim, "default", "retry", "Running"), "Running");
  const std::string second_id = RayJobStatus(sim, "default", "retry")["jobId"];
  ASSERT_TRUE(WaitFor([&] { return ray.submissions().size() == 2; }));
  ray.Set(second_id, "SUCCEEDED", "Job finished successfully.");
  ASSERT_EQ(WaitJds(sim, "default", "retry", "Complete"), "Complete");
  st = RayJobStatus(sim, "default", "retry");
  EXPECT_EQ(st["succeeded"], 1);
  EXPECT_EQ(st["failed"], 1);
  const std::vector<std::string> want = {"", "Initializing", "Running", "Retrying",
                                         "", "Initializing", "Running", "Complete"};
  EXPECT_EQ(rec.SequenceSoon("jobDeploymentStatus", want), want);
  std::vector<json> ev;
  WaitFor([&] {
    return Reasons(ev = EventsV1(sim, "default", "RayJob", "retry")).count("CreatedRayCluster") ==
           2;
  });
  EXPECT_EQ(Reasons(ev).count("CreatedRayCluster"), 2u);
  EXPECT_EQ(Ev(ev, "DeletedRayCluster")["note"], "Deleted cluster default/" + first_cluster);
}

// upstream-facts §9: deletionRules, one per pass, most impactful first; DeleteWorkers suspends the
// worker groups (UpdatedRayCluster) and the RayCluster controller removes the workers.
TEST(Operator, DeletionRules) {
  FakeRay ray;
  Sim sim(Args(ray.port()));
  const json rules =
      json::array({{{"policy", "DeleteWorkers"},
                    {"condition", {{"jobStatus", "SUCCEEDED"}, {"ttlSeconds", 0}}}},
                   {{"policy", "DeleteCluster"},
                    {"condition", {{"jobStatus", "SUCCEEDED"}, {"ttlSeconds", 3}}}}});
  json st = RunToRunning(sim, "default",
                         MakeRayJob("rules", {{"submissionMode", "HTTPMode"},
                                              {"deletionStrategy", {{"deletionRules", rules}}}}));
  const std::string cluster = st["rayClusterName"];
  ASSERT_TRUE(WaitFor([&] { return !ray.submissions().empty(); }));
  ray.Set(st["jobId"], "SUCCEEDED", "Job finished successfully.");
  ASSERT_EQ(WaitJds(sim, "default", "rules", "Complete"), "Complete");
  ASSERT_TRUE(WaitFor([&] {
    return Items(sim.Get(
                     PodsPath("default", "ray.io/cluster=" + cluster + ",ray.io/node-type=worker")))
        .empty();
  })) << sim.Log();
  json rc = sim.Get(RcPath("default", cluster));
  EXPECT_EQ(rc["spec"]["workerGroupSpecs"][0]["suspend"], true);
  EXPECT_EQ(
      Items(sim.Get(PodsPath("default", "ray.io/cluster=" + cluster + ",ray.io/node-type=head")))
          .size(),
      1u);
  std::vector<json> ev = EventsV1(sim, "default", "RayJob", "rules");
  EXPECT_EQ(Ev(ev, "UpdatedRayCluster")["note"],
            "Set the `suspend` field to true for all worker groups in cluster default/" + cluster);
  EXPECT_EQ(Ev(ev, "UpdatedRayCluster")["action"], "Update");
  json deleted_workers;
  WaitFor([&] {
    return (deleted_workers =
                Ev(EventsV1(sim, "default", "RayCluster", cluster), "DeletedWorkerPod"))
        .contains("note");
  });
  EXPECT_EQ(
      deleted_workers["note"],
      "Deleted all pods for suspended worker group small-group in RayCluster default/" + cluster);
  ASSERT_TRUE(WaitFor(
      [&] {
        int code = 0;
        sim.Get(RcPath("default", cluster), &code);
        return code == 404;
      },
      10s));
  WaitFor([&] {
    return Reasons(ev = EventsV1(sim, "default", "RayJob", "rules")).count("DeletedRayCluster") ==
           1;
  });
  EXPECT_EQ(Ev(ev, "DeletedRayCluster")["note"], "Deleted cluster default/" + cluster);
  int code = 0;
  sim.Get(RjPath("default", "rules"), &code);
  EXPECT_EQ(code, 200);
}
