#include "node/fake_pods.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "node/fake_ray.h"
#include "starforge/common/format.h"
#include "starforge/common/json_read.h"
#include "starforge/kube/errors.h"
#include "starforge/kube/resource.h"

namespace kubesim::node {

using nlohmann::json;
namespace kube = starforge::kube;
namespace fs = std::filesystem;
using std::chrono::milliseconds;

namespace {

constexpr auto& Obj = starforge::json_read::Field;
using starforge::json_read::Str;

constexpr const char* kLogFileAnnotation = "kubesim.starforge.dev/log-file.";

bool Terminal(const std::string& phase) {
  return phase == "Succeeded" || phase == "Failed";
}

// The value of env var `name` in the pod's first container ("" = unset).
std::string Env(const json& pod, const char* name) {
  const json& cs = Obj(Obj(pod, "spec"), "containers");
  if (!cs.is_array() || cs.empty()) return "";
  for (const json& e : Obj(cs[0], "env").is_array() ? cs[0]["env"] : json::array()) {
    if (Str(e, "name") == name) return Str(e, "value");
  }
  return "";
}

// The first container's command and args, joined by spaces (the operator's submitter command is
// one `bash -lc` string), or "".
std::string CommandText(const json& pod) {
  const json& cs = Obj(Obj(pod, "spec"), "containers");
  if (!cs.is_array() || cs.empty()) return "";
  std::string text;
  for (const char* f : {"command", "args"}) {
    for (const json& a : Obj(cs[0], f).is_array() ? cs[0][f] : json::array())
      if (a.is_string()) text += a.get<std::string>() + " ";
  }
  return text;
}

// What `ray job submit … -- ENTRYPOINT ; fi` runs (the operator's submitter command), or "".
std::string Entrypoint(const json& pod) {
  const std::string text = CommandText(pod);
  const auto b = text.find(" -- ");
  if (b == std::string::npos) return "";
  const auto e = text.find(" ; fi", b);
  return text.substr(b + 4, e == std::string::npos ? std::string::npos : e - b - 4);
}

// The runtime env a submitter's `ray job submit --runtime-env-json "<json>"` passes (the operator
// quotes the JSON with Go's %q, which for JSON text reads back as a JSON string), or {}.
json RuntimeEnv(const json& pod) {
  const std::string text = CommandText(pod);
  const std::string flag = "--runtime-env-json \"";
  const auto b = text.find(flag);
  if (b == std::string::npos) return json::object();
  size_t e = b + flag.size();
  while (e < text.size() && text[e] != '"')
    e += text[e] == '\\' ? 2 : 1;
  if (e >= text.size()) return json::object();
  const json quoted =
      json::parse(text.substr(b + flag.size() - 1, e - b - flag.size() + 2), nullptr, false);
  if (!quoted.is_string()) return json::object();
  json env = json::parse(quoted.get<std::string>(), nullptr, false);
  return env.is_object() ? env : json::object();
}

json Conditions(bool terminal, const std::string& phase, const json& existing) {
  const std::string ready = terminal ? "False" : "True";
  std::vector<json> mine = {{{"type", "PodReadyToStartContainers"}, {"status", ready}},
                            {{"type", "Initialized"}, {"status", "True"}},
                            {{"type", "Ready"}, {"status", ready}},
                            {{"type", "ContainersReady"}, {"status", ready}}};
  if (terminal) {
    const char* why = phase == "Succeeded" ? "PodCompleted" : "PodFailed";
    mine[2]["reason"] = why;
    mine[3]["reason"] = why;
    if (phase == "Succeeded") mine[1]["reason"] = "PodCompleted";
  }
  json out = json::array();
  const std::string now = starforge::NowRfc3339();
  for (json c : mine) {
    c["lastProbeTime"] = nullptr;
    c["lastTransitionTime"] = now;
    for (const json& e : existing.is_array() ? existing : json::array()) {
      if (Str(e, "type") == Str(c, "type") && Str(e, "status") == Str(c, "status") &&
          e.contains("lastTransitionTime"))
        c["lastTransitionTime"] = e["lastTransitionTime"];
    }
    out.push_back(std::move(c));
  }
  for (const json& e : existing.is_array() ? existing : json::array()) {
    const std::string t = Str(e, "type");
    if (t != "PodReadyToStartContainers" && t != "Initialized" && t != "Ready" &&
        t != "ContainersReady")
      out.push_back(e);
  }
  return out;
}

}  // namespace

FakePods::~FakePods() {
  Stop();
}

void FakePods::Start(const controllers::ControllerContext& ctx) {
  const std::string run = ctx.flags.Value("fake-job-ms");
  if (!run.empty()) {
    const long long n = std::stoll(run);
    if (n < 0) throw std::invalid_argument("--fake-job-ms wants a number >= 0");
    job_run_ = milliseconds(n);
  }
  log_dir_ = ctx.flags.Value("kubelet-dir");
  if (log_dir_.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "kubesim-fake-pods-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("kubelet --pods fake: cannot make a log dir");
    log_dir_ = tmpl;
    own_log_dir_ = true;
  }
  log_dir_ = fs::absolute(log_dir_).lexically_normal().string() + "/fake-logs";
  fs::create_directories(log_dir_);
  ips_.ClaimBlock();
  std::fprintf(stderr,
               "kubesim: kubelet: --pods fake: no process runs; pod addresses from %s.0.0/16, "
               "fake Ray jobs run %lld ms\n",
               ips_.Block().c_str(), static_cast<long long>(job_run_.count()));
  client_ = ctx.make_client("kubelet");
  auto enqueue = [this](const json& o) { queue_.Add(kube::Informer::KeyOf(o)); };
  kube::InformerHandlers ph;
  ph.on_add = enqueue;
  ph.on_update = [enqueue](const json&, const json& o) { enqueue(o); };
  ph.on_delete = enqueue;
  auto options = [](const kube::ResourceRef& r) {
    kube::InformerOptions o;
    o.resource = r;
    return o;
  };
  pods_ = std::make_unique<kube::Informer>(*client_, options(kube::resources::kPods), ph);
  kube::InformerHandlers nh;
  nh.on_add = [this](const json& node) {
    // Pods bound to a node that did not exist yet become ours now.
    const std::string name = Str(Obj(node, "metadata"), "name");
    if (!pods_) return;
    for (const json& p :
         pods_->Select([&](const json& p) { return Str(Obj(p, "spec"), "nodeName") == name; }))
      queue_.Add(kube::Informer::KeyOf(p));
  };
  nodes_ = std::make_unique<kube::Informer>(*client_, options(kube::resources::kNodes), nh);
  services_ = std::make_unique<kube::Informer>(*client_, options(kube::resources::kServices));
  nodes_->Start();
  services_->Start();
  pods_->Start();
  for (int i = 0; i < 2; ++i)
    threads_.emplace_back([this] { Worker(); });
}

void FakePods::Stop() {
  if (stop_.exchange(true)) return;
  queue_.ShutDown();
  for (auto* i : {pods_.get(), nodes_.get(), services_.get()})
    if (i) i->Stop();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
  std::lock_guard lock(mu_);
  for (auto& [key, p] : pods_rt_) {
    if (p->head) RemoveFakeRayHead(p->ip);
  }
  pods_rt_.clear();
  if (own_log_dir_) {
    std::error_code ec;
    fs::remove_all(fs::path(log_dir_).parent_path(), ec);
  }
}

void FakePods::Worker() {
  while (auto key = queue_.Get()) {
    try {
      Reconcile(*key);
    } catch (const std::exception& e) {
      if (!stop_) {
        std::fprintf(stderr, "kubesim: kubelet (fake pods): %s: %s\n", key->c_str(), e.what());
        queue_.AddAfter(*key, milliseconds(500));
      }
    }
    queue_.Done(*key);
  }
}

std::string FakePods::LogFile(const Pod& p) const {
  return log_dir_ + "/" + p.ns + "_" + p.name + "_" + p.uid + ".log";
}

std::string FakePods::HeadIpFor(const json& pod, const std::string& address) {
  std::string host = address;
  if (auto s = host.find("://"); s != std::string::npos) host = host.substr(s + 3);
  host = host.substr(0, host.find_first_of(":/"));
  if (!host.empty() && std::isdigit(static_cast<unsigned char>(host[0]))) return host;
  const auto dot = host.find('.');
  const std::string svc = host.substr(0, dot);
  std::string ns = Str(Obj(pod, "metadata"), "namespace");
  if (dot != std::string::npos) {
    const auto dot2 = host.find('.', dot + 1);
    ns = host.substr(dot + 1, dot2 == std::string::npos ? std::string::npos : dot2 - dot - 1);
  }
  auto service = services_->Get(ns + "/" + svc);
  if (!service) return "";
  const std::string cluster = Str(Obj(Obj(*service, "spec"), "selector"), "ray.io/cluster");
  return cluster.empty() ? "" : FakeRayHeadIp(ns + "/" + cluster);
}

json FakePods::Status(const Pod& p, const json& pod, bool terminal, int exit_code) {
  const json& spec = Obj(pod, "spec");
  const std::string now = starforge::NowRfc3339();
  const std::string phase = !terminal ? "Running" : exit_code == 0 ? "Succeeded" : "Failed";
  auto id = [&](const std::string& c) { return "kubesim://fake-" + p.uid + "-" + c; };
  json inits = json::array();
  for (const json& c :
       Obj(spec, "initContainers").is_array() ? spec["initContainers"] : json::array()) {
    inits.push_back({{"name", Str(c, "name")},
                     {"image", Str(c, "image")},
                     {"imageID", Str(c, "image")},
                     {"containerID", id(Str(c, "name"))},
                     {"ready", true},
                     {"restartCount", 0},
                     {"started", false},
                     {"lastState", json::object()},
                     {"state",
                      {{"terminated",
                        {{"exitCode", 0},
                         {"reason", "Completed"},
                         {"startedAt", p.start_time},
                         {"finishedAt", p.start_time},
                         {"containerID", id(Str(c, "name"))}}}}}});
  }
  json mains = json::array();
  for (const json& c : Obj(spec, "containers").is_array() ? spec["containers"] : json::array()) {
    json state = {{"running", {{"startedAt", p.start_time}}}};
    if (terminal) {
      state = {{"terminated",
                {{"exitCode", exit_code},
                 {"reason", exit_code == 0 ? "Completed" : "Error"},
                 {"startedAt", p.start_time},
                 {"finishedAt", now},
                 {"containerID", id(Str(c, "name"))}}}};
    }
    mains.push_back({{"name", Str(c, "name")},
                     {"image", Str(c, "image")},
                     {"imageID", Str(c, "image")},
                     {"containerID", id(Str(c, "name"))},
                     {"ready", !terminal},
                     {"restartCount", 0},
                     {"started", !terminal},
                     {"lastState", json::object()},
                     {"state", state}});
  }
  json status = {{"phase", phase},
                 {"conditions", Conditions(terminal, phase, Obj(Obj(pod, "status"), "conditions"))},
                 {"hostIP", p.host_ip},
                 {"hostIPs", json::array({{{"ip", p.host_ip}}})},
                 {"podIP", p.ip},
                 {"podIPs", json::array({{{"ip", p.ip}}})},
                 {"startTime", p.start_time},
                 {"containerStatuses", mains}};
  if (!inits.empty()) status["initContainerStatuses"] = inits;
  return status;
}

void FakePods::Write(Pod& p, const json& pod, json status) {
  // Compare without times: a recomputation must not cause a write.
  auto strip = [](json s) {
    for (auto& c : s["conditions"])
      c.erase("lastTransitionTime");
    for (auto& c : s["containerStatuses"])
      if (c["state"].contains("terminated")) c["state"]["terminated"].erase("finishedAt");
    return s;
  };
  if (!p.last_status.is_null() && strip(p.last_status) == strip(status)) return;
  client_->MergePatchStatus(kube::resources::kPods, p.ns, p.name, {{"status", status}});
  p.last_status = std::move(status);
  if (Terminal(Str(p.last_status, "phase"))) p.done = true;
  (void)pod;
}

void FakePods::Reconcile(const std::string& key) {
  std::optional<json> obj = pods_->Get(key);
  std::shared_ptr<Pod> p;
  {
    std::lock_guard lock(mu_);
    if (auto it = pods_rt_.find(key); it != pods_rt_.end()) p = it->second;
  }
  if (p && (!obj || Str(Obj(*obj, "metadata"), "uid") != p->uid)) {
    if (p->head) RemoveFakeRayHead(p->ip);
    ips_.Release(p->uid);
    std::error_code ec;
    fs::remove(LogFile(*p), ec);
    std::lock_guard lock(mu_);
    pods_rt_.erase(key);
    p.reset();
  }
  if (!obj) return;
  const json& pod = *obj;
  const json& md = Obj(pod, "metadata");
  const std::string node = Str(Obj(pod, "spec"), "nodeName");
  if (node.empty() || !nodes_->Get(node)) return;
  if (!p) {
    if (Terminal(Str(Obj(pod, "status"), "phase"))) return;  // finished before we saw it
    p = std::make_shared<Pod>();
    p->uid = Str(md, "uid");
    p->ns = Str(md, "namespace");
    p->name = Str(md, "name");
    p->ip = ips_.Acquire(p->uid);
    p->host_ip = "127.0.0.1";
    if (auto n = nodes_->Get(node)) {
      for (const json& a : Obj(Obj(*n, "status"), "addresses").is_array()
                               ? (*n)["status"]["addresses"]
                               : json::array())
        if (Str(a, "type") == "InternalIP" && !Str(a, "address").empty())
          p->host_ip = Str(a, "address");
    }
    p->start_time = starforge::NowRfc3339();
    p->submission_id = Env(pod, "RAY_JOB_SUBMISSION_ID");
    if (!p->submission_id.empty())
      p->run = milliseconds(FakeJobRunMs(RuntimeEnv(pod), job_run_.count()));
    std::lock_guard lock(mu_);
    pods_rt_[key] = p;
  }
  if (md.contains("deletionTimestamp")) {
    if (p->head) {
      RemoveFakeRayHead(p->ip);
      p->head = false;
    }
    if (p->confirmed) return;
    if (!p->done) {
      try {
        Write(*p, pod, Status(*p, pod, true, 143));  // SIGTERM: what a killed program returns
      } catch (const kube::ApiError&) {
        // Gone already (grace over): nothing to report.
      }
    }
    kube::DeleteOptions opts;
    opts.grace_period_seconds = 0;
    opts.precondition_uid = p->uid;
    try {
      client_->Delete(kube::resources::kPods, p->ns, p->name, opts);
    } catch (const kube::ApiError& e) {
      if (e.reason() != kube::Reason::kNotFound && e.reason() != kube::Reason::kConflict) throw;
    }
    p->confirmed = true;
    return;
  }
  if (p->done) return;
  if (!p->head && Str(Obj(md, "labels"), "ray.io/node-type") == "head") {
    p->head = true;
    AddFakeRayHead(p->ip, p->ns + "/" + Str(Obj(md, "labels"), "ray.io/cluster"));
  }
  if (p->submission_id.empty()) {
    Write(*p, pod, Status(*p, pod, false, 0));
    return;
  }
  // A submitter: `ray job submit --no-wait`, then `ray job logs --follow` until the job ends.
  const std::string container = Str(Obj(Obj(pod, "spec"), "containers")[0], "name");
  const std::string address = Env(pod, "RAY_DASHBOARD_ADDRESS");
  if (!p->log_annotated) {
    client_->MergePatch(
        kube::resources::kPods, p->ns, p->name,
        {{"metadata", {{"annotations", {{kLogFileAnnotation + container, LogFile(*p)}}}}}});
    p->log_annotated = true;
  }
  std::string head = "Job submission server address: http://" + address + "\n";
  if (!p->submitted) {
    p->head_ip = HeadIpFor(pod, address);
    if (p->head_ip.empty() ||
        !SubmitFakeRayJob(p->head_ip, p->submission_id, Entrypoint(pod), p->run.count())) {
      std::ofstream(LogFile(*p)) << "Waiting for Ray Dashboard GCS to become healthy at http://"
                                 << address << " ...\n";
      Write(*p, pod, Status(*p, pod, false, 0));
      queue_.AddAfter(key, milliseconds(2000));  // the submitter's `sleep 2` loop
      return;
    }
    p->submitted = true;
  }
  std::string log;
  const std::string status = FakeRayJobStatus(p->head_ip, p->submission_id, &log);
  const std::string text =
      head + "\n-------------------------------------------------------\nJob '" + p->submission_id +
      "' submitted successfully\n"
      "-------------------------------------------------------\n\n" +
      log;
  if (status == "RUNNING" || status == "PENDING") {
    std::ofstream(LogFile(*p)) << text;
    Write(*p, pod, Status(*p, pod, false, 0));
    queue_.AddAfter(key, p->run + milliseconds(50));  // when it ends (status is by clock)
    return;
  }
  // Ended (or the head went away: `ray job logs` fails).
  std::ofstream(LogFile(*p)) << text
                             << (status.empty()
                                     ? "ConnectionError: the Ray head is gone\n"
                                     : "Job '" + p->submission_id + "' " + status + "\n");
  Write(*p, pod, Status(*p, pod, true, status == "SUCCEEDED" ? 0 : 1));
}

}  // namespace kubesim::node
