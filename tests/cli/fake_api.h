// A stand-in for `forge serve` that speaks the REST contract (docs in src/api) on a loopback port,
// for testing the `forge` client's side of it — HTTP, auth, paging, SSE resume, error bodies —
// where the test decides what the server says. Jobs do not run: the test scripts their logs and
// phases. The real server is tested with the client in client_e2e_test.cc.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <set>

#include "starforge/common/sha256.h"

namespace starforge::cli::testing {

struct FakeRequest {
  std::string method;
  std::string path;  // with the query
  std::string authorization;
  std::string last_event_id;
};

struct FakeJob {
  nlohmann::json job;  // the Job JSON (with spec and timeline)
  std::string log;     // driver.log so far
  nlohmann::json events = nlohmann::json::array();
  std::map<std::string, std::string> files;  // the other files of its logs (?file=NAME)
  std::string logs_warning;                  // GET …/artifacts' "warning" ("" = none)
};

class FakeApi {
 public:
  static constexpr const char* kToken = "sf_0123456789abcdefghij0123456789abcdefgh";

  FakeApi() {
    server_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back({req.method, req.target, req.get_header_value("Authorization"),
                             req.get_header_value("Last-Event-ID")});
      }
      if (req.get_header_value("Authorization") != std::string("Bearer ") + kToken) {
        res.status = 401;
        res.set_header("WWW-Authenticate", "Bearer");
        Json(res, {{"error", "Unauthorized"}, {"message", "missing or invalid bearer token"}});
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    server_.Get("/api/v1/whoami", [](const httplib::Request&, httplib::Response& res) {
      Json(res, {{"user", "admin"}, {"admin", true}});
    });
    server_.Get("/api/v1/capacity", [](const httplib::Request&, httplib::Response& res) {
      Json(res, {{"fleets",
                  {{{"fleet", "local"}, {"cpus", {{"total", 8}, {"used", 1}}}, {"running", 1}}}}});
    });
    server_.Post("/api/v1/jobs",
                 [this](const httplib::Request& req, httplib::Response& res) { Submit(req, res); });
    // Capsules uploaded earlier are "on the server" (docs/capsule.md, Submitting).
    server_.Get(R"(/api/v1/capsules/([^/]+))",
                [this](const httplib::Request& req, httplib::Response& res) {
                  std::lock_guard<std::mutex> lock(mu_);
                  if (capsules_.count(req.matches[1])) {
                    Json(res, {{"sha256", req.matches[1]}});
                    return;
                  }
                  res.status = 404;
                  Json(res, {{"error", "NotFound"}, {"message", "no job of yours ran with it"}});
                });
    server_.Get("/api/v1/jobs",
                [this](const httplib::Request& req, httplib::Response& res) { List(req, res); });
    server_.Get(R"(/api/v1/jobs/([^/]+))",
                [this](const httplib::Request& req, httplib::Response& res) {
                  std::lock_guard<std::mutex> lock(mu_);
                  FakeJob* j = Find(req.matches[1], res);
                  if (j) Json(res, j->job);
                });
    server_.Get(R"(/api/v1/jobs/([^/]+)/events)",
                [this](const httplib::Request& req, httplib::Response& res) {
                  std::lock_guard<std::mutex> lock(mu_);
                  FakeJob* j = Find(req.matches[1], res);
                  if (j) Json(res, {{"items", j->events}});
                });
    server_.Post(R"(/api/v1/jobs/([^/]+)/cancel)",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   std::lock_guard<std::mutex> lock(mu_);
                   FakeJob* j = Find(req.matches[1], res);
                   if (!j) return;
                   const std::string phase = j->job["phase"];
                   if (phase == "Succeeded" || phase == "Failed" || phase == "Cancelled") {
                     Json(res, j->job);
                     return;
                   }
                   j->job["cancelRequested"] = true;
                   res.status = 202;
                   Json(res, j->job);
                 });
    server_.Get(R"(/api/v1/jobs/([^/]+)/logs)",
                [this](const httplib::Request& req, httplib::Response& res) { Logs(req, res); });
    server_.Get(R"(/api/v1/jobs/([^/]+)/artifacts)",
                [this](const httplib::Request& req, httplib::Response& res) {
                  std::lock_guard<std::mutex> lock(mu_);
                  FakeJob* j = Find(req.matches[1], res);
                  if (!j) return;
                  nlohmann::json items = {{{"name", "driver.log"}, {"size", j->log.size()}}};
                  for (const auto& [name, text] : j->files)
                    items.push_back({{"name", name}, {"size", text.size()}});
                  nlohmann::json body = {{"items", items}, {"logsArchived", true}};
                  if (!j->logs_warning.empty()) body["warning"] = j->logs_warning;
                  Json(res, body);
                });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  ~FakeApi() {
    stopping_ = true;
    {
      std::lock_guard<std::mutex> lock(players_mu_);
      for (auto& t : players_)
        t.join();
    }
    server_.stop();
    thread_.join();
  }

  FakeApi(const FakeApi&) = delete;
  FakeApi& operator=(const FakeApi&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // What POST /api/v1/jobs answers instead of creating a job (status, body), when set.
  void RefuseSubmissions(int status, nlohmann::json body) {
    std::lock_guard<std::mutex> lock(mu_);
    refuse_ = {status, std::move(body)};
  }
  // Called (without the lock) for each job created, e.g. to Play() it.
  std::function<void(const std::string& id)> on_submit;
  // The next log stream breaks after its first chunk (the client must resume).
  void DropNextStream() { drop_next_stream_ = true; }
  // Page size of GET /api/v1/jobs (small, so the client must follow nextCursor).
  int page_cap = 2;

  // Adds a job (newest first) and returns its id.
  std::string AddJob(const std::string& name, const std::string& phase,
                     const std::string& owner = "admin") {
    std::lock_guard<std::mutex> lock(mu_);
    return AddJobLocked(name, phase, owner, nlohmann::json::object());
  }

  // Appends `lines` to the job's log one by one, then ends it in `phase`.
  void Play(const std::string& id, std::vector<std::string> lines, std::string phase,
            std::string reason, int exit_code) {
    std::lock_guard<std::mutex> players_lock(players_mu_);
    players_.emplace_back([this, id, lines, phase, reason, exit_code] {
      SetPhase(id, "Running", "", "");
      for (const auto& line : lines) {
        if (stopping_) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        std::lock_guard<std::mutex> lock(mu_);
        jobs_[id].log += line + "\n";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      std::lock_guard<std::mutex> lock(mu_);
      FakeJob& j = jobs_[id];
      j.job["phase"] = phase;
      j.job["reason"] = reason;
      j.job["exitCode"] = exit_code;
      j.job["message"] =
          phase == "Failed" ? "the entrypoint exited with code " + std::to_string(exit_code) : "";
    });
  }

  void SetPhase(const std::string& id, const std::string& phase, const std::string& reason,
                const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    FakeJob& j = jobs_[id];
    j.job["phase"] = phase;
    j.job["reason"] = reason;
    j.job["message"] = message;
    j.job["updatedAt"] = Now();
  }
  void SetLog(const std::string& id, const std::string& log) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[id].log = log;
  }
  void SetFile(const std::string& id, const std::string& name, const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[id].files[name] = text;
  }
  void SetLogsWarning(const std::string& id, const std::string& warning) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[id].logs_warning = warning;
  }
  void SetEvents(const std::string& id, nlohmann::json events) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[id].events = std::move(events);
  }

  // As if the object store lost every capsule: a POST naming one gets 409.
  void ForgetCapsules() {
    std::lock_guard<std::mutex> lock(mu_);
    capsules_.clear();
  }
  std::vector<FakeRequest> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  // The parts of the last accepted submission.
  std::string last_spec() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_spec_;
  }
  std::string last_code() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_code_;
  }
  std::string last_code_filename() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_code_filename_;
  }
  // The capsule digest the last submission named instead of sending code ("" if it sent some).
  std::string last_ref() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_ref_;
  }

 private:
  static void Json(httplib::Response& res, const nlohmann::json& body) {
    res.set_content(body.dump(), "application/json");
  }
  static std::string Now() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
    return buf;
  }
  static bool Terminal(const std::string& phase) {
    return phase == "Succeeded" || phase == "Failed" || phase == "Cancelled";
  }

  FakeJob* Find(const std::string& id, httplib::Response& res) {
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      res.status = 404;
      Json(res, {{"error", "NotFound"}, {"message", "job " + id + " not found"}});
      return nullptr;
    }
    return &it->second;
  }

  std::string AddJobLocked(const std::string& name, const std::string& phase,
                           const std::string& owner, nlohmann::json spec) {
    char id[16];
    std::snprintf(id, sizeof id, "j-%010d", ++next_id_);
    FakeJob j;
    j.job = {{"id", id},
             {"name", name},
             {"owner", owner},
             {"fleet", "local"},
             {"phase", phase},
             {"reason", ""},
             {"message", ""},
             {"exitCode", nullptr},
             {"capsule", nullptr},
             {"cancelRequested", false},
             {"cleanup", {{"logsArchived", false}, {"released", false}}},
             {"createdAt", Now()},
             {"updatedAt", Now()},
             {"startedAt", nullptr},
             {"finishedAt", nullptr},
             {"spec", std::move(spec)},
             {"timeline",
              {{{"at", Now()},
                {"from", nullptr},
                {"to", "Queued"},
                {"reason", ""},
                {"message", ""},
                {"cause", "api"}}}}};
    jobs_[id] = std::move(j);
    order_.insert(order_.begin(), id);
    return id;
  }

  void Submit(const httplib::Request& req, httplib::Response& res) {
    std::string id;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (refuse_.first != 0) {
        res.status = refuse_.first;
        Json(res, refuse_.second);
        return;
      }
      if (!req.is_multipart_form_data() || !req.has_file("spec")) {
        res.status = 400;
        Json(res, {{"error", "BadRequest"}, {"message", "multipart part \"spec\" is required"}});
        return;
      }
      std::string sha;
      if (req.has_file("capsuleSha256")) {
        sha = req.get_file_value("capsuleSha256").content;
        if (!capsules_.count(sha)) {
          res.status = 409;
          Json(res, {{"error", "CapsuleNotFound"}, {"message", "send the capsule itself"}});
          return;
        }
        last_ref_ = sha;
        last_code_.clear();
        last_code_filename_.clear();
      } else if (req.has_file("capsule")) {
        last_code_ = req.get_file_value("capsule").content;
        last_code_filename_ = req.get_file_value("capsule").filename;
        sha = Sha256Hex(last_code_);
        capsules_.insert(sha);
        last_ref_.clear();
      } else if (!req.has_file("code")) {
        res.status = 422;
        Json(res, {{"error", "Invalid"},
                   {"field", "code"},
                   {"message", "no code: pass --code DIR or set code: in the JobSpec"}});
        return;
      }
      last_spec_ = req.get_file_value("spec").content;
      if (req.has_file("code")) {
        last_code_ = req.get_file_value("code").content;
        last_code_filename_ = req.get_file_value("code").filename;
      }
      id = AddJobLocked("submitted", "Queued", "admin", {{"image", "img"}});
      if (!sha.empty()) jobs_[id].job["capsule"] = {{"sha256", sha}};
      res.status = 201;
      res.set_header("Location", "/api/v1/jobs/" + id);
      Json(res, jobs_[id].job);
    }
    if (on_submit) on_submit(id);
  }

  void List(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    int limit = 50;
    if (req.has_param("limit")) limit = std::stoi(req.get_param_value("limit"));
    if (limit < 1 || limit > 500) {
      res.status = 400;
      Json(res, {{"error", "BadRequest"}, {"message", "limit must be 1..500"}});
      return;
    }
    limit = std::min(limit, page_cap);
    size_t start = req.has_param("cursor") ? std::stoul(req.get_param_value("cursor")) : 0;
    const std::string phase = req.get_param_value("phase");
    const std::string owner = req.get_param_value("owner");
    nlohmann::json items = nlohmann::json::array();
    size_t i = start;
    for (; i < order_.size() && static_cast<int>(items.size()) < limit; ++i) {
      nlohmann::json job = jobs_[order_[i]].job;
      if (!phase.empty() && job["phase"] != phase) continue;
      if (!owner.empty() && job["owner"] != owner) continue;
      job.erase("spec");
      job.erase("timeline");
      items.push_back(std::move(job));
    }
    Json(res, {{"items", items},
               {"nextCursor",
                i < order_.size() ? nlohmann::json(std::to_string(i)) : nlohmann::json(nullptr)}});
  }

  void Logs(const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    {
      std::lock_guard<std::mutex> lock(mu_);
      FakeJob* j = Find(id, res);
      if (!j) return;
      if (req.has_param("file") && req.get_param_value("file") != "driver.log") {
        auto f = j->files.find(req.get_param_value("file"));
        if (f == j->files.end()) {
          res.status = 404;
          Json(res, {{"error", "NotFound"},
                     {"message", "job " + id + " has no log file " + req.get_param_value("file")},
                     {"field", "file"}});
          return;
        }
        res.set_content(f->second, "text/plain; charset=utf-8");
        return;
      }
      if (req.get_param_value("follow") != "1") {
        std::string text = j->log;
        if (req.has_param("tail")) {
          size_t n = std::stoul(req.get_param_value("tail"));
          size_t pos = text.size() > 0 ? text.size() - 1 : 0;
          while (n > 0 && pos > 0) {
            pos = text.rfind('\n', pos - 1);
            if (pos == std::string::npos) {
              pos = 0;
              break;
            }
            --n;
          }
          text = n > 0 || pos == 0 ? text : text.substr(pos + 1);
        }
        res.set_content(text, "text/plain; charset=utf-8");
        return;
      }
    }
    const std::string resume = req.get_header_value("Last-Event-ID");
    auto offset = std::make_shared<size_t>(resume.empty() ? 0 : std::stoul(resume));
    const bool drop = drop_next_stream_.exchange(false);
    auto chunks = std::make_shared<int>(0);
    res.set_chunked_content_provider(
        "text/event-stream", [this, id, offset, drop, chunks](size_t, httplib::DataSink& sink) {
          for (;;) {
            if (stopping_) return false;
            std::string out;
            bool end = false;
            {
              std::lock_guard<std::mutex> lock(mu_);
              FakeJob& j = jobs_[id];
              // A stream that is to break sends one line first, so the break always falls
              // mid-log however late the client connects.
              const size_t complete =
                  drop && *chunks == 0 ? j.log.find('\n', *offset) : j.log.rfind('\n');
              if (complete != std::string::npos && complete + 1 > *offset) {
                std::string chunk = j.log.substr(*offset, complete + 1 - *offset);
                *offset = complete + 1;
                out = "id: " + std::to_string(*offset) + "\nevent: log\n";
                size_t start = 0;
                while (start < chunk.size()) {
                  const size_t nl = chunk.find('\n', start);
                  out += "data: " + chunk.substr(start, nl - start) + "\n";
                  start = nl + 1;
                }
                out += "\n";
              } else if (Terminal(j.job["phase"])) {
                out = "event: end\ndata: " +
                      nlohmann::json{{"phase", j.job["phase"]},
                                     {"reason", j.job["reason"]},
                                     {"exitCode", j.job["exitCode"]}}
                          .dump() +
                      "\n\n";
                end = true;
              }
            }
            if (!out.empty()) {
              if (!sink.write(out.data(), out.size())) return false;
              if (end) {
                sink.done();
                return true;
              }
              if (drop && ++*chunks == 1) return false;  // the connection breaks here
              continue;
            }
            const char* keep_alive = ": keep-alive\n\n";
            if (!sink.write(keep_alive, std::strlen(keep_alive))) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
        });
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex players_mu_;
  std::vector<std::thread> players_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> drop_next_stream_{false};
  std::mutex mu_;
  std::map<std::string, FakeJob> jobs_;
  std::vector<std::string> order_;  // newest first
  int next_id_ = 0;
  std::vector<FakeRequest> requests_;
  std::pair<int, nlohmann::json> refuse_{0, nullptr};
  std::string last_spec_;
  std::string last_code_;
  std::string last_code_filename_;
  std::string last_ref_;
  std::set<std::string> capsules_;  // digests of the capsules uploaded
};

}  // namespace starforge::cli::testing
