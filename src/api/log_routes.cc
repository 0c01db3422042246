// The routes of what a job writes to its directory: its logs (read, or followed as Server-Sent
// Events), the files of its logs directory, and its training metrics (read or followed).
#include "starforge/api/handlers.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "starforge/api/convert.h"
#include "starforge/api/logs.h"
#include "starforge/api/metrics.h"
#include "starforge/api/watch.h"
#include "starforge/common/api_errors.h"
#include "starforge/common/format.h"

namespace starforge::api {

namespace fs = std::filesystem;

namespace {

// How long a follow waits, after the job ended, for its fleet to hand over the logs
// (logsArchived) before it ends anyway.
constexpr int64_t kArchiveWaitMs = 30'000;
// How often a follow looks at its job in the store; its file is read every sse_poll: 200
// followers must not cost 1,000 queries a second.
constexpr auto kFollowJobCheck = std::chrono::seconds(1);

// Ended, and its files written: a last line without '\n' is read too, and nothing comes after.
bool Finished(const store::Job& job) {
  return store::IsTerminal(job.phase) &&
         (job.logs_archived || NowMs() - job.finished_at > kArchiveWaitMs);
}

// What a log follow and a metrics follow share: the job, looked at in the store at most once per
// kFollowJobCheck.
class JobFollow {
 public:
  JobFollow(store::Store& store, std::string job_id) : store_(store), job_id_(std::move(job_id)) {}
  bool done() const { return done_; }

 protected:
  // The job when it is time to look again (nullopt otherwise); `gone` when it no longer exists.
  std::optional<store::Job> Check(bool* gone) {
    *gone = false;
    if (Clock::now() < next_check_) return std::nullopt;
    next_check_ = Clock::now() + kFollowJobCheck;
    std::optional<store::Job> job = store_.GetJob(job_id_);
    *gone = !job;
    return job;
  }
  bool done_ = false;

 private:
  store::Store& store_;
  std::string job_id_;
  Clock::time_point next_check_ = Clock::now();
};

// GET …/logs?follow=1: the lines appended to the log as "log" events, then "end" once the job
// has finished.
class LogFollow : public JobFollow {
 public:
  LogFollow(store::Store& store, std::string job_id, std::filesystem::path file, int64_t start)
      : JobFollow(store, std::move(job_id)), follower_(std::move(file), start) {}

  std::string Poll() {
    std::string chunk = follower_.Poll(false);
    if (!chunk.empty()) return chunk;
    bool gone = false;
    std::optional<store::Job> job = Check(&gone);
    if (!gone && !(job && Finished(*job))) return "";
    std::string rest = follower_.Poll(true);
    if (job) rest += SseEndEvent(*job);
    done_ = true;
    return rest;
  }

 private:
  LogFollower follower_;
};

// GET …/metrics?follow=1: the answers of GET …/metrics from the last cursor on as "metrics"
// events, when there is news, then "end". The event files are looked for again every
// kFindEventFilesEvery (a walk of the job directory) and once more after the job has ended.
class MetricsFollow : public JobFollow {
 public:
  MetricsFollow(store::Store& store, std::string job_id, std::filesystem::path job_dir,
                MetricsCursor cursor)
      : JobFollow(store, std::move(job_id)),
        job_dir_(std::move(job_dir)),
        cursor_(std::move(cursor)) {}

  std::string Poll() {
    bool find = Clock::now() >= next_find_;
    if (!final_) {
      bool gone = false;
      std::optional<store::Job> job = Check(&gone);
      final_ = gone || (job && Finished(*job));
      find = find || final_;
    }
    if (find) {
      files_ = FindJobEventFiles(job_dir_, MetricsLimits{}, &find_warning_);
      next_find_ = Clock::now() + kFindEventFilesEvery;
    }
    const nlohmann::json a = ReadJobMetrics(job_dir_, cursor_, files_, final_, {}, find_warning_);
    const bool news = !a["series"].empty() || a["skipped"].get<int64_t>() > 0 ||
                      (a.contains("warning") && a["warning"] != last_warning_);
    if (a.contains("warning")) last_warning_ = a["warning"];
    const std::string cursor = a["cursor"].get<std::string>();
    cursor_ = MetricsCursor::Decode(cursor).value_or(cursor_);
    std::string out;
    if (news) out = SseMessage("metrics", a.dump(), cursor);
    if (a["complete"].get<bool>()) {
      out += SseMessage("end", "{}");
      done_ = true;
    }
    return out;
  }

 private:
  static constexpr auto kFindEventFilesEvery = std::chrono::seconds(2);
  std::filesystem::path job_dir_;
  MetricsCursor cursor_;
  std::vector<EventFile> files_;
  std::string find_warning_;
  nlohmann::json last_warning_;
  Clock::time_point next_find_ = Clock::now();
  bool final_ = false;
};

// Where a reconnecting follow resumes: the byte offset its last event named (Last-Event-ID).
std::optional<int64_t> LastEventOffset(const Call& c) {
  const std::string last = c.req.get_header_value("Last-Event-ID");
  if (last.empty()) return std::nullopt;
  auto v = ParseCount(last);
  if (!v) throw BadRequest("Last-Event-ID must be a byte offset from an earlier event");
  return v;
}

// Streams a follow: one of the caller's follows (StreamEvents, FollowLimit).
template <typename F>
void Follow(Call& c, std::shared_ptr<F> follow) {
  StreamEvents(c, FollowLimit(c.server), std::move(follow));
}

// Why a kuberay job's driver.log cannot reach this server ("" when it can): without
// FORGE_K8S_STORAGE_PVC the pods have no volume shared with the server.
std::string DriverLogWarning(const ServerOptions& options, const store::Job& job) {
  if (job.fleet != "kuberay" || !options.config.k8s_storage_pvc.empty()) return "";
  return "FORGE_K8S_STORAGE_PVC is not set on this server, so the job's driver.log stays in "
         "its pods; the archive (ray-job.log, submitter.log, events.json) is kept once the "
         "job ends: forge logs ID --ray";
}

void PlainLog(Call& c, const fs::path& file, std::optional<int64_t> tail) {
  const char* type = "text/plain; charset=utf-8";
  // The job writes its directory: no symlink or FIFO there is followed (OpenJobLog).
  auto fd = std::make_shared<int>(OpenJobLog(file));
  struct stat st {};
  if (*fd < 0 || ::fstat(*fd, &st) != 0) {
    if (*fd >= 0) ::close(*fd);
    c.res.set_content("", type);
    return;
  }
  const auto size = static_cast<int64_t>(st.st_size);
  const int64_t start = tail ? TailOffset(file, *tail) : 0;
  if (size <= start) {
    ::close(*fd);
    c.res.set_content("", type);
    return;
  }
  // Streamed from the file: a log may be far larger than memory should hold. The length is
  // the size now; what is appended meanwhile is for the next request (or follow).
  c.res.set_content_provider(
      static_cast<size_t>(size - start), type,
      [fd, start](size_t offset, size_t length, httplib::DataSink& sink) {
        char buf[64 << 10];
        const size_t n = std::min(length, sizeof buf);
        const ssize_t r =
            ::pread(*fd, buf, n, static_cast<off_t>(start + static_cast<int64_t>(offset)));
        if (r <= 0) return false;
        return sink.write(buf, static_cast<size_t>(r));
      },
      [fd](bool) { ::close(*fd); });
}

}  // namespace

void JobLogs(Call& c) {
  ServerState& s = c.server;
  OnlyParams(c, {"tail", "follow", "offset", "file"});
  store::Job job = VisibleJob(c, c.Path());
  // ?file= names another file of the job's logs directory (the fleet's archive: ray-job.log,
  // events.json, …; docs/api.md). One plain name: no path can leave the directory.
  std::string name = "driver.log";
  if (c.req.has_param("file")) {
    name = Param(c, "file");
    static const std::regex kFileName("[A-Za-z0-9][A-Za-z0-9._-]{0,99}");
    if (!std::regex_match(name, kFileName))
      throw BadRequest("file must be a file name of the job's logs, such as ray-job.log", "file");
  }
  const fs::path file = s.options.storage_root / "jobs" / job.id / "logs" / name;
  // A symbolic link is not followed: a job's pods write this directory (on the kuberay
  // fleet's shared volume) and must not make the server read a file of its own.
  std::error_code ec;
  if (name != "driver.log" && !fs::is_regular_file(fs::symlink_status(file, ec)))
    throw ApiError{
        404, api_errors::kNotFound, "job " + job.id + " has no log file " + name, "file", {}};
  // Kubernetes' convention for a caveat on a good answer: a Warning header (code 299).
  if (const std::string w = DriverLogWarning(s.options, job); !w.empty() && name == "driver.log")
    c.res.set_header("Warning", "299 - \"" + w + "\"");
  const std::optional<int64_t> tail = CountParam(c, "tail");
  if (!BoolParam(c, "follow")) {
    if (c.req.has_param("offset")) throw BadRequest("offset needs follow=1", "offset");
    return PlainLog(c, file, tail);
  }
  int64_t start = 0;
  if (const std::optional<int64_t> last = LastEventOffset(c)) {
    start = *last;
  } else if (auto off = CountParam(c, "offset")) {
    start = *off;
  } else if (tail) {
    start = TailOffset(file, *tail);
  }
  Follow(c, std::make_shared<LogFollow>(s.store, job.id, file, start));
}

// The files of the job's logs directory (the runner's driver.log, the fleet's archive), each
// readable with GET …/logs?file=NAME. Only regular files: the job writes this directory.
void JobArtifacts(Call& c) {
  ServerState& s = c.server;
  OnlyParams(c, {});
  store::Job job = VisibleJob(c, c.Path());
  const fs::path dir = s.options.storage_root / "jobs" / job.id / "logs";
  nlohmann::json items = nlohmann::json::array();
  std::error_code ec;
  std::vector<std::pair<std::string, int64_t>> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code sec;
    if (!fs::is_regular_file(it->symlink_status(sec))) continue;
    const auto size = fs::file_size(it->path(), sec);
    files.emplace_back(it->path().filename().string(), sec ? 0 : static_cast<int64_t>(size));
  }
  std::sort(files.begin(), files.end());
  for (const auto& [name, size] : files)
    items.push_back({{"name", name}, {"size", size}});
  nlohmann::json body = {{"items", std::move(items)}, {"logsArchived", job.logs_archived}};
  if (const std::string w = DriverLogWarning(s.options, job); !w.empty()) body["warning"] = w;
  SetJson(c.res, 200, body);
}

// GET /api/v1/jobs/{id}/metrics[?cursor=C|offset=N]: the scalars the job wrote to <job
// dir>/metrics.jsonl and to TensorBoard event files under <job dir> from cursor C (or byte N of
// metrics.jsonl) on (metrics.h); the console asks again from the answer's cursor while it runs.
// ?follow=1: the same answers as SSE "metrics" events while the job writes, then "end".
void JobMetrics(Call& c) {
  ServerState& s = c.server;
  OnlyParams(c, {"offset", "cursor", "follow"});
  store::Job job = VisibleJob(c, c.Path());
  MetricsCursor from;
  from.jsonl = CountParam(c, "offset").value_or(0);
  std::string cursor = Param(c, "cursor");
  if (BoolParam(c, "follow")) {
    if (const std::string last = c.req.get_header_value("Last-Event-ID"); !last.empty())
      cursor = last;
  }
  if (!cursor.empty()) {
    auto decoded = MetricsCursor::Decode(cursor);
    if (!decoded)
      throw BadRequest("cursor: not a cursor this server returned (the answer's \"cursor\")",
                       "cursor");
    from = std::move(*decoded);
  }
  const fs::path dir = s.options.storage_root / "jobs" / job.id;
  if (BoolParam(c, "follow"))
    return Follow(c, std::make_shared<MetricsFollow>(s.store, job.id, dir, std::move(from)));
  std::string warning;
  const std::vector<EventFile> files = FindJobEventFiles(dir, MetricsLimits{}, &warning);
  SetJson(c.res, 200, ReadJobMetrics(dir, from, files, Finished(job), {}, warning));
}

}  // namespace starforge::api
