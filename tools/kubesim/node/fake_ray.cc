#include "node/fake_ray.h"

#include <chrono>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

namespace kubesim::node {
namespace {

using nlohmann::json;

constexpr const char* kFakeJobMsEnv = "KUBESIM_FAKE_JOB_MS";  // fake_ray.h, FakeJobRunMs

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Job {
  std::string entrypoint;
  int64_t start_ms = 0;
  int64_t end_ms = 0;      // when it succeeds (if not stopped first)
  int64_t stopped_ms = 0;  // 0 = not stopped
  json metadata = nullptr;
};

struct Head {
  std::string cluster;
  std::map<std::string, Job> jobs;
};

struct Registry {
  std::mutex mu;
  std::map<std::string, Head> heads;              // pod IP -> head
  std::map<std::string, std::string> by_cluster;  // "ns/name" -> pod IP
};

Registry& R() {
  static Registry* r = new Registry;  // never destroyed: threads may ask during exit
  return *r;
}

// The status and times of `j` now (Ray's JobStatus names and messages).
struct View {
  std::string status, message;
  int64_t end = 0;
};
View ViewOf(const Job& j, int64_t now) {
  if (j.stopped_ms != 0 && j.stopped_ms < j.end_ms)
    return {"STOPPED", "Job was intentionally stopped.", j.stopped_ms};
  if (now >= j.end_ms) return {"SUCCEEDED", "Job finished successfully.", j.end_ms};
  return {"RUNNING", "Job is currently running.", 0};
}

std::string LogOf(const std::string& id, const Job& j, const View& v) {
  std::string log = "kubesim --pods fake: job " + id + " runs `" + j.entrypoint +
                    "` (no process: the fake kubelet plays Ray)\n";
  if (v.status == "SUCCEEDED") log += "kubesim --pods fake: job " + id + " exited 0\n";
  if (v.status == "STOPPED") log += "kubesim --pods fake: job " + id + " stopped\n";
  return log;
}

json Details(const std::string& id, const Job& j, int64_t now) {
  const View v = ViewOf(j, now);
  return {{"type", "SUBMISSION"},
          {"job_id", nullptr},
          {"submission_id", id},
          {"driver_info", nullptr},
          {"status", v.status},
          {"entrypoint", j.entrypoint},
          {"message", v.message},
          {"error_type", nullptr},
          {"start_time", j.start_ms},
          {"end_time", v.end ? json(v.end) : json(nullptr)},
          {"metadata", j.metadata},
          {"runtime_env", json::object()},
          {"driver_agent_http_address", nullptr},
          {"driver_node_id", nullptr},
          {"driver_exit_code", v.status == "SUCCEEDED" ? json(0) : json(nullptr)}};
}

FakeRayReply NotFound(const std::string& text) {
  return {404, text, "text/plain"};
}

}  // namespace

void AddFakeRayHead(const std::string& ip, const std::string& cluster) {
  std::lock_guard lock(R().mu);
  Head& h = R().heads[ip];
  h.cluster = cluster;
  R().by_cluster[cluster] = ip;
}

void RemoveFakeRayHead(const std::string& ip) {
  std::lock_guard lock(R().mu);
  auto it = R().heads.find(ip);
  if (it == R().heads.end()) return;
  auto c = R().by_cluster.find(it->second.cluster);
  if (c != R().by_cluster.end() && c->second == ip) R().by_cluster.erase(c);
  R().heads.erase(it);
}

std::string FakeRayHeadIp(const std::string& cluster) {
  std::lock_guard lock(R().mu);
  auto it = R().by_cluster.find(cluster);
  return it == R().by_cluster.end() ? "" : it->second;
}

bool SubmitFakeRayJob(const std::string& ip, const std::string& id, const std::string& entrypoint,
                      int64_t run_ms) {
  std::lock_guard lock(R().mu);
  auto it = R().heads.find(ip);
  if (it == R().heads.end()) return false;
  if (it->second.jobs.count(id)) return true;
  Job j;
  j.entrypoint = entrypoint;
  j.start_ms = NowMs();
  j.end_ms = j.start_ms + run_ms;
  it->second.jobs.emplace(id, std::move(j));
  return true;
}

int64_t FakeJobRunMs(const json& runtime_env, int64_t fallback_ms) {
  const json* vars = runtime_env.is_object() && runtime_env.contains("env_vars")
                         ? &runtime_env["env_vars"]
                         : nullptr;
  if (vars == nullptr || !vars->is_object() || !vars->contains(kFakeJobMsEnv)) return fallback_ms;
  const json& v = (*vars)[kFakeJobMsEnv];
  // Ray's env_vars are strings; a number is accepted too.
  const std::string text = v.is_string()           ? v.get<std::string>()
                           : v.is_number_integer() ? v.dump()
                                                   : "";
  if (text.empty() || text.size() > 12 || text.find_first_not_of("0123456789") != std::string::npos)
    return fallback_ms;
  return std::stoll(text);
}

std::string FakeRayJobStatus(const std::string& ip, const std::string& id, std::string* log) {
  std::lock_guard lock(R().mu);
  auto it = R().heads.find(ip);
  if (it == R().heads.end()) return "";
  auto j = it->second.jobs.find(id);
  if (j == it->second.jobs.end()) return "";
  const View v = ViewOf(j->second, NowMs());
  if (log != nullptr) *log = LogOf(id, j->second, v);
  return v.status;
}

std::optional<FakeRayReply> AnswerFakeRay(const std::string& host, const std::string& method,
                                          const std::string& raw_path, const std::string& body) {
  std::string path = raw_path.substr(0, raw_path.find('?'));
  if (path.size() > 1 && path.back() == '/' && path != "/api/jobs/") path.pop_back();
  std::lock_guard lock(R().mu);
  auto it = R().heads.find(host);
  if (it == R().heads.end()) return std::nullopt;
  Head& head = it->second;
  const int64_t now = NowMs();
  if (path == "/api/gcs_healthz") return FakeRayReply{200, "success", "text/plain"};
  if (path == "/api/version") {
    return FakeRayReply{200, json{{"version", "kubesim-fake"}, {"ray_version", "2.46.0"}}.dump()};
  }
  if (path == "/api/jobs" || path == "/api/jobs/") {
    if (method == "GET") {
      json all = json::array();
      for (const auto& [id, j] : head.jobs)
        all.push_back(Details(id, j, now));
      return FakeRayReply{200, all.dump()};
    }
    if (method != "POST") return FakeRayReply{405, "405: Method Not Allowed", "text/plain"};
    const json req = json::parse(body, nullptr, false);
    if (!req.is_object() || !req.contains("entrypoint") || !req["entrypoint"].is_string())
      return FakeRayReply{400, "the request has no entrypoint", "text/plain"};
    std::string id = req.value("submission_id", "");
    if (id.empty()) id = "raysubmit_fake" + std::to_string(head.jobs.size() + 1);
    if (head.jobs.count(id)) {
      return FakeRayReply{
          500,
          "Job with submission_id " + id + " already exists. Please use a different submission_id.",
          "text/plain"};
    }
    Job j;
    j.entrypoint = req["entrypoint"].get<std::string>();
    j.start_ms = now;
    // Posted straight to the dashboard: done at once unless its runtime env says how long.
    j.end_ms = now + FakeJobRunMs(req.value("runtime_env", json::object()), 0);
    j.metadata = req.value("metadata", json(nullptr));
    head.jobs.emplace(id, std::move(j));
    return FakeRayReply{200, json{{"job_id", id}, {"submission_id", id}}.dump()};
  }
  const std::string prefix = "/api/jobs/";
  if (path.rfind(prefix, 0) != 0) return NotFound("404: Not Found");
  std::string rest = path.substr(prefix.size());
  std::string action;
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    action = rest.substr(slash + 1);
    rest.resize(slash);
  }
  auto j = head.jobs.find(rest);
  if (j == head.jobs.end()) return NotFound("Job " + rest + " does not exist");
  if (action.empty() && method == "GET")
    return FakeRayReply{200, Details(rest, j->second, now).dump()};
  if (action == "logs" && method == "GET") {
    return FakeRayReply{200, json{{"logs", LogOf(rest, j->second, ViewOf(j->second, now))}}.dump()};
  }
  if (action == "stop" && method == "POST") {
    const bool running = ViewOf(j->second, now).status == "RUNNING";
    if (running) j->second.stopped_ms = now;
    return FakeRayReply{200, json{{"stopped", running}}.dump()};
  }
  return NotFound("404: Not Found");
}

}  // namespace kubesim::node
