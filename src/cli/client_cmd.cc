// `forge login`, `submit`, `get`, `describe`, `logs`, `cancel`, `capacity`, `doctor`: clients of
// the REST API of `forge serve` (docs/cli.md; the contract is docs of src/api). kubectl habits: -o
// wide|json|yaml|name, --watch, `describe` sections, exit codes a script can branch on.
#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <system_error>
#include <thread>

#include "command.h"
#include "starforge/capsule/cache.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/collect.h"
#include "starforge/capsule/reuse.h"
#include "starforge/cli/api_client.h"
#include "starforge/cli/client_config.h"
#include "starforge/cli/client_output.h"
#include "starforge/cli/forge.h"
#include "starforge/common/sha256.h"
#include "starforge/doctor/doctor.h"
#include "starforge/jobspec/parse.h"
#include "starforge/kube/client_config.h"
#include "starforge/objstore/object_store.h"
#include "starforge/store/job.h"

namespace starforge::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::chrono::seconds kWatchInterval{2};
constexpr int64_t kPageSize = 500;  // the API's maximum `limit`

// A variable the command may read: the Context's (FORGE_* from main; anything in tests), else
// the process environment (HOME, XDG_CONFIG_HOME, NO_COLOR are not FORGE_* settings).
std::string Env(const Context& c, const char* name) {
  const auto it = c.env.find(name);
  if (it != c.env.end()) return it->second;
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

fs::path ConfigPath(const Context& c) {
  return ClientConfigPath(Env(c, "XDG_CONFIG_HOME"), Env(c, "HOME"));
}

bool StdoutColor(const Context& c) {
  return &c.out == &std::cout && ::isatty(STDOUT_FILENO) && Env(c, "NO_COLOR").empty();
}

int Report(Context& c, const ApiError& e) {
  c.err << e.ToString();
  return e.ExitCode();
}

// FORGE_SERVER and FORGE_TOKEN as config::Load reads and checks them: the settings table
// (docs/settings.md) is the one reader of FORGE_* settings, the CLI's two included.
struct ServerSettings {
  std::string server;  // "" = unset
  std::string token;   // "" = unset
};
StatusOr<ServerSettings> ServerFromEnvironment(const Context& c) {
  const config::LoadResult loaded = config::Load(c.env);
  for (const FieldError& e : loaded.errors) {
    if (e.path == "FORGE_SERVER" || e.path == "FORGE_TOKEN")
      return Status::Invalid(e.ToString(), e.path);
  }
  return ServerSettings{loaded.config.server, loaded.config.token.Reveal()};
}

// The client for this command, or nullopt (reason printed, *exit set).
// `config_loaded`: the caller already loaded (and reported on) the FORGE_* settings.
std::optional<ApiClient> Connect(Context& c, const std::string& server_flag, int* exit,
                                 bool config_loaded = false) {
  // A misspelt FORGE_TOKEN would otherwise fail as "not logged in" with no hint why. The other
  // settings (their errors and warnings) concern `forge serve`, not this client.
  if (!config_loaded) {
    for (const auto& w : config::Load(c.env).name_warnings)
      c.err << "forge: warning: " << w << "\n";
  }
  const LoadedSettings loaded = LoadClientSettings(ConfigPath(c));
  if (!loaded.warning.empty()) c.err << "forge: warning: " << loaded.warning << "\n";
  if (!loaded.error.empty()) {
    c.err << "forge: " << loaded.error << "\n";
    *exit = kExitUsage;
    return std::nullopt;
  }
  const StatusOr<ServerSettings> env = ServerFromEnvironment(c);
  const StatusOr<Endpoint> ep =
      env ? ResolveEndpoint(server_flag, env->server, env->token, loaded.settings)
          : StatusOr<Endpoint>(env.status());
  if (!ep) {
    c.err << "forge: " << ep.status().message() << "\n";
    *exit = kExitUsage;
    return std::nullopt;
  }
  return ApiClient(ep->server, ep->token);
}

std::string JobPath(const std::string& id) {
  return "/api/v1/jobs/" + UrlEncode(id);
}

std::string PrintJob(const json& job, const std::string& output) {
  if (output == "name") return "job/" + job.value("id", std::string()) + "\n";
  return Format(job, output);
}

// A private temporary directory, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "forge-submit-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// ---- login ----

std::string Trim(std::string s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// The token from standard input: typed without echo on a terminal, else its first line.
std::string ReadToken(Context& c, bool from_stdin, const std::string& server) {
  const bool tty = &c.in == &std::cin && ::isatty(STDIN_FILENO);
  std::string line;
  if (tty && !from_stdin) {
    c.err << "Token for " << server << " (input hidden): " << std::flush;
    termios saved{};
    const bool have = ::tcgetattr(STDIN_FILENO, &saved) == 0;
    if (have) {
      termios quiet = saved;
      quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
      ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    }
    std::getline(c.in, line);
    if (have) ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
    c.err << "\n";
  } else {
    std::getline(c.in, line);
  }
  return Trim(line);
}

int Login(Context& c, const std::string& server_flag, bool token_stdin) {
  for (const auto& w : config::Load(c.env).name_warnings)
    c.err << "forge: warning: " << w << "\n";
  const fs::path path = ConfigPath(c);
  LoadedSettings loaded = LoadClientSettings(path);
  if (!loaded.error.empty()) c.err << "forge: warning: " << loaded.error << " (replacing it)\n";
  // Logging in never reuses a saved token: only the server comes from the flag, env or file.
  ClientSettings for_server = loaded.settings;
  for_server.token.clear();
  const StatusOr<ServerSettings> env = ServerFromEnvironment(c);
  const StatusOr<Endpoint> ep = env ? ResolveEndpoint(server_flag, env->server, "", for_server)
                                    : StatusOr<Endpoint>(env.status());
  if (!ep) {
    c.err << "forge: " << ep.status().message() << "\n";
    return kExitUsage;
  }
  const std::string token = ReadToken(c, token_stdin, ep->server);
  if (token.empty()) {
    c.err << "forge: no token given: paste the token that `forge serve` printed at its first "
             "start (or `forge token create --user NAME`), or pipe it: forge login --token-stdin "
             "< FILE\n";
    return kExitUsage;
  }
  ApiClient client(ep->server, token);
  json who;
  ApiError e = client.GetJson("/api/v1/whoami", &who);
  if (e.kind == ApiError::Kind::kUnauthorized) {
    e.message = "the server at " + ep->server +
                " rejected this token: check it (the admin token is printed once by the first "
                "`forge serve`; `forge token create --user NAME` makes more)";
  }
  if (!e.ok()) return Report(c, e);
  if (Status saved = SaveClientSettings(path, {ep->server, token}); !saved.ok()) {
    c.err << "forge: " << saved.message() << "\n";
    return kExitInvalid;
  }
  const std::string user = who.value("user", std::string("?"));
  c.out << "logged in to " << ep->server << " as " << user
        << (who.value("admin", false) ? " (admin)" : "") << "; saved to " << path.string() << "\n";
  return kExitOk;
}

// ---- logs ----

struct FollowOutcome {
  ApiError error;
  bool ended = false;
  json end;  // the end event's data
};

// Streams the job's log to standard output until its end event.
FollowOutcome FollowLogs(Context& c, ApiClient& client, const std::string& id,
                         std::string last_event_id) {
  FollowOutcome outcome;
  StreamOptions options;
  options.on_reconnect = [&c](const ApiError& why) {
    c.err << "forge: warning: " << why.message << "; resuming the log stream\n" << std::flush;
  };
  outcome.error = client.Stream(
      JobPath(id) + "/logs?follow=1", &last_event_id,
      [&](const SseEvent& ev) {
        if (ev.event == "log") {
          c.out << ev.data << "\n" << std::flush;
          return true;
        }
        if (ev.event == "end") {
          outcome.ended = true;
          outcome.end = json::parse(ev.data, nullptr, /*allow_exceptions=*/false);
          if (!outcome.end.is_object()) outcome.end = json::object();
          return false;
        }
        return true;  // events of a newer server that this client does not know
      },
      options);
  return outcome;
}

struct LogsOptions {
  bool follow = false;
  int64_t tail = -1;
  std::string file;  // "" = driver.log
  bool ray = false, submitter = false, events = false, list = false;
};

// The files of the job's logs (GET …/artifacts), one per line with its size, and any warning.
int ListLogFiles(Context& c, ApiClient& client, const std::string& id) {
  json listing;
  const ApiError e = client.GetJson(JobPath(id) + "/artifacts", &listing);
  if (!e.ok()) return Report(c, e);
  if (listing.contains("warning"))
    c.err << "forge: warning: " << listing["warning"].get<std::string>() << "\n";
  for (const auto& f : listing.value("items", json::array()))
    c.out << f.value("name", "") << "\t" << f.value("size", 0) << "\n";
  if (!listing.value("logsArchived", false))
    c.err << "forge: the fleet's archive is added when the job has ended\n";
  return kExitOk;
}

int Logs(Context& c, const std::string& server, const std::string& id, LogsOptions o) {
  int exit = 0;
  std::optional<ApiClient> client = Connect(c, server, &exit);
  if (!client) return exit;
  if (o.list) return ListLogFiles(c, *client, id);
  if (o.ray + o.submitter + o.events + !o.file.empty() > 1) {
    c.err << "forge logs: give one of --ray, --submitter, --events, --file\n";
    return kExitUsage;
  }
  if (o.ray) o.file = "ray-job.log";
  if (o.submitter) o.file = "submitter.log";
  if (o.events) o.file = "events.json";
  const bool follow = o.follow;
  const int64_t tail = o.tail;
  if (!o.file.empty()) {
    // A file of the archive: whole (or its tail); the archive is written once, at the end.
    std::string text;
    std::string query = "?file=" + o.file;
    if (tail >= 0) query += "&tail=" + std::to_string(tail);
    const ApiError e = client->GetText(JobPath(id) + "/logs" + query, &text);
    if (!e.ok()) {
      Report(c, e);
      if (e.ExitCode() == kExitNotFound) {
        c.err << "forge: the job's log files (forge logs " << id << " --list):\n";
        ListLogFiles(c, *client, id);
      }
      return e.ExitCode();
    }
    c.out << text << std::flush;
    return kExitOk;
  }
  if (!follow) {
    std::string text;
    const std::string query = tail >= 0 ? "?tail=" + std::to_string(tail) : "";
    const ApiError e = client->GetText(JobPath(id) + "/logs" + query, &text);
    if (!e.ok()) return Report(c, e);
    c.out << text << std::flush;
    if (text.empty()) {
      // Say why nothing came when the server knows (no storage volume for a kuberay job).
      json listing;
      if (client->GetJson(JobPath(id) + "/artifacts", &listing).ok() && listing.contains("warning"))
        c.err << "forge: warning: " << listing["warning"].get<std::string>() << "\n";
    }
    return kExitOk;
  }
  std::string from;  // the stream's resume point: a byte offset in the log
  if (tail >= 0) {
    // The stream starts where this text ends, so no line is shown twice or missed.
    std::string text;
    const ApiError e = client->GetText(JobPath(id) + "/logs", &text);
    if (!e.ok()) return Report(c, e);
    const size_t start = TailStart(text, tail);
    c.out << text.substr(start) << std::flush;
    from = std::to_string(text.size());
  }
  const FollowOutcome outcome = FollowLogs(c, *client, id, from);
  if (!outcome.error.ok()) return Report(c, outcome.error);
  return kExitOk;
}

// ---- submit ----

int ExitForPhase(const std::string& phase) {
  if (phase == store::ToString(store::Phase::kSucceeded)) return kExitOk;
  if (phase == store::ToString(store::Phase::kCancelled)) return kExitCancelled;
  return kExitInvalid;
}

// Where `forge submit` keeps what the next submit of a code directory can reuse — its last
// capsule, the index that lets the next build borrow from it, the digest cache: per user, per
// directory, never inside the code directory ($XDG_CACHE_HOME/starforge/submit/<hash of the
// directory's absolute path>, else ~/.cache/…). Empty: nothing is kept.
fs::path SubmitCacheDir(const Context& c, const fs::path& dir) {
  fs::path root;
  const std::string xdg = Env(c, "XDG_CACHE_HOME");
  const std::string home = Env(c, "HOME");
  if (!xdg.empty() && xdg.front() == '/')
    root = fs::path(xdg) / "starforge";
  else if (!home.empty())
    root = fs::path(home) / ".cache" / "starforge";
  else
    return {};
  std::error_code ec;
  const fs::path absolute = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  return root / "submit" / Sha256Hex(absolute.string()).substr(0, 32);
}

std::string ShortDigest(const std::string& sha) {
  return "sha256-" + sha.substr(0, 12);
}

// POSTs the JobSpec with the digest of a capsule the server already holds: 0 with *job set,
// 409 when the server does not have it for this JobSpec, or the exit code after printing why.
// With `ask_first`, a GET /api/v1/capsules/{sha} first; without, the POST alone answers (one
// round trip: what an unchanged resubmit costs).
int SendByDigest(Context& c, ApiClient& client, std::vector<FormPart> parts, const std::string& sha,
                 bool ask_first, json* job) {
  json info;
  if (ask_first && !client.GetJson("/api/v1/capsules/" + sha, &info).ok()) return 409;
  parts[1] = FormPart{"capsuleSha256", sha, {}, "", "", {}};
  const ApiError e = client.PostForm("/api/v1/jobs", parts, nullptr, job);
  if (e.status == 409) return 409;
  if (!e.ok()) return Report(c, e);
  c.err << "capsule " << ShortDigest(sha) << " is already on the server: nothing uploaded\n";
  return 0;
}

// Starts an upload (POST /api/v1/uploads, docs/api.md): the server checks the JobSpec and
// answers with where to PUT the capsule, as a plain body. *url is "" when the server predates
// uploads (404 or 405 for the route): the caller sends a multipart form instead.
ApiError StartUpload(ApiClient& client, const std::string& spec_text, std::string* url) {
  url->clear();
  json session;
  ApiError e = client.PostText("/api/v1/uploads", "application/yaml", spec_text, &session);
  if (e.status == 404 || e.status == 405) return {};
  if (!e.ok()) return e;
  *url = session.value("url", "");
  if (url->rfind("/api/v1/uploads/", 0) != 0) {
    e.kind = ApiError::Kind::kProtocol;
    e.message = "POST /api/v1/uploads answered without an upload URL";
  }
  return e;
}

// Builds the capsule on another thread while this one uploads it: the upload reads the
// capsule file back (pread, from the page cache) up to what the build has written
// (BuildOptions::written), the part sent with chunked encoding. The upload costs no time of its
// own, and the build never waits for it: a slow upload just reads further behind. *built is the
// build's result; the return value the POST's. False (nothing done) when no thread can be made.
// With `upload_url` (StartUpload), the archive is its PUT's plain body; else the "capsule"
// part of a multipart POST /api/v1/jobs.
bool BuildWhileUploading(ApiClient& client, std::vector<FormPart> parts,
                         const std::string& upload_url, const capsule::CollectResult& files,
                         const jobspec::JobSpec& spec, capsule::BuildOptions opts,
                         capsule::BuildResult* built, ApiError* sent, json* job) {
  std::mutex mu;
  std::condition_variable cv;
  int file = -1;           // the capsule file, dup'ed at its first bytes; -1 if that failed
  uint64_t available = 0;  // bytes of the archive in it
  bool ended = false;      // the build returned: *built is set
  int dup_errno = 0;
  opts.written = [&](int fd, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu);
    if (file < 0 && dup_errno == 0) {
      file = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
      if (file < 0) dup_errno = errno;
    }
    available = bytes;
    cv.notify_all();
  };
  std::thread builder;
  try {
    builder = std::thread([&] {
      capsule::BuildResult r = capsule::Build(files.files, spec, opts);
      std::lock_guard<std::mutex> lock(mu);
      *built = std::move(r);
      ended = true;
      cv.notify_all();
    });
  } catch (const std::system_error&) {
    return false;
  }
  uint64_t offset = 0;  // bytes handed to the upload
  net::BodyReader reader = [&](char* buf, size_t room) -> std::optional<size_t> {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ended || available > offset; });
    // A failed build stops the upload at once: its bytes are not a capsule.
    if (ended && !built->ok()) return std::nullopt;
    if (available == offset) return 0;  // the end of the archive
    if (file < 0) return std::nullopt;  // dup failed: nothing to read from
    const size_t want = static_cast<size_t>(std::min<uint64_t>(room, available - offset));
    const int fd = file;
    lock.unlock();
    size_t got = 0;
    while (got < want) {
      const ssize_t n = ::pread(fd, buf + got, want - got, static_cast<off_t>(offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return std::nullopt;
      got += static_cast<size_t>(n);
    }
    offset += got;
    return got;
  };
  // The request starts with the archive's first bytes, not before the hashing pass: a server
  // drops a body that stays silent for a few seconds (api::ServerOptions::read_timeout_s).
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ended || available > 0; });
  }
  if (!upload_url.empty()) {
    *sent = client.PutBody(upload_url, "application/zip", {}, reader, nullptr, job);
  } else {
    parts[1] = FormPart{"capsule", "", {}, "capsule.zip", "application/zip", reader};
    *sent = client.PostForm("/api/v1/jobs", parts, nullptr, job);
  }
  builder.join();  // an upload that ended early (refused) leaves the build to finish
  if (file >= 0) ::close(file);
  return true;
}

// Sends the JobSpec with the capsule `built` (SendJob): reports the upload made while it was
// built, or asks the server for the digest and uploads the file when it lacks it. 0 with *job
// set, or the exit code after printing why not.
int Deliver(Context& c, ApiClient& client, std::vector<FormPart> parts, const fs::path& dir,
            const capsule::CollectResult& files, const jobspec::JobSpec& spec,
            const capsule::DigestCache& digests,
            const std::function<void(const std::string&, const capsule::Fingerprint&)>& remember,
            const capsule::BuildResult& built, bool streaming, const ApiError& streamed,
            ProgressLine& progress, json* job) {
  const capsule::Fingerprint after = digests.Compute(files.files, spec);
  const size_t n = files.files.size();
  // The server's digest: its own reading of the JobSpec may differ from ours (its defaults).
  auto accepted = [&] {
    std::string stored = built.sha256;
    if (job->contains("capsule") && (*job)["capsule"].is_object())
      stored = (*job)["capsule"].value("sha256", stored);
    remember(stored, after);
    return 0;
  };
  // A body the server dropped midway (silent too long while a big file was deflated, on a busy
  // machine) is sent again whole below, like any later submit's: the build itself went on.
  const bool cut = streaming && !streamed.ok() &&
                   (streamed.kind == ApiError::Kind::kUnreachable || streamed.status == 400 ||
                    streamed.status == 408);
  if (cut)
    c.err << "forge: the upload while building was cut (" << streamed.message
          << "); sending the finished capsule\n";
  if (streaming && !cut) {
    if (!streamed.ok()) return Report(c, streamed);
    c.err << "uploaded " << dir.string() << ": " << n << (n == 1 ? " file" : " files") << ", "
          << capsule::FormatBytes(files.TotalBytes()) << " (capsule " << ShortDigest(built.sha256)
          << ", " << capsule::FormatBytes(built.size) << ", sent while it was built)\n";
    return accepted();
  }

  // The same tree and JobSpec may be on the server already (sent from another checkout).
  if (const int sent = SendByDigest(c, client, parts, built.sha256, /*ask_first=*/true, job);
      sent != 409) {
    if (sent == 0) remember(built.sha256, after);
    return sent;
  }
  std::string upload_url;
  if (const ApiError e = StartUpload(client, parts[0].data, &upload_url); !e.ok())
    return Report(c, e);
  c.err << "uploading " << dir.string() << ": " << n << (n == 1 ? " file" : " files") << ", "
        << capsule::FormatBytes(files.TotalBytes()) << " (capsule " << ShortDigest(built.sha256)
        << ", " << capsule::FormatBytes(built.size) << "; " << built.entries_reused
        << " entries reused from the last build)\n";
  const UploadProgress show = [&](uint64_t sent, uint64_t total) {
    progress.Show("uploading " + capsule::FormatBytes(sent) + " of " + capsule::FormatBytes(total) +
                  " (" + std::to_string(total ? 100 * sent / total : 100) + "%)");
  };
  ApiError e;
  if (!upload_url.empty()) {
    // The digest in the URL: the server refuses bytes changed or cut on the way.
    e = client.PutBody(upload_url + "?sha256=" + built.sha256, "application/zip", built.path, {},
                       show, job);
  } else {
    parts[1].name = "capsule";
    parts[1].file = built.path;
    parts[1].filename = capsule::FileName(built.sha256);
    parts[1].content_type = "application/zip";
    e = client.PostForm("/api/v1/jobs", parts, show, job);
  }
  progress.Clear();
  if (!e.ok()) return Report(c, e);
  return accepted();
}

// Sends the code the cheapest way (docs/capsule.md, "Submitting"): unchanged since the last
// submit and still on the server → only its digest; otherwise builds the capsule here
// (reusing the last one's entries) and uploads it once, unless the server already has it.
// 0 with *job set, or the exit code after printing why not.
int SendJob(Context& c, ApiClient& client, const config::Config& cfg, const fs::path& dir,
            const capsule::CollectResult& files, const jobspec::JobSpec& spec,
            const std::string& spec_text, const std::string& job_file, json* job) {
  const fs::path state = SubmitCacheDir(c, dir);
  const capsule::DigestCache digests(state.empty() ? fs::path() : state / "digests");
  // From the walk's own stats: an unchanged resubmit costs one stat per file, not two.
  const capsule::Fingerprint before = digests.FromWalk(files.files, spec);
  std::vector<FormPart> parts(2);
  parts[0].name = "spec";
  parts[0].data = spec_text;
  parts[0].filename = job_file == "-" ? "job.yaml" : fs::path(job_file).filename().string();
  auto remember = [&](const std::string& sha, const capsule::Fingerprint& after) {
    if (!state.empty() && after.key == before.key) digests.Remember(before, sha);
  };
  // The digest the server stored last time: one POST, no file read (docs/capsule.md, goal 3 of
  // issue 17 in bench/README.md). An unreachable server or a bad token is reported from here.
  if (const auto known = state.empty() ? std::nullopt : digests.Lookup(before)) {
    const int sent = SendByDigest(c, client, parts, *known, /*ask_first=*/false, job);
    if (sent != 409) return sent;
  } else {
    // Unreachable or logged out: say so before zipping a large tree for nothing.
    json who;
    if (const ApiError e = client.GetJson("/api/v1/whoami", &who); !e.ok()) return Report(c, e);
  }

  // Build here, into the cache (a temporary directory when there is none).
  ScratchDir scratch;
  capsule::BuildOptions opts;
  opts.output_dir = state / "capsules";
  std::error_code ec;
  if (!state.empty()) fs::create_directories(opts.output_dir, ec);
  const bool keep = !state.empty() && !ec && ::access(opts.output_dir.c_str(), W_OK) == 0;
  if (!keep) opts.output_dir = scratch.path();
  const fs::path index_file = state / "capsule.index";
  const capsule::ReuseIndex reuse =
      keep ? capsule::ReuseIndex::Load(index_file) : capsule::ReuseIndex();
  opts.reuse = &reuse;
  opts.max_bytes = cfg.capsule_max_bytes;
  ProgressLine progress(c, std::chrono::milliseconds(500), std::chrono::milliseconds(100));
  opts.progress = [&](const capsule::BuildProgress& p) {
    const char* what = p.phase == capsule::BuildProgress::Phase::kHashing ? "hashing" : "packing";
    const int percent = p.bytes_total ? static_cast<int>(100 * p.bytes_done / p.bytes_total) : 100;
    progress.Show(std::string(what) + " " + dir.string() + ": " + std::to_string(percent) + "%");
  };
  // Nothing to borrow from (a first submit from this directory): the capsule is uploaded as it
  // is written. The server may hold the same capsule from another checkout, which only the
  // finished build's digest would tell: a first submit sends it anyway, but in no more time.
  capsule::BuildResult built;
  ApiError streamed;
  // The JobSpec first: checked by the server before anything is built or sent.
  std::string upload_url;
  if (reuse.empty()) {
    if (const ApiError e = StartUpload(client, spec_text, &upload_url); !e.ok())
      return Report(c, e);
  }
  const bool streaming = reuse.empty() && BuildWhileUploading(client, parts, upload_url, files,
                                                              spec, opts, &built, &streamed, job);
  if (!streaming) built = capsule::Build(files.files, spec, opts);
  progress.Clear();
  if (!built.ok()) {
    for (const auto& e : built.errors)
      c.err << "forge: " << e << "\n";
    return kExitInvalid;
  }
  const int sent = Deliver(c, client, parts, dir, files, spec, digests, remember, built, streaming,
                           streamed, progress, job);
  // Only the newest capsule is kept: the next build needs it, nothing needs the older one. The
  // index names a capsule only once its upload is over: a submit from the same directory running
  // at once removes the capsule it borrowed from, which must not be one still being sent.
  if (keep) {
    capsule::ReuseIndex::Save(index_file, built.path, built.entries, built.checkpoints);
    if (!reuse.empty() && reuse.capsule().parent_path() == fs::absolute(opts.output_dir) &&
        reuse.capsule() != fs::absolute(built.path))
      fs::remove(reuse.capsule(), ec);
  }
  return sent;
}

struct SubmitOptions {
  std::string job_file;
  std::string code;
  bool follow = false;
  std::string output;
};

int Submit(Context& c, const std::string& server, const SubmitOptions& o) {
  config::Config cfg;
  if (!LoadConfig(c, &cfg, /*client=*/true)) return kExitUsage;
  std::string spec_text;
  if (!ReadInput(c, o.job_file, &spec_text)) return kExitInvalid;
  // Fail fast, before zipping anything: the same checks (and defaults) as `forge validate`.
  const jobspec::ParseResult parsed = jobspec::Parse(spec_text, config::JobDefaults(cfg));
  const std::string source = o.job_file == "-" ? "<stdin>" : o.job_file;
  if (!parsed.ok()) {
    PrintErrors(c, source, parsed.errors);
    return kExitInvalid;
  }
  const StatusOr<fs::path> dir = ResolveCodeDir(o.code, parsed.spec->code, o.job_file);
  if (!dir) {
    c.err << "forge: " << dir.status().message() << "\n";
    return kExitInvalid;
  }

  int exit = 0;
  std::optional<ApiClient> client = Connect(c, server, &exit, /*config_loaded=*/true);
  if (!client) return exit;
  const capsule::CollectResult files = capsule::Collect(*dir);
  for (const auto& w : files.warnings)
    c.err << "forge: warning: " << w << "\n";
  if (!files.ok()) {
    for (const auto& e : files.errors)
      c.err << "forge: " << dir->string() << ": " << e << "\n";
    return kExitInvalid;
  }
  if (files.files.empty()) {
    c.err << "forge: " << dir->string()
          << " has no files to send (all ignored? see its .forgeignore)\n";
    return kExitInvalid;
  }
  json job;
  if (const int failed =
          SendJob(c, *client, cfg, *dir, files, *parsed.spec, spec_text, o.job_file, &job);
      failed != 0)
    return failed;
  const std::string id = job.value("id", std::string());
  if (id.empty()) {
    c.err << "forge: the server accepted the job but its answer has no id\n";
    return kExitInvalid;
  }
  if (o.output.empty()) {
    c.out << "job/" << id << " submitted\n" << std::flush;
  } else {
    c.out << PrintJob(job, o.output) << std::flush;
  }
  if (!o.follow) return kExitOk;

  const FollowOutcome outcome = FollowLogs(c, *client, id, "");
  if (!outcome.error.ok()) return Report(c, outcome.error);
  // The end event has the phase; the job has the message too.
  json final_job;
  std::string phase = outcome.end.value("phase", std::string());
  std::string reason = outcome.end.value("reason", std::string());
  std::string message;
  if (client->GetJson(JobPath(id), &final_job).ok() && final_job.is_object()) {
    phase = final_job.value("phase", phase);
    reason = final_job.value("reason", reason);
    message = final_job.value("message", std::string());
  }
  c.err << "job/" << id << " " << (phase.empty() ? "ended" : phase);
  if (!reason.empty()) c.err << " (" << reason << ")";
  if (!message.empty()) c.err << ": " << message;
  c.err << "\n";
  return ExitForPhase(phase);
}

// ---- get / describe / cancel / capacity ----

struct GetOptions {
  std::string id;
  std::string output;
  bool watch = false;
  std::string phase;
  std::string name_contains;  // a part of the name, in any case (the API's nameContains)
  bool all_users = false;
  int64_t limit = 0;  // 0 = all
};

// Every job the options select, following nextCursor; or one job.
ApiError FetchJobs(ApiClient& client, const GetOptions& o, const std::string& owner,
                   std::vector<json>* jobs) {
  jobs->clear();
  if (!o.id.empty()) {
    json job;
    ApiError e = client.GetJson(JobPath(o.id), &job);
    if (e.ok()) jobs->push_back(std::move(job));
    return e;
  }
  std::string cursor;
  for (;;) {
    int64_t page = kPageSize;
    if (o.limit > 0) page = std::min<int64_t>(page, o.limit - static_cast<int64_t>(jobs->size()));
    std::string query = "?limit=" + std::to_string(page);
    if (!o.phase.empty()) query += "&phase=" + UrlEncode(o.phase);
    if (!o.name_contains.empty()) query += "&nameContains=" + UrlEncode(o.name_contains);
    if (!owner.empty()) query += "&owner=" + UrlEncode(owner);
    if (!cursor.empty()) query += "&cursor=" + UrlEncode(cursor);
    json list;
    ApiError e = client.GetJson("/api/v1/jobs" + query, &list);
    if (!e.ok()) return e;
    const auto items = list.find("items");
    if (!list.is_object() || items == list.end() || !items->is_array()) {
      e.kind = ApiError::Kind::kProtocol;
      e.message = "the server's job list has no \"items\" array";
      return e;
    }
    for (json& job : *items)
      jobs->push_back(std::move(job));
    const auto next = list.find("nextCursor");
    if (next == list.end() || !next->is_string() || next->get<std::string>().empty()) break;
    if (o.limit > 0 && static_cast<int64_t>(jobs->size()) >= o.limit) break;
    cursor = next->get<std::string>();
  }
  if (o.limit > 0 && static_cast<int64_t>(jobs->size()) > o.limit)
    jobs->resize(static_cast<size_t>(o.limit));
  return {};
}

std::string RenderJobs(const std::vector<json>& jobs, const std::string& output, bool header,
                       bool color, std::vector<size_t>* widths) {
  const int64_t now = NowMs();
  if (output == "json" || output == "yaml") {
    return Format(json{{"items", jobs}}, output);
  }
  std::string out;
  if (output == "name") {
    for (const json& job : jobs)
      out += "job/" + job.value("id", std::string()) + "\n";
    return out;
  }
  const bool wide = output == "wide";
  std::vector<std::vector<std::string>> rows;
  for (const json& job : jobs)
    rows.push_back(JobRow(job, wide, now));
  out = RenderTable(JobHeader(wide), rows, color, widths);
  if (!header) out.erase(0, out.find('\n') + 1);
  return out;
}

// What makes a row worth printing again under --watch: a change a user can see (not every
// update of the job's record, e.g. an observation that changed nothing).
std::string WatchKey(const json& job) {
  json key = json::object();
  for (const char* field :
       {"phase", "reason", "message", "capsule", "cancelRequested", "cleanup", "exitCode"}) {
    if (job.contains(field)) key[field] = job[field];
  }
  return key.dump();
}

// "running" → "Running": phases are case-sensitive in the API, not worth a round trip to learn.
std::string CanonicalPhase(const std::string& text) {
  for (int p = static_cast<int>(store::Phase::kQueued);
       p <= static_cast<int>(store::Phase::kCancelled); ++p) {
    const std::string_view name = store::ToString(static_cast<store::Phase>(p));
    if (std::equal(name.begin(), name.end(), text.begin(), text.end(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        }))
      return std::string(name);
  }
  return text;  // the server's error lists the phases
}

int Get(Context& c, const std::string& server, GetOptions o) {
  o.phase = CanonicalPhase(o.phase);
  int exit = 0;
  std::optional<ApiClient> client = Connect(c, server, &exit);
  if (!client) return exit;
  std::string owner;
  if (o.id.empty() && !o.all_users) {
    // An admin sees every job; like kubectl's current namespace, the default is your own.
    json who;
    const ApiError e = client->GetJson("/api/v1/whoami", &who);
    if (!e.ok()) return Report(c, e);
    if (who.value("admin", false)) owner = who.value("user", std::string());
  }
  const bool color = StdoutColor(c);
  std::vector<size_t> widths;  // of the first table, for the rows --watch adds
  std::vector<json> jobs;
  ApiError e = FetchJobs(*client, o, owner, &jobs);
  if (!e.ok()) return Report(c, e);
  const bool single = !o.id.empty();
  if ((o.output == "json" || o.output == "yaml") && single) {
    c.out << Format(jobs.front(), o.output);
  } else if (jobs.empty() && o.output != "json" && o.output != "yaml") {
    c.err << "No jobs found.\n";
  } else {
    c.out << RenderJobs(jobs, o.output, true, color, &widths);
  }
  c.out << std::flush;
  if (!o.watch) return kExitOk;

  std::map<std::string, std::string> seen;
  for (const json& job : jobs)
    seen[job.value("id", std::string())] = WatchKey(job);
  bool reported = false;
  for (;;) {
    std::this_thread::sleep_for(kWatchInterval);
    e = FetchJobs(*client, o, owner, &jobs);
    if (e.kind == ApiError::Kind::kUnreachable) {
      // A restarting server is a pause, not the end of the watch.
      if (!reported) c.err << e.ToString() << "forge: still watching; retrying every 2 s\n";
      reported = true;
      continue;
    }
    if (!e.ok()) return Report(c, e);
    reported = false;
    std::vector<json> changed;
    // Oldest first, so a burst of new jobs reads in submission order.
    for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) {
      const std::string id = it->value("id", std::string());
      const std::string key = WatchKey(*it);
      auto [at, inserted] = seen.emplace(id, key);
      if (!inserted && at->second == key) continue;
      at->second = key;
      changed.push_back(*it);
    }
    if (changed.empty()) continue;
    if (o.output == "json") {
      for (const json& job : changed)
        c.out << job.dump() << "\n";
    } else if (o.output == "yaml") {
      for (const json& job : changed)
        c.out << "---\n" << Format(job, "yaml");
    } else {
      c.out << RenderJobs(changed, o.output, false, color, &widths);
    }
    c.out << std::flush;
  }
}

int Describe(Context& c, const std::string& server, const std::string& id) {
  int exit = 0;
  std::optional<ApiClient> client = Connect(c, server, &exit);
  if (!client) return exit;
  json job;
  ApiError e = client->GetJson(JobPath(id), &job);
  if (!e.ok()) return Report(c, e);
  json events;
  e = client->GetJson(JobPath(id) + "/events", &events);
  if (!e.ok()) return Report(c, e);
  c.out << DescribeJob(job, events, NowMs(), StdoutColor(c));
  // Where the job's logs are (and, when they cannot reach the server, why): GET …/artifacts.
  json listing;
  if (client->GetJson(JobPath(id) + "/artifacts", &listing).ok() && listing.is_object()) {
    std::string files;
    for (const auto& f : listing.value("items", json::array()))
      files += (files.empty() ? "" : ", ") + f.value("name", std::string());
    c.out << "Log files:    " << (files.empty() ? "<none>" : files) << " (forge logs " << id
          << " --file NAME)\n";
    if (listing.contains("warning") && listing["warning"].is_string())
      c.out << "Warning:      " << listing["warning"].get<std::string>() << "\n";
  }
  return kExitOk;
}

int Cancel(Context& c, const std::string& server, const std::string& id) {
  int exit = 0;
  std::optional<ApiClient> client = Connect(c, server, &exit);
  if (!client) return exit;
  json job;
  int status = 0;
  const ApiError e = client->PostJson(JobPath(id) + "/cancel", nullptr, &job, &status);
  if (!e.ok()) return Report(c, e);
  if (status == 202) {
    c.out << "job/" << id << " cancel requested\n";
  } else {
    c.out << "job/" << id << " already " << job.value("phase", std::string("finished"))
          << "; nothing to cancel\n";
  }
  return kExitOk;
}

// ---- doctor ----

// The cluster checks as the server runs them (GET /api/v1/doctor, admins), or, with --local, as
// this environment's FORGE_* settings would (before deploying a server).
int Doctor(Context& c, const std::string& server, const std::string& output, bool local) {
  json body;
  if (local) {
    config::Config cfg;
    if (!LoadConfig(c, &cfg)) return kExitUsage;
    doctor::RunOptions ro;
    ro.config = cfg;
    StatusOr<kube::ClientConfig> loaded = kube::LoadClientConfig(cfg, kube::ProcessConfigSources());
    if (loaded.ok()) {
      ro.kube = std::move(loaded).value();
    } else {
      ro.kube_error = loaded.status().message();
    }
    std::unique_ptr<objstore::ObjectStore> objects;
    if (!cfg.s3_endpoint.empty()) {
      auto opened = objstore::Open(cfg);
      if (opened) objects = std::move(opened.value());
    }
    ro.objects = objects.get();
    ro.objects_are_s3 = objects != nullptr;
    body = doctor::ToJson(doctor::Run(ro));
  } else {
    int exit = 0;
    std::optional<ApiClient> client = Connect(c, server, &exit);
    if (!client) return exit;
    const ApiError e = client->GetJson("/api/v1/doctor", &body);
    if (!e.ok()) return Report(c, e);
  }
  const doctor::Report report = doctor::FromJson(body);
  c.out << (output.empty() ? doctor::ToText(report) : Format(body, output)) << std::flush;
  return report.Passed() ? kExitOk : kExitInvalid;
}

int Capacity(Context& c, const std::string& server, const std::string& output) {
  int exit = 0;
  std::optional<ApiClient> client = Connect(c, server, &exit);
  if (!client) return exit;
  json capacity;
  const ApiError e = client->GetJson("/api/v1/capacity", &capacity);
  if (!e.ok()) return Report(c, e);
  c.out << (output.empty() ? CapacityTable(capacity) : Format(capacity, output));
  return kExitOk;
}

// The web console is served by the same server at "/": its URL, to open in a browser. The token
// is never put in the URL (it would end up in histories and logs): the page asks for it, or,
// with --login, the URL's #fragment (which browsers never send) carries a one-time code that
// the page redeems by POST for this client's token (docs/console.md).
int Console(Context& c, const std::string& server_flag, bool login) {
  if (login) {
    int exit = 0;
    std::optional<ApiClient> client = Connect(c, server_flag, &exit);
    if (!client) return exit;
    json code;
    const ApiError e = client->PostJson("/api/v1/console/login-codes", nullptr, &code);
    if (!e.ok()) return Report(c, e);
    c.out << client->server() << "/#login=" << code.value("code", "") << "\n";
    c.err << "forge: the link signs a browser in as you, once, within "
          << code.value("expiresInSeconds", 60) << " s; do not share it\n";
    return kExitOk;
  }
  LoadedSettings loaded = LoadClientSettings(ConfigPath(c));
  const StatusOr<ServerSettings> env = ServerFromEnvironment(c);
  const StatusOr<Endpoint> ep = env ? ResolveEndpoint(server_flag, env->server, "", loaded.settings)
                                    : StatusOr<Endpoint>(env.status());
  if (!ep) {
    c.err << "forge: " << ep.status().message() << "\n";
    return kExitUsage;
  }
  c.out << ep->server << "/\n";
  c.err << "forge: open it in a browser and sign in with your API token (forge login keeps it in "
        << ConfigPath(c).string() << "; forge token create --user NAME makes one)\n";
  return kExitOk;
}

}  // namespace

void AddServer(CLI::App* app, std::string* server) {
  app->add_option("--server", *server,
                  "StarForge server URL (default: FORGE_SERVER, then `forge login`'s, then " +
                      std::string(kDefaultServer) + ")");
}

std::optional<ApiClient> ConnectClient(Context& c, const std::string& server_flag, int* exit) {
  return Connect(c, server_flag, exit);
}

int ReportApiError(Context& c, const ApiError& e) {
  return Report(c, e);
}

void RegisterClientCommands(Registry& registry) {
  struct Options {
    std::string server;
    bool token_stdin = false;
    SubmitOptions submit;
    GetOptions get;
    std::string id;
    bool follow = false;
    bool login = false;
    int64_t tail = -1;
    std::string output;
    LogsOptions logs;
    bool local = false;
  };
  auto opts = std::make_shared<Options>();

  CLI::App* login = registry.Add(
      "login", "Save the server URL and your API token (verified) for the other commands",
      [opts](Context& c) { return Login(c, opts->server, opts->token_stdin); });
  AddServer(login, &opts->server);
  login->add_flag("--token-stdin", opts->token_stdin,
                  "Read the token from standard input (the default when it is not a terminal)");

  CLI::App* submit = registry.Add(
      "submit",
      "Send a JobSpec and its code to the server; with --follow, stream the logs and exit with "
      "the job's outcome (0 Succeeded, 1 Failed, 2 Cancelled)",
      [opts](Context& c) { return Submit(c, opts->server, opts->submit); });
  submit->add_option("JOB", opts->submit.job_file, "JobSpec file (YAML or JSON; - for stdin)")
      ->required();
  submit->add_option("--code", opts->submit.code,
                     "Code directory (default: the JobSpec's code:, relative to its file)");
  submit->add_flag("-f,--follow", opts->submit.follow,
                   "Stream the job's logs until it ends; exit with its outcome");
  submit->add_option("-o,--output", opts->submit.output, "Print the job as json, yaml or name")
      ->check(CLI::IsMember({"json", "yaml", "name"}));
  AddServer(submit, &opts->server);

  CLI::App* get = registry.app().add_subcommand("get", "List jobs, or show one");
  get->require_subcommand(1);
  CLI::App* jobs = registry.Add(get, "jobs", "List your jobs (newest first), or show job ID",
                                [opts](Context& c) { return Get(c, opts->server, opts->get); });
  jobs->alias("job");
  jobs->add_option("ID", opts->get.id, "A job id: show only this job");
  jobs->add_option("-o,--output", opts->get.output, "wide, json, yaml or name (default: a table)")
      ->check(CLI::IsMember({"wide", "json", "yaml", "name"}));
  jobs->add_flag("-w,--watch", opts->get.watch,
                 "After the list, print jobs again as they change (every 2 s) until interrupted");
  jobs->add_option("--phase", opts->get.phase, "Only jobs in this phase (e.g. Running)");
  jobs->add_option("--name-contains", opts->get.name_contains,
                   "Only jobs whose name contains this, in any case (eval finds llm-eval-7b)");
  jobs->add_flag("-A,--all-users", opts->get.all_users, "Every user's jobs (admin only)");
  jobs->add_option("--limit", opts->get.limit, "At most N jobs (default: all)")
      ->check(CLI::PositiveNumber);
  AddServer(jobs, &opts->server);

  CLI::App* describe = registry.app().add_subcommand("describe", "Show a job in detail");
  describe->require_subcommand(1);
  CLI::App* describe_job =
      registry.Add(describe, "job", "A job's spec, phase, reason, timeline and events",
                   [opts](Context& c) { return Describe(c, opts->server, opts->id); });
  describe_job->alias("jobs");
  describe_job->add_option("ID", opts->id, "Job id")->required();
  AddServer(describe_job, &opts->server);

  CLI::App* logs = registry.Add(
      "logs",
      "Print a job's log (its entrypoint's output); -f follows it until the job ends; --ray, "
      "--submitter, --events or --file print a file of the archive kept at the end",
      [opts](Context& c) {
        LogsOptions lo = opts->logs;
        lo.follow = opts->follow;
        lo.tail = opts->tail;
        return Logs(c, opts->server, opts->id, lo);
      });
  logs->add_option("ID", opts->id, "Job id")->required();
  logs->add_flag("-f,--follow", opts->follow, "Keep streaming until the job ends");
  logs->add_option("--tail", opts->tail, "Only the last N lines")->check(CLI::NonNegativeNumber);
  logs->add_flag("--ray", opts->logs.ray, "Ray's job log (kuberay: ray-job.log)");
  logs->add_flag("--submitter", opts->logs.submitter,
                 "The submitter's log (kuberay: submitter.log, `ray job logs --follow`)");
  logs->add_flag("--events", opts->logs.events,
                 "What Kubernetes said about the job (kuberay: events.json)");
  logs->add_option("--file", opts->logs.file, "Another file of the job's logs (see --list)");
  logs->add_flag("--list", opts->logs.list, "List the job's log files and their sizes");
  AddServer(logs, &opts->server);

  CLI::App* doctor = registry.Add(
      "doctor",
      "Check the cluster's prerequisites for the kuberay fleet, each with its fix; exit 1 when "
      "one fails",
      [opts](Context& c) { return Doctor(c, opts->server, opts->output, opts->local); });
  doctor->add_option("-o,--output", opts->output, "json or yaml (default: a checklist)")
      ->check(CLI::IsMember({"json", "yaml"}));
  doctor->add_flag("--local", opts->local,
                   "Run the checks here with this environment's FORGE_* settings and Kubernetes "
                   "credentials instead of asking the server (admins) to run them");
  AddServer(doctor, &opts->server);

  CLI::App* cancel =
      registry.Add("cancel", "Stop a job (SIGTERM, then SIGKILL after a grace period)",
                   [opts](Context& c) { return Cancel(c, opts->server, opts->id); });
  cancel->add_option("ID", opts->id, "Job id")->required();
  AddServer(cancel, &opts->server);

  CLI::App* capacity = registry.Add("capacity", "What each fleet has and uses", [opts](Context& c) {
    return Capacity(c, opts->server, opts->output);
  });
  capacity->add_option("-o,--output", opts->output, "json or yaml (default: a table)")
      ->check(CLI::IsMember({"json", "yaml"}));
  AddServer(capacity, &opts->server);

  CLI::App* console =
      registry.Add("console", "Print the URL of the web console (served by forge serve at /)",
                   [opts](Context& c) { return Console(c, opts->server, opts->login); });
  console->add_flag("--login", opts->login,
                    "A link that signs a browser in as you: once, within a minute");
  AddServer(console, &opts->server);
}

}  // namespace starforge::cli
