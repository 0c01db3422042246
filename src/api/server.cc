#include "starforge/api/server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <tuple>

#include <httplib.h>
#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include "starforge/api/body.h"
#include "starforge/api/capsule_info.h"
#include "starforge/api/console_assets.h"
#include "starforge/api/convert.h"
#include "starforge/api/front.h"
#include "starforge/api/login_codes.h"
#include "starforge/api/logs.h"
#include "starforge/api/metrics.h"
#include "starforge/api/playground_routes.h"
#include "starforge/api/routes.h"
#include "starforge/api/watch.h"
#include "starforge/capsule/accept.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/extract.h"
#include "starforge/capsule/stream_check.h"
#include "starforge/common/api_errors.h"
#include "starforge/common/format.h"
#include "starforge/common/reasons.h"
#include "starforge/common/sha256.h"
#include "starforge/common/yaml_json.h"
#include "starforge/jobspec/parse.h"

namespace starforge::api {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Room in a request body beyond the code archive: the JobSpec part and the multipart framing.
constexpr int64_t kBodySlack = 2 << 20;
constexpr size_t kMaxSpecBytes = 1 << 20;
constexpr size_t kMaxSmallBody = 64 << 10;  // bodies of POSTs other than a job submission
constexpr int kMaxParts = 8;
// How many of a user's newest jobs a capsule digest is looked up in (GET /api/v1/capsules/…).
constexpr int kCapsuleLookback = 1000;
constexpr int kDefaultListLimit = 50;
constexpr int kMaxListLimit = 500;
// How long a follow stream waits, after the job ended, for its fleet to hand over the logs
// (logsArchived) before it ends anyway.
constexpr int64_t kArchiveWaitMs = 30'000;
// How often a follow stream looks at its job in the store (its file: every sse_poll).
constexpr auto kFollowJobCheck = std::chrono::seconds(1);
// How often a capacity watch reads the fleets' capacity, which all watches share.
constexpr auto kCapacityWatchEvery = std::chrono::milliseconds(1000);

const char* const kJson = "application/json";

// A request that ends with an error response; thrown from handlers, answered by Run().
struct ApiError {
  ApiError(int s, std::string k, std::string m, std::string f = {}, FieldErrors e = {})
      : status(s),
        kind(std::move(k)),
        message(std::move(m)),
        field(std::move(f)),
        errors(std::move(e)) {}
  int status;
  std::string kind;
  std::string message;
  std::string field;
  FieldErrors errors;
};

ApiError BadRequest(std::string message, std::string field = {}) {
  return {400, api_errors::kBadRequest, std::move(message), std::move(field), {}};
}

std::string PhaseList() {
  std::string s;
  for (int p = 0; p <= static_cast<int>(store::Phase::kCancelled); ++p)
    s += std::string(p ? ", " : "") + std::string(store::ToString(static_cast<store::Phase>(p)));
  return s;
}

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string s;
  for (const auto& i : items)
    s += (s.empty() ? "" : sep) + i;
  return s;
}

void SetJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  // Invalid UTF-8 from a client (e.g. in a name filter echoed back) must not throw here.
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                  kJson);
}

void SetError(httplib::Response& res, const ApiError& e) {
  if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  SetJson(res, e.status, ErrorJson(e.kind, e.message, e.field, e.errors));
}

// Removes a file or directory tree at scope exit unless released.
class Cleanup {
 public:
  explicit Cleanup(fs::path p = {}) : path_(std::move(p)) {}
  ~Cleanup() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  Cleanup(const Cleanup&) = delete;
  Cleanup& operator=(const Cleanup&) = delete;
  void Reset(fs::path p) { path_ = std::move(p); }
  void Release() { path_.clear(); }

 private:
  fs::path path_;
};

void FsyncPath(const fs::path& p, int flags) {
  const int fd = ::open(p.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("open " + p.string() + ": " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw std::runtime_error("fsync " + p.string() + ": " + std::strerror(err));
}

FrontOptions FrontOptionsOf(const ServerOptions& o) {
  FrontOptions f;
  f.max_connections = o.max_connections;
  f.max_connections_per_client = o.max_connections_per_client;
  f.max_workers = o.max_workers;
  f.head_timeout = std::chrono::seconds(o.head_timeout_s);
  f.read_timeout = std::chrono::seconds(o.read_timeout_s);
  return f;
}

}  // namespace

struct Server::Impl {
  ServerOptions options;
  store::Store& store;
  controller::Controller& controller;
  std::map<std::string, fleet::Fleet*> fleets;

  Front http;  // httplib's routing over an event-driven front (front.h)
  bool started = false;
  std::atomic<bool> stopping{false};
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  fs::path uploads;
  std::mutex follow_mu;
  std::map<std::string, int> follows;  // open log-follow streams per user
  std::map<std::string, int> watches;  // open watch streams per user (follow_mu)
  std::mutex capacity_mu;
  nlohmann::json capacity_cache;  // FleetsCapacity's last answer (capacity_mu)
  Clock::time_point capacity_read;
  // Names this process in resourceVersions: another server's change numbers are not ours.
  const std::string epoch = std::to_string(NowMs());
  // Disk space held by uploads (and the controller's packagings, when serve shares it): the
  // options' budget, or this server's own.
  std::unique_ptr<DiskBudget> own_budget;
  DiskBudget* upload_budget;
  LoginCodes login_codes;  // forge console --login

  struct Route {
    RouteInfo info;
    std::regex re;
  };
  std::vector<Route> routes;

  // What a handler works with.
  struct Call {
    const httplib::Request& req;
    httplib::Response& res;
    const httplib::ContentReader* reader;  // POST routes
    store::User user;
    bool body_read = false;
  };

  Impl(ServerOptions o, store::Store& s, controller::Controller& c,
       std::map<std::string, fleet::Fleet*> f)
      : options(std::move(o)),
        store(s),
        controller(c),
        fleets(std::move(f)),
        http(FrontOptionsOf(options)),
        own_budget(
            options.disk_budget != nullptr
                ? nullptr
                : std::make_unique<DiskBudget>(
                      options.upload_space_bytes > 0
                          ? std::function<int64_t()>([n = options.upload_space_bytes] { return n; })
                          : DiskBudget::FreeSpaceOf(options.state_dir),
                      options.upload_keep_free_bytes)),
        upload_budget(options.disk_budget != nullptr ? options.disk_budget : own_budget.get()) {
    uploads = options.state_dir / "uploads";
    for (const auto& r : Routes())
      routes.push_back({r, std::regex(PathRegex(r.path))});
  }

  // ------------------------------------------------------------------------------------------
  // Plumbing: registration, auth, errors.

  void Register() {
    for (const Route& r : routes) {
      const Route* route = &r;
      const std::string pattern = PathRegex(r.info.path);
      if (r.info.method == "GET") {
        http.Get(pattern, [this, route](const httplib::Request& req, httplib::Response& res) {
          Run(*route, req, res, nullptr);
        });
      } else if (r.info.method == "PUT") {
        http.Put(pattern, [this, route](const httplib::Request& req, httplib::Response& res,
                                        const httplib::ContentReader& reader) {
          Run(*route, req, res, &reader);
        });
      } else if (r.info.method == "DELETE") {
        http.Delete(pattern, [this, route](const httplib::Request& req, httplib::Response& res,
                                           const httplib::ContentReader& reader) {
          Run(*route, req, res, &reader);
        });
      } else {
        // Every POST reads its own body, so that nothing unbounded is buffered in memory.
        http.Post(pattern, [this, route](const httplib::Request& req, httplib::Response& res,
                                         const httplib::ContentReader& reader) {
          Run(*route, req, res, &reader);
        });
      }
    }
    // Anything else: 404, or 405 when the path exists with another method. Bodies are read
    // (and dropped, within the small-body limit) so the connection stays in step.
    // GETs outside the API are the web console's (console_assets.cc).
    http.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      if (!ServeConsole(req, res)) NoRoute(req, res, nullptr);
    });
    http.Options(".*", [this](const httplib::Request& req, httplib::Response& res) {
      NoRoute(req, res, nullptr);
    });
    auto no_route = [this](const httplib::Request& req, httplib::Response& res,
                           const httplib::ContentReader& reader) { NoRoute(req, res, &reader); };
    http.Post(".*", no_route);
    http.Put(".*", no_route);
    http.Patch(".*", no_route);
    http.Delete(".*", no_route);
    http.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
      RequestStart() = Clock::now();
      return httplib::Server::HandlerResponse::Unhandled;
    });
    // Errors httplib answers itself (malformed requests, a body over the limit).
    http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request&,
                                                                       httplib::Response& res) {
      if (!res.body.empty() || res.content_provider_)
        return httplib::Server::HandlerResponse::Unhandled;
      switch (res.status) {
        case 413:
          SetError(res, TooLarge());
          break;
        case 414:
          SetError(res, {414, api_errors::kBadRequest, "the request URI is too long"});
          break;
        case 404:
          SetError(res, {404, api_errors::kNotFound, "not found"});
          break;
        default:
          SetError(res,
                   {res.status, res.status >= 500 ? api_errors::kInternal : api_errors::kBadRequest,
                    res.status >= 500 ? "internal error" : "malformed HTTP request"});
      }
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const httplib::Request& req, httplib::Response& res,
                                  std::exception_ptr) {
      spdlog::error("{} {}: unexpected exception", req.method, req.path);
      SetError(res, {500, api_errors::kInternal, "internal error; the server's log has details"});
    });
    http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - RequestStart());
      spdlog::info("{} {} {} {}ms", req.method, req.path, res.status, ms.count());
    });
  }

  void NoRoute(const httplib::Request& req, httplib::Response& res,
               const httplib::ContentReader* reader) {
    if (reader) {
      Call c{req, res, reader, {}, false};
      Drain(c, kMaxSmallBody);
    }
    std::vector<std::string> allowed;
    for (const Route& r : routes) {
      if (std::regex_match(req.path, r.re)) allowed.push_back(r.info.method);
    }
    if (allowed.empty()) {
      SetError(res, {404,
                     api_errors::kNotFound,
                     "no such route: " + req.path + " (see /api/v1/openapi.json)",
                     {},
                     {}});
    } else {
      res.set_header("Allow", Join(allowed, ", "));
      SetError(res,
               {405,
                api_errors::kMethodNotAllowed,
                req.method + " is not allowed on " + req.path + "; use " + Join(allowed, " or "),
                {},
                {}});
    }
  }

  static Clock::time_point& RequestStart() {
    // One request is handled start to end on one thread of the pool.
    thread_local Clock::time_point start = Clock::now();
    return start;
  }

  ApiError TooLarge() const {
    return {413, api_errors::kPayloadTooLarge,
            "the upload is larger than the " + capsule::FormatBytes(options.max_upload_bytes) +
                " this server accepts (FORGE_CAPSULE_MAX_BYTES): leave large data out of the code "
                "directory (.forgeignore) and read it from the storage root instead"};
  }

  void Run(const Route& route, const httplib::Request& req, httplib::Response& res,
           const httplib::ContentReader* reader) {
    Call c{req, res, reader, {}, false};
    try {
      if (stopping) {
        res.set_header("Retry-After", "5");
        throw ApiError{503, api_errors::kUnavailable, "the server is shutting down", {}, {}};
      }
      if (route.info.auth) c.user = Authenticate(req);
      Dispatch(route.info.id, c);
      return;
    } catch (const ApiError& e) {
      SetError(res, e);
    } catch (const std::exception& e) {
      // The log gets the detail; the client only learns that it was our fault.
      spdlog::error("{} {}: {}", req.method, req.path, e.what());
      SetError(res, {500, api_errors::kInternal, "internal error; the server's log has details"});
    } catch (...) {
      spdlog::error("{} {}: unexpected exception", req.method, req.path);
      SetError(res, {500, api_errors::kInternal, "internal error; the server's log has details"});
    }
    // An unread body would be taken for the next request on this connection.
    if (reader && !c.body_read) Drain(c, kMaxSmallBody);
  }

  // Reads and discards the body (up to `limit` bytes; more → false). When that fails after an
  // answer was chosen, the answer stays (httplib would turn its status into 413/400 under the
  // body already set) and the connection is closed, since the rest of the body is unread.
  bool Drain(Call& c, size_t limit) {
    c.body_read = true;
    if (!HasBody(c.req)) return true;
    const int status = c.res.status;
    const bool ok = DrainBody(c, limit);
    if (!ok && status > 0 && !c.res.body.empty()) {
      c.res.status = status;
      c.res.set_header("Connection", "close");
    }
    return ok;
  }

  bool DrainBody(Call& c, size_t limit) {
    size_t total = 0;
    auto count = [&total, limit](const char*, size_t n) {
      total += n;
      return total <= limit;
    };
    if (c.req.is_multipart_form_data())
      return (*c.reader)([](const httplib::MultipartFormData&) { return true; }, count);
    return (*c.reader)(count);
  }

  // The playground routes (playground_routes.cc), when this server runs playgrounds.
  void Playgrounds(RouteId id, Call& c) {
    if (options.playgrounds == nullptr)
      throw ApiError{404, api_errors::kNotFound, "this server runs no playgrounds"};
    c.body_read = true;  // the handlers read what they need
    try {
      HandlePlaygroundRoute(id, *options.playgrounds, c.user, c.req, c.res, c.reader, stopping);
    } catch (const playground::Error& e) {
      throw ApiError{e.status, e.kind, e.message, e.field, e.errors};
    }
  }

  void Dispatch(RouteId id, Call& c) {
    if (IsPlaygroundRoute(id)) return Playgrounds(id, c);
    switch (id) {
      case RouteId::kCreateJob:
        return CreateJob(c);
      case RouteId::kListJobs:
        return ListJobs(c);
      case RouteId::kGetJob:
        return GetJob(c);
      case RouteId::kCancelJob:
        return CancelJob(c);
      case RouteId::kJobEvents:
        return JobEvents(c);
      case RouteId::kJobLogs:
        return JobLogs(c);
      case RouteId::kJobArtifacts:
        return JobArtifacts(c);
      case RouteId::kJobMetrics:
        return JobMetrics(c);
      case RouteId::kJobCapsule:
        return JobCapsule(c);
      case RouteId::kDoctor:
        return Doctor(c);
      case RouteId::kCapacity:
        return Capacity(c);
      case RouteId::kGetCapsule:
        return GetCapsule(c);
      case RouteId::kCreateUpload:
        return CreateUploadSession(c);
      case RouteId::kPutUpload:
        return PutUpload(c);
      case RouteId::kConsoleLoginCode:
        return ConsoleLoginCode(c);
      case RouteId::kConsoleLogin:
        return ConsoleLogin(c);
      case RouteId::kWhoami:
        return SetJson(c.res, 200, {{"user", c.user.name}, {"admin", c.user.admin}});
      case RouteId::kListTokens:
        return ListTokens(c);
      case RouteId::kCreateToken:
        return CreateToken(c);
      case RouteId::kRevokeToken:
        return RevokeToken(c);
      case RouteId::kOpenApi:
        c.res.set_content(std::string(OpenApiDocument()), kJson);
        return;
      case RouteId::kHealthz:
        c.res.set_content("ok\n", "text/plain; charset=utf-8");
        return;
      case RouteId::kReadyz:
        return Readyz(c);
      case RouteId::kMetrics:
        return Metrics(c);
      default:
        return;
    }
  }

  store::User Authenticate(const httplib::Request& req) {
    const std::string header = req.get_header_value("Authorization");
    if (header.empty())
      throw ApiError{401,
                     api_errors::kUnauthorized,
                     "missing bearer token: send \"Authorization: Bearer <token>\" (forge login, "
                     "or FORGE_TOKEN)",
                     {},
                     {}};
    constexpr std::string_view kScheme = "bearer ";
    std::string token;
    if (header.size() > kScheme.size() &&
        strncasecmp(header.c_str(), kScheme.data(), kScheme.size()) == 0) {
      token = header.substr(kScheme.size());
      while (!token.empty() && token.front() == ' ')
        token.erase(0, 1);
      while (!token.empty() && token.back() == ' ')
        token.pop_back();
    }
    if (token.empty())
      throw ApiError{401,
                     api_errors::kUnauthorized,
                     "the Authorization header must be \"Bearer <token>\"",
                     {},
                     {}};
    auto user = store.Authenticate(token);
    if (!user)
      throw ApiError{401,
                     api_errors::kUnauthorized,
                     "the token is not valid: check FORGE_TOKEN or run forge login again, or ask "
                     "an admin for a new one (forge token create)",
                     {},
                     {}};
    return *user;
  }

  // The job if it exists and `user` may see it; another user's job is as missing as a job
  // that does not exist, so ids of others' jobs cannot be probed.
  store::Job VisibleJob(const Call& c, const std::string& id) {
    auto job = store.GetJob(id);
    if (!job || (!c.user.admin && job->owner != c.user.name))
      throw ApiError{404, api_errors::kNotFound, "job " + id + " not found", {}, {}};
    return *job;
  }

  static std::string Param(const Call& c, const char* name) {
    return c.req.has_param(name) ? c.req.get_param_value(name) : std::string();
  }

  static void OnlyParams(const Call& c, std::initializer_list<const char*> known) {
    for (const auto& [k, v] : c.req.params) {
      bool ok = false;
      for (const char* n : known)
        ok = ok || k == n;
      if (!ok) {
        std::vector<std::string> names(known.begin(), known.end());
        throw BadRequest("unknown query parameter \"" + k + "\"" +
                             (names.empty() ? std::string("; this route takes none")
                                            : "; known: " + Join(names, ", ")),
                         k);
      }
    }
  }

  // ------------------------------------------------------------------------------------------
  // POST /api/v1/jobs

  struct Upload {
    std::string spec;
    bool has_spec = false;
    fs::path code;  // the code or capsule part, in a temporary file under uploads/
    int code_fd = -1;
    int64_t code_bytes = 0;     // received
    int64_t code_written = 0;   // written to the file (the rest waits in `pending`)
    int64_t code_synced = 0;    // bytes whose writeback has been started
    std::vector<char> pending;  // received, not yet written: the file is written in big pieces
    // A "capsule" part is checked while it arrives (capsule/stream_check.h).
    std::unique_ptr<capsule::StreamCheck> stream;
    bool has_code = false;
    bool code_is_capsule = false;  // a "capsule" part (built by the client), not a "code" zip
    std::string expect_sha;   // PUT /api/v1/uploads/{id}?sha256=: the capsule's digest must be this
    std::string capsule_ref;  // a "capsuleSha256" part: a capsule the server already has
    bool has_ref = false;
    std::string error;  // a malformed request, found while reading
    bool too_large = false;
    DiskBudget::Reservation space;  // disk space held for this upload and its check

    Upload() = default;
    Upload(const Upload&) = delete;
    Upload& operator=(const Upload&) = delete;
    ~Upload() {
      if (code_fd >= 0) ::close(code_fd);
    }
  };

  // Holds `bytes` of the disk for this request (disk_budget.h), or refuses it: 503 while
  // other uploads hold the space, 507 when the disk is too full for it even alone. Either is the
  // server's condition, never the user's code.
  void ReserveSpace(Call& c, DiskBudget::Reservation& r, int64_t bytes) {
    const DiskBudget::Refusal refusal = upload_budget->Reserve(r, bytes);
    if (refusal == DiskBudget::Refusal::kNone) return;
    // The rest of the body is not wanted: the connection closes after the answer.
    c.body_read = true;
    c.res.set_header("Connection", "close");
    switch (refusal) {
      case DiskBudget::Refusal::kNone:
        return;
      case DiskBudget::Refusal::kBusy:
        c.res.set_header("Retry-After", "30");
        throw ApiError{503, api_errors::kUnavailable,
                       "the server's free disk space is held by other uploads in progress; retry "
                       "in a little while (this is not a problem with your code)"};
      case DiskBudget::Refusal::kFull:
        c.res.set_header("Retry-After", "300");
        throw ApiError{507, api_errors::kInsufficientStorage,
                       "the server has too little free disk space for an upload of up to " +
                           capsule::FormatBytes(static_cast<uint64_t>(bytes)) +
                           "; this is not a problem with your code: tell the server's operator"};
    }
  }

  static constexpr int64_t kWritebackChunk = 8 << 20;
  // httplib hands the body over in pieces of a few KiB: written a MiB at a time instead (a
  // 600 MiB capsule in 600 writes, not 150 000).
  static constexpr size_t kWritePiece = 1 << 20;

  // Writes what the code part has in `pending` to its file, tells the stream check and starts
  // writing it to disk every kWritebackChunk.
  void FlushCode(Upload& up) {
    if (up.pending.empty()) return;
    for (size_t done = 0; done < up.pending.size();) {
      const ssize_t w = ::write(up.code_fd, up.pending.data() + done, up.pending.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        ServerStorageFailure("writing " + up.code.string() + ": " + std::strerror(errno), errno);
      done += static_cast<size_t>(w);
    }
    up.code_written += static_cast<int64_t>(up.pending.size());
    if (up.stream) up.stream->Written(up.pending.size());
    up.pending.clear();
    // Start writing it to disk while the rest arrives and while it is checked: the fsync before
    // the job exists then waits for the tail only (a 600 MiB capsule's fsync alone is seconds on
    // a busy disk). A hint: errors surface at that fsync.
    if (up.code_written - up.code_synced >= kWritebackChunk) {
      ::sync_file_range(up.code_fd, up.code_synced, up.code_written - up.code_synced,
                        SYNC_FILE_RANGE_WRITE);
      up.code_synced = up.code_written;
    }
  }

  // Creates uploads/<id>.zip for the code (a "code" zip or a capsule, checked as it arrives).
  void OpenCode(Upload& up, Cleanup& tmp, const std::string& id, bool is_capsule) {
    up.has_code = true;
    up.code_is_capsule = is_capsule;
    const std::string path = (uploads / (id + ".zip")).string();
    // Read too: by the stream check, behind the writes.
    up.code_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (up.code_fd < 0)
      ServerStorageFailure(
          "cannot create a file in " + uploads.string() + ": " + std::strerror(errno), errno);
    up.code = path;
    tmp.Reset(up.code);
    up.pending.reserve(kWritePiece);
    if (up.code_is_capsule) {
      capsule::InspectOptions limits;
      limits.max_total_bytes = static_cast<uint64_t>(options.max_upload_bytes);
      up.stream = std::make_unique<capsule::StreamCheck>(up.code_fd, limits);
    }
  }

  // `n` more bytes of the code: written a MiB at a time; past the limit, counted and dropped
  // (the client still gets its answer).
  void AppendCode(Upload& up, const char* data, size_t n) {
    up.code_bytes += static_cast<int64_t>(n);
    if (up.code_bytes > options.max_upload_bytes) {
      up.too_large = true;
      return;
    }
    up.pending.insert(up.pending.end(), data, data + n);
    if (up.pending.size() >= kWritePiece) FlushCode(up);
  }

  // Streams the multipart body: the JobSpec into memory, the code archive into a temporary
  // file (never the whole upload in memory).
  // The code part goes straight to its final name, uploads/<id>.zip: created while the body
  // arrives, its directory entry is on disk with the file's own fsync, so making it durable
  // costs one flush instead of a second one for a rename (a leftover without a job row is
  // removed at the next start, CleanUploads).
  void ReadUpload(Call& c, Upload& up, Cleanup& tmp, const std::string& id) {
    if (!c.req.is_multipart_form_data() || !HasBody(c.req)) {
      const bool ok = Drain(c, static_cast<size_t>(options.max_upload_bytes + kBodySlack));
      if (!ok) throw TooLarge();
      throw BadRequest(
          "expected a multipart/form-data body with a \"spec\" part (the JobSpec, YAML or JSON) "
          "and a \"code\" part (a zip of the code directory); got Content-Type \"" +
          c.req.get_header_value("Content-Type") + "\"");
    }
    // The upload's bytes are held on the disk before any is written.
    int64_t declared = options.max_upload_bytes + kBodySlack;
    if (auto n = ParseCount(c.req.get_header_value("Content-Length")); n && *n < declared)
      declared = *n;
    ReserveSpace(c, up.space, declared);
    c.body_read = true;
    enum class Part { kNone, kSpec, kCode, kRef, kIgnored } current = Part::kNone;
    int parts = 0;
    int64_t total = 0;
    const int64_t limit = options.max_upload_bytes + kBodySlack;
    const bool ok = (*c.reader)(
        [&](const httplib::MultipartFormData& part) {
          FlushCode(up);
          current = Part::kIgnored;
          if (++parts > kMaxParts) {
            up.error = "too many parts: send one \"spec\" and one \"code\" (or \"capsule\")";
          } else if (part.name == "spec") {
            if (up.has_spec) up.error = "two \"spec\" parts";
            up.has_spec = true;
            current = Part::kSpec;
          } else if (part.name == "capsuleSha256") {
            if (up.has_ref) up.error = "two \"capsuleSha256\" parts";
            up.has_ref = true;
            current = Part::kRef;
          } else if (part.name == "code" || part.name == "capsule") {
            if (up.has_code) {
              up.error = "two \"code\" or \"capsule\" parts: send one";
            } else {
              current = Part::kCode;
              OpenCode(up, tmp, id, part.name == "capsule");
            }
          } else if (up.error.empty()) {
            up.error = "unexpected part \"" + part.name +
                       "\": the parts are \"spec\" (the JobSpec) and one of \"code\" (a zip), "
                       "\"capsule\" (a capsule) or \"capsuleSha256\"";
          }
          return true;
        },
        [&](const char* data, size_t n) {
          total += static_cast<int64_t>(n);
          if (total > limit) {  // only a chunked body gets here: a declared length is checked first
            up.too_large = true;
            return false;
          }
          if (current == Part::kSpec) {
            if (up.spec.size() + n > kMaxSpecBytes)
              up.error = "the JobSpec is larger than " + capsule::FormatBytes(kMaxSpecBytes);
            else
              up.spec.append(data, n);
          } else if (current == Part::kRef) {
            if (up.capsule_ref.size() + n > 128)
              up.error = "\"capsuleSha256\" is not a SHA-256";
            else
              up.capsule_ref.append(data, n);
          } else if (current == Part::kCode) {
            AppendCode(up, data, n);
          }
          return true;
        });
    if (up.too_large || c.res.status == 413) throw TooLarge();
    if (!ok) throw BadRequest("malformed multipart/form-data body");
    FlushCode(up);
    if (!up.error.empty()) throw BadRequest(up.error);
    if (!up.has_spec)
      throw BadRequest(
          "missing the \"spec\" part: send the JobSpec (YAML or JSON) as form field "
          "\"spec\"",
          "spec");
  }

  jobspec::JobSpec ParseSpec(const std::string& text) {
    nlohmann::json doc;
    try {
      doc = ParseYaml(text, jobspec::kJobSpecYamlLimits);
    } catch (const SyntaxError& e) {
      throw BadRequest(std::string("the JobSpec is not valid YAML or JSON: ") + e.what(), "spec");
    }
    jobspec::ParseResult parsed = jobspec::FromJson(doc, config::JobDefaults(options.config));
    if (!parsed.ok()) {
      const std::string first = parsed.errors.front().ToString();
      throw ApiError{422, api_errors::kInvalid,
                     parsed.errors.size() == 1
                         ? "invalid JobSpec: " + first
                         : "invalid JobSpec (" + std::to_string(parsed.errors.size()) +
                               " errors): " + first + "; …",
                     parsed.errors.front().path, parsed.errors};
    }
    return *parsed.spec;
  }

  // Our own disk failed (full, I/O error) while storing or checking an upload: the operator's
  // problem, never the user's archive. The log has the detail; the answer has no server path.
  [[noreturn]] static void ServerStorageFailure(const std::string& detail, int err) {
    spdlog::error("storing an upload: {}", detail);
    if (err == ENOSPC || err == EDQUOT) {
      throw ApiError{507, api_errors::kInsufficientStorage,
                     "the server has no space left to store this upload; this is not a problem "
                     "with your code: tell the server's operator (see its log)"};
    }
    throw ApiError{500, api_errors::kInternal,
                   "the server could not store this upload (an I/O error on its side); tell the "
                   "server's operator (see its log)"};
  }

  // Checks the archive as the controller will unpack it (capsule::CheckZip: every entry inflated
  // and counted, nothing written), so a refusal costs no disk and an accepted upload is unpacked
  // once, by the controller.
  void CheckCode(Upload& up) {
    auto invalid = [](std::string message, FieldErrors errors = {}) {
      return ApiError{422, api_errors::kInvalid, std::move(message), "code", std::move(errors)};
    };
    if (!up.has_code || up.code_bytes == 0)
      throw invalid("no code: pass --code DIR or set code: in the JobSpec");
    capsule::ExtractLimits limits;
    // The unpacked code is bounded like the capsule that will hold it: a bomb is refused before
    // the controller would unpack it.
    limits.max_total_bytes = static_cast<uint64_t>(options.max_upload_bytes);
    capsule::ExtractResult r = capsule::CheckZip(up.code, limits);
    if (r.local_errno != 0) ServerStorageFailure(r.errors.front(), r.local_errno);
    if (!r.ok()) {
      FieldErrors errors;
      for (const auto& e : r.errors)
        errors.push_back({"code", e});
      throw invalid(
          "the code archive was refused: " + r.errors.front() +
              (r.errors.size() > 1 ? " (and " + std::to_string(r.errors.size() - 1) + " more)"
                                   : ""),
          errors);
    }
    if (r.files == 0)
      throw invalid("the code archive holds no files; a capsule needs at least one");
    if (r.reserved)
      throw invalid(
          ".starforge/ in the code archive: that directory is reserved for StarForge's "
          "own files in the capsule; rename it");
  }

  // A capsule the client built: checked like any upload (capsule/accept.h); its JobSpec and
  // runner must be the server's, or a copy with the server's is stored instead.
  capsule::AcceptResult CheckCapsule(Call& c, Upload& up, const jobspec::JobSpec& spec) {
    if (up.code_bytes == 0) throw BadRequest("the capsule is empty", "capsule");
    ReserveSpace(c, up.space, up.code_bytes);  // a copy with the server's JobSpec and runner
    capsule::AcceptOptions accept;
    accept.max_bytes = static_cast<uint64_t>(options.max_upload_bytes);
    accept.scratch_dir = uploads;
    // Checked as it arrived; an archive the stream check does not read itself (not one
    // `forge submit` writes) is inspected now, from the file.
    std::optional<capsule::InspectResult> streamed;
    if (up.stream) streamed = up.stream->Finish();
    if (!up.expect_sha.empty()) {
      // The digest the client named is that of the bytes it sent, before any rebuild below.
      if (!streamed && up.code_bytes <= options.max_upload_bytes) {
        capsule::InspectOptions io;
        io.max_total_bytes = accept.max_bytes;
        streamed = capsule::Inspect(up.code, io);
      }
      if (streamed && streamed->sha256 != up.expect_sha)
        throw ApiError{422, api_errors::kInvalid,
                       "the capsule received has SHA-256 " + streamed->sha256 + ", not the " +
                           up.expect_sha +
                           " the request names (sha256=): it was changed or cut short on the way; "
                           "send it again",
                       "sha256"};
    }
    capsule::AcceptResult r =
        streamed ? capsule::AcceptInspected(up.code, std::move(*streamed), spec, accept)
                 : capsule::AcceptCapsule(up.code, spec, accept);
    if (r.local_errno != 0) ServerStorageFailure(r.errors.front(), r.local_errno);
    if (!r.ok()) {
      FieldErrors errors;
      for (const auto& e : r.errors)
        errors.push_back({"capsule", e});
      throw ApiError{
          422, api_errors::kInvalid,
          "the capsule was refused: " + r.errors.front() +
              (r.errors.size() > 1 ? " (and " + std::to_string(r.errors.size() - 1) + " more)"
                                   : ""),
          "capsule", std::move(errors)};
    }
    return r;
  }

  // The newest job of `user` (any user's for an admin) that got as far as its fleet with capsule
  // `sha`: the object store has that capsule (it is stored before a job moves to Submitting).
  // Not every user's: a digest must not let anyone run someone else's code.
  std::optional<store::Job> JobWithCapsule(const Call& c, const std::string& sha,
                                           const std::string* spec_json) {
    store::JobFilter filter;
    if (!c.user.admin) filter.owner = c.user.name;
    filter.limit = kCapsuleLookback;
    for (auto& j : store.ListJobs(filter)) {
      // Submitting comes right after the capsule is stored; a fleet handle, once it is used.
      const bool stored = j.phase == store::Phase::kSubmitting || !j.fleet_handle.empty();
      if (j.capsule_sha256 == sha && stored && (spec_json == nullptr || j.spec_json == *spec_json))
        return std::move(j);
    }
    return std::nullopt;
  }

  static bool IsSha256(const std::string& s) {
    return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char ch) {
             return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
           });
  }

  // GET /api/v1/capsules/{sha256}: whether a resubmit can name this capsule instead of sending it.
  void GetCapsule(Call& c) {
    OnlyParams(c, {});
    const std::string sha = c.req.matches[1].str();
    if (!IsSha256(sha)) throw BadRequest("not a SHA-256 (64 lower-case hex digits)", "sha256");
    if (!JobWithCapsule(c, sha, nullptr))
      throw ApiError{404, api_errors::kNotFound,
                     "no job of yours ran with capsule " + sha + ": send the capsule itself"};
    SetJson(c.res, 200, {{"sha256", sha}, {"key", capsule::ObjectKey(sha)}});
  }

  std::string CheckCapsuleRef(const Call& c, const std::string& ref, const std::string& spec_json) {
    if (!IsSha256(ref))
      throw BadRequest("\"capsuleSha256\" is not a SHA-256 (64 lower-case hex digits)",
                       "capsuleSha256");
    if (!JobWithCapsule(c, ref, &spec_json)) {
      throw ApiError{409, api_errors::kCapsuleNotFound,
                     "no job of yours ran with capsule " + ref +
                         " and this JobSpec (as this server reads it): send the capsule itself",
                     "capsuleSha256"};
    }
    return ref;
  }

  // `resumeFrom` names earlier jobs of the caller's own, on the same fleet (their directories
  // are on that fleet's storage). Another user's job is answered like one that does not exist,
  // admins included: a job reads only its owner's checkpoints, and ids cannot be probed.
  void CheckResumeFrom(const Call& c, const jobspec::JobSpec& spec) {
    FieldErrors errors;
    for (size_t i = 0; i < spec.resume_from.size(); ++i) {
      const std::string& id = spec.resume_from[i];
      const std::string path = "resumeFrom[" + std::to_string(i) + "]";
      const auto earlier = store.GetJob(id);
      if (!earlier || earlier->owner != c.user.name) {
        errors.push_back({path, "no job " + id +
                                    " of yours: a job can resume only from its own "
                                    "owner's earlier jobs (forge list shows yours)"});
      } else if (earlier->fleet != spec.fleet) {
        errors.push_back({path, "job " + id + " ran on fleet " + earlier->fleet +
                                    ", this one asks for fleet " + spec.fleet +
                                    ": a job reads earlier jobs' directories on its own fleet's "
                                    "storage"});
      }
    }
    if (errors.empty()) return;
    throw ApiError{
        422, api_errors::kInvalid,
        "invalid JobSpec: " + errors.front().ToString() + (errors.size() > 1 ? "; …" : ""),
        errors.front().path, errors};
  }

  // Whether `spec` can run here, for this caller: its fleet is configured, local jobs without a
  // sandbox only for admins, resumeFrom names the caller's jobs on that fleet, the fleet admits
  // it. Throws the answer otherwise.
  void AdmitSpec(const Call& c, const jobspec::JobSpec& spec) {
    auto fleet = fleets.find(spec.fleet);
    if (fleet == fleets.end() || fleet->second == nullptr) {
      std::vector<std::string> kinds;
      for (const auto& [k, f] : fleets)
        if (f) kinds.push_back(k);
      throw ApiError{422,
                     reasons::kRejected,
                     "fleet \"" + spec.fleet + "\" is not available on this server; configured: " +
                         (kinds.empty() ? std::string("none") : Join(kinds, ", ")),
                     "fleet",
                     {}};
    }
    if (spec.fleet == "local" && !options.local_unsandboxed.empty() && !c.user.admin) {
      throw ApiError{403, api_errors::kForbidden,
                     "this server cannot run local jobs in a sandbox (" +
                         options.local_unsandboxed +
                         "), so only admins may submit them: a job would run with the server's "
                         "rights; use `fleet: kuberay`, or ask the operator to install bubblewrap",
                     "fleet"};
    }
    CheckResumeFrom(c, spec);
    fleet::Admission admission = fleet->second->Admit(spec);
    if (!admission.possible)
      throw ApiError{422, reasons::kRejected, admission.message, admission.field, {}};
  }

  void CreateJob(Call& c) {
    Upload up;
    Cleanup tmp;
    const std::string id = store::NewJobId();
    ReadUpload(c, up, tmp, id);
    SubmitUpload(c, up, tmp, id);
  }

  // Creates job `id` from a request read into `up` (POST /api/v1/jobs or PUT
  // /api/v1/uploads/{id}): the JobSpec parsed and admitted, the code checked, the archive made
  // durable, the row created; answers 201 with the job.
  void SubmitUpload(Call& c, Upload& up, Cleanup& tmp, const std::string& id) {
    if (up.code_fd >= 0)  // the tail too, while the upload is checked
      ::sync_file_range(up.code_fd, up.code_synced, 0, SYNC_FILE_RANGE_WRITE);
    jobspec::JobSpec spec = ParseSpec(up.spec);
    // Built once: stored as text, and answered as it is (not parsed back from the text: a 1 MiB
    // JobSpec would cost that parse again).
    nlohmann::json canonical = jobspec::ToCanonicalJson(spec);
    const std::string spec_json = canonical.dump() + "\n";  // = jobspec::ToCanonicalText
    // Code comes one of three ways (docs/capsule.md, "Submitting"): a zip the controller packs
    // into a capsule, a capsule the client built (checked here, stored by the controller), or the
    // digest of a capsule this user's earlier job stored (nothing uploaded).
    std::string capsule_sha;
    size_t capsule_files = 0;
    if (up.has_ref) {
      if (up.has_code)
        throw BadRequest("send either \"capsuleSha256\" or the code, not both", "capsuleSha256");
      capsule_sha = CheckCapsuleRef(c, up.capsule_ref, spec_json);
    } else if (up.code_is_capsule) {
      capsule::AcceptResult accepted = CheckCapsule(c, up, spec);
      capsule_sha = accepted.sha256;
      capsule_files = accepted.user_files;
      if (accepted.rebuilt) {  // stored instead of the upload, which goes
        std::error_code ec;
        fs::remove(up.code, ec);
        ::close(up.code_fd);
        up.code_fd = ::open(accepted.path.c_str(), O_RDONLY | O_CLOEXEC);
        if (up.code_fd < 0)
          ServerStorageFailure("opening " + accepted.path.string() + ": " + std::strerror(errno),
                               errno);
        up.code = accepted.path;
        tmp.Reset(up.code);
      }
    } else {
      CheckCode(up);
    }

    AdmitSpec(c, spec);

    // The archive is durable under its final name before the job row that points to it exists.
    fs::path final_path;
    if (up.has_code) {
      final_path = uploads / (id + ".zip");
      if (::fsync(up.code_fd) != 0)
        throw std::runtime_error("fsync " + up.code.string() + ": " + std::strerror(errno));
      if (up.code != final_path) {  // a capsule rebuilt with the server's JobSpec and runner
        fs::rename(up.code, final_path);
        tmp.Reset(final_path);
      }
      FsyncPath(uploads, O_RDONLY | O_DIRECTORY);
    }

    store::Job job;
    job.id = id;
    job.owner = c.user.name;
    job.name = spec.name;
    job.fleet = spec.fleet;
    job.spec_json = spec_json;
    job.upload_path = final_path.string();
    job.capsule_sha256 = capsule_sha;  // set: the upload (if any) is this capsule, checked
    store::Job created = store.CreateJob(job, "api");
    tmp.Release();  // the controller owns the archive now
    controller.Enqueue(id);
    spdlog::info(
        "job {} ({}) submitted by {} to fleet {}{}", id, spec.name, c.user.name, spec.fleet,
        capsule_sha.empty() ? ""
        : up.has_ref        ? " with the stored capsule " + capsule_sha
                     : fmt::format(" with its capsule {} ({} files)", capsule_sha, capsule_files));
    c.res.set_header("Location", "/api/v1/jobs/" + id);
    nlohmann::json body = JobJson(created);
    body["spec"] = std::move(canonical);
    SetJson(c.res, 201, body);
  }

  // ------------------------------------------------------------------------------------------
  // POST /api/v1/uploads, then PUT /api/v1/uploads/{id}: a job whose capsule is sent as the
  // plain body of a second request (docs/api.md, "Uploading a capsule"). The JobSpec comes first
  // and is checked before any code is sent; the capsule then needs no multipart framing, whose
  // parsing cost as much CPU as a fifth of the check. A session lives in memory only: it holds a
  // JobSpec, no disk, and is gone after kUploadSessionTtl, after its PUT, or with the server.

  struct UploadSession {
    std::string owner;
    std::string spec;
    Clock::time_point expires;
  };
  static constexpr auto kUploadSessionTtl = std::chrono::minutes(15);
  static constexpr size_t kMaxUploadSessionsPerUser = 16;
  static constexpr size_t kMaxUploadSessions = 1024;
  std::mutex sessions_mu;
  std::map<std::string, UploadSession> sessions;

  static std::string NewUploadId() {
    std::array<unsigned char, 16> buf{};
    if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1)
      throw std::runtime_error("the system's random number generator failed (OpenSSL RAND_bytes)");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string id = "u-";
    for (unsigned char b : buf) {
      id += kHex[b >> 4];
      id += kHex[b & 15];
    }
    return id;
  }

  // The media type of the request's Content-Type, lower-case, without parameters.
  static std::string MediaType(const httplib::Request& req) {
    std::string type = req.get_header_value("Content-Type");
    type = type.substr(0, type.find(';'));
    while (!type.empty() && (type.back() == ' ' || type.back() == '\t'))
      type.pop_back();
    for (char& ch : type)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return type;
  }

  void CreateUploadSession(Call& c) {
    OnlyParams(c, {});
    const std::string type = MediaType(c.req);
    if (type != "application/yaml" && type != "application/json" && type != "text/yaml") {
      Drain(c, kMaxSmallBody);
      throw ApiError{415, api_errors::kUnsupportedMediaType,
                     "the body must be the JobSpec, with Content-Type application/yaml or "
                     "application/json; got \"" +
                         c.req.get_header_value("Content-Type") + "\""};
    }
    c.body_read = true;
    const std::optional<std::string> spec = ReadSmallBody(c.req, c.reader, kMaxSpecBytes);
    if (!spec) {
      c.res.set_header("Connection", "close");
      throw ApiError{413, api_errors::kPayloadTooLarge,
                     "the JobSpec is larger than " + capsule::FormatBytes(kMaxSpecBytes)};
    }
    if (spec->empty()) throw BadRequest("the body must be the JobSpec (YAML or JSON); it is empty");
    // Everything but the code is checked now: a bad JobSpec costs no upload.
    const jobspec::JobSpec parsed = ParseSpec(*spec);
    AdmitSpec(c, parsed);
    const std::string id = NewUploadId();
    const auto now = Clock::now();
    {
      std::lock_guard<std::mutex> lock(sessions_mu);
      size_t mine = 0;
      for (auto it = sessions.begin(); it != sessions.end();) {
        if (it->second.expires <= now) {
          it = sessions.erase(it);
          continue;
        }
        mine += it->second.owner == c.user.name;
        ++it;
      }
      if (mine >= kMaxUploadSessionsPerUser || sessions.size() >= kMaxUploadSessions) {
        c.res.set_header("Retry-After", "60");
        throw ApiError{429, api_errors::kTooManyRequests,
                       "too many uploads started and not sent (at most " +
                           std::to_string(kMaxUploadSessionsPerUser) +
                           " per user, each for 15 minutes): send their capsules or wait"};
      }
      sessions[id] = UploadSession{c.user.name, *spec, now + kUploadSessionTtl};
    }
    const std::string url = "/api/v1/uploads/" + id;
    c.res.set_header("Location", url);
    SetJson(c.res, 201,
            {{"id", id},
             {"url", url},
             {"expiresAt",
              FormatRfc3339(
                  NowMs() / 1000 +
                  std::chrono::duration_cast<std::chrono::seconds>(kUploadSessionTtl).count())},
             {"spec", jobspec::ToCanonicalJson(parsed)}});
  }

  void PutUpload(Call& c) {
    OnlyParams(c, {"sha256"});
    const std::string session_id = c.req.matches[1].str();
    const std::string expect = Param(c, "sha256");
    if (c.req.has_param("sha256") && !IsSha256(expect))
      throw BadRequest("sha256: not a SHA-256 (64 lower-case hex digits)", "sha256");
    UploadSession session;
    {
      // Taken whatever happens next: one PUT per session (a failed one starts again with POST).
      std::lock_guard<std::mutex> lock(sessions_mu);
      auto it = sessions.find(session_id);
      const bool found = it != sessions.end() && it->second.owner == c.user.name &&
                         it->second.expires > Clock::now();
      if (found) session = std::move(it->second);
      if (it != sessions.end() && (found || it->second.expires <= Clock::now())) sessions.erase(it);
      if (!found)
        throw ApiError{404, api_errors::kNotFound,
                       "no upload " + session_id +
                           " of yours in progress (each is used once, for 15 minutes, and a "
                           "server restart forgets them): start again with POST /api/v1/uploads"};
    }
    if (MediaType(c.req) != "application/zip") {
      Drain(c, kMaxSmallBody);
      throw ApiError{415, api_errors::kUnsupportedMediaType,
                     "the body must be the capsule, with Content-Type application/zip; got \"" +
                         c.req.get_header_value("Content-Type") + "\"",
                     "capsule"};
    }
    Upload up;
    Cleanup tmp;
    up.spec = std::move(session.spec);
    up.has_spec = true;
    up.expect_sha = expect;
    const std::string id = store::NewJobId();
    ReadCapsuleBody(c, up, tmp, id);
    SubmitUpload(c, up, tmp, id);
  }

  // The body as the capsule, into uploads/<id>.zip, checked as it arrives like a "capsule" part.
  void ReadCapsuleBody(Call& c, Upload& up, Cleanup& tmp, const std::string& id) {
    if (!HasBody(c.req))
      throw BadRequest("the body must be the capsule (application/zip); there is none", "capsule");
    const int64_t limit = options.max_upload_bytes + kBodySlack;
    int64_t declared = limit;  // chunked: the most it may be
    if (auto n = ParseCount(c.req.get_header_value("Content-Length")); n && *n < declared)
      declared = *n;
    ReserveSpace(c, up.space, declared);
    c.body_read = true;
    OpenCode(up, tmp, id, /*is_capsule=*/true);
    const bool ok = (*c.reader)([&](const char* data, size_t n) {
      AppendCode(up, data, n);
      return up.code_bytes <= limit;  // a chunked body past the limit is not read to its end
    });
    if (up.too_large || c.res.status == 413) throw TooLarge();
    if (!ok) throw BadRequest("the capsule's upload was cut short", "capsule");
    FlushCode(up);
  }

  // ------------------------------------------------------------------------------------------
  // The other job routes.

  void ListJobs(Call& c) {
    OnlyParams(c,
               {"phase", "fleet", "name", "owner", "limit", "cursor", "watch", "resourceVersion"});
    if (BoolParam(c, "watch")) return WatchJobs(c);
    if (c.req.has_param("resourceVersion"))
      throw BadRequest("resourceVersion needs watch=1", "resourceVersion");
    // Taken before the query: a change made meanwhile is in the list and sent again by a watch
    // from this resourceVersion (the same state twice, never a change missed).
    const int64_t change = store.LastChange();
    store::JobFilter filter;
    if (auto p = Param(c, "phase"); !p.empty()) {
      filter.phase = store::ParsePhase(p);
      if (!filter.phase)
        throw BadRequest("unknown phase \"" + p + "\"; one of " + PhaseList(), "phase");
    }
    FleetNameOwner(c, filter);
    int limit = kDefaultListLimit;
    if (c.req.has_param("limit")) {
      auto l = ParseCount(Param(c, "limit"));
      if (!l || *l < 1 || *l > kMaxListLimit)
        throw BadRequest("limit must be an integer from 1 to " + std::to_string(kMaxListLimit),
                         "limit");
      limit = static_cast<int>(*l);
    }
    if (auto cur = Param(c, "cursor"); !cur.empty()) {
      auto seq = DecodeCursor(cur);
      if (!seq) throw BadRequest("cursor: not a nextCursor this server returned", "cursor");
      filter.before_seq = *seq;
    }
    filter.limit = limit + 1;  // one more tells whether there is a next page
    std::vector<store::Job> jobs = store.ListJobs(filter);
    nlohmann::json items = nlohmann::json::array();
    for (size_t i = 0; i < jobs.size() && i < static_cast<size_t>(limit); ++i)
      items.push_back(JobJson(jobs[i]));
    nlohmann::json next = nullptr;
    if (jobs.size() > static_cast<size_t>(limit))
      next = EncodeCursor(jobs[static_cast<size_t>(limit) - 1].seq);
    SetJson(c.res, 200,
            {{"items", std::move(items)},
             {"nextCursor", std::move(next)},
             {"resourceVersion", EncodeResourceVersion(epoch, change)}});
  }

  // The fleet, name and owner filters of a list or a watch (store::JobFilter, JobsWatchFilter).
  template <typename Filter>
  static void FleetNameOwner(const Call& c, Filter& filter) {
    if (auto f = Param(c, "fleet"); !f.empty()) filter.fleet = f;
    if (auto n = Param(c, "name"); !n.empty()) filter.name = n;
    // Only an admin may look at others' jobs; everyone else always sees only their own.
    if (!c.user.admin) {
      filter.owner = c.user.name;
    } else if (auto o = Param(c, "owner"); !o.empty()) {
      filter.owner = o;
    }
  }

  static bool BoolParam(const Call& c, const char* name) {
    if (!c.req.has_param(name)) return false;
    const std::string v = Param(c, name);
    if (v == "1" || v == "true" || v.empty()) return true;
    if (v == "0" || v == "false") return false;
    throw BadRequest(std::string(name) + " must be 1 or 0", name);
  }

  // GET /api/v1/jobs?watch=1: the jobs that change, as they change (watch.h, JobsWatch).
  void WatchJobs(Call& c) {
    for (const char* p : {"phase", "limit", "cursor"})
      if (c.req.has_param(p))
        throw BadRequest(std::string(p) +
                             " cannot be watched: a watch sends every change of the jobs that "
                             "match owner, fleet and name; filter the phase of what it sends",
                         p);
    JobsWatchFilter filter;
    FleetNameOwner(c, filter);
    // From the list's resourceVersion (or, on a reconnect, the last event's id); else from now.
    std::string rv = c.req.get_header_value("Last-Event-ID");
    if (rv.empty()) rv = Param(c, "resourceVersion");
    int64_t after = store.LastChange();
    if (!rv.empty()) {
      std::optional<int64_t> n = DecodeResourceVersion(rv, epoch);
      if (!n || !store.ChangesSince(*n))
        throw ApiError{410, api_errors::kExpired,
                       "resourceVersion " + rv +
                           " is too old or from an earlier run of the server: list the jobs "
                           "again and watch from the list's resourceVersion",
                       "resourceVersion"};
      after = *n;
    }
    Stream(c, std::make_shared<JobsWatch>(store, epoch, after, std::move(filter)));
  }

  // Counts one more open stream of the caller in `open` (follows, watches), or refuses with 429
  // and when to retry once they have `max`: "<prefix><N><rest>".
  void TakeStreamSlot(Call& c, std::map<std::string, int>& open, int max, const char* rest,
                      const char* prefix) {
    std::lock_guard<std::mutex> lock(follow_mu);
    int& n = open[c.user.name];
    if (n >= max) {
      c.res.set_header("Retry-After", "5");
      throw ApiError{429, api_errors::kTooManyRequests, prefix + std::to_string(n) + rest};
    }
    ++n;
  }

  void ReleaseStreamSlot(std::map<std::string, int>& open, const std::string& user) {
    std::lock_guard<std::mutex> lock(follow_mu);
    if (--open[user] <= 0) open.erase(user);
  }

  // The end of a stream's turn with nothing (more) to send: a keep-alive comment after
  // sse_keepalive of silence (`last_write`), then a wait of sse_poll, cut short when the server
  // stops. False: end the stream.
  bool IdleTurn(httplib::DataSink& sink, Clock::time_point& last_write) {
    if (Clock::now() - last_write >= options.sse_keepalive) {
      last_write = Clock::now();
      if (!sink.write(kSseKeepAlive.data(), kSseKeepAlive.size())) return false;
    }
    std::unique_lock lock(stop_mu);
    stop_cv.wait_for(lock, options.sse_poll, [this] { return stopping.load(); });
    return !stopping;
  }

  // Whether the Authorization header that opened a stream still authenticates, with admin rights
  // if it had them.
  bool StillAllowed(const std::string& authorization, bool admin) {
    httplib::Request again;
    again.headers.emplace("Authorization", authorization);
    try {
      return Authenticate(again).admin || !admin;
    } catch (const ApiError&) {
      return false;
    }
  }

  // Who opened a stream, checked again as it goes on: a token revoked or expired (or admin rights
  // taken away) while a watch or a log follow is open ends it within sse_keepalive, so
  // revocation takes effect on streams too.
  struct StreamAuth {
    std::string authorization;  // the request's header
    bool admin = false;
    Clock::time_point last_check = Clock::now();
  };
  bool StillAllowed(StreamAuth& a) {
    if (Clock::now() - a.last_check < options.sse_keepalive) return true;
    a.last_check = Clock::now();
    return StillAllowed(a.authorization, a.admin);
  }
  static StreamAuth AuthOf(const Call& c) {
    return {c.req.get_header_value("Authorization"), c.user.admin, Clock::now()};
  }

  // Writes a watch (watch.h) as an SSE stream: Poll() every sse_poll, a keep-alive comment after
  // sse_keepalive of silence, until the watch is done, the client goes or the server stops.
  // Like a log follow it holds a connection (and, with httplib, a thread) while it lasts: a user
  // gets max_watches_per_user of them.
  template <typename Watch>
  void Stream(Call& c, std::shared_ptr<Watch> watch) {
    TakeStreamSlot(c, watches, options.max_watches_per_user,
                   " times already, the most one user may; close a watch (a console tab) and "
                   "retry",
                   "you are watching ");
    struct State {
      std::shared_ptr<Watch> watch;
      StreamAuth auth;
      Clock::time_point last_write = Clock::now();
    };
    auto state = std::make_shared<State>(State{std::move(watch), AuthOf(c)});
    c.res.set_header("Cache-Control", "no-cache");
    c.res.set_header("X-Accel-Buffering", "no");
    // Exactly "text/event-stream": httplib compresses other text types (FollowLog).
    c.res.set_chunked_content_provider(
        "text/event-stream",
        [this, state](size_t, httplib::DataSink& sink) {
          if (stopping) return false;
          if (!sink.is_writable()) return false;  // the client went away
          if (!StillAllowed(state->auth)) return false;
          const std::string chunk = state->watch->Poll();
          if (!chunk.empty()) {
            state->last_write = Clock::now();
            if (!sink.write(chunk.data(), chunk.size())) return false;
          }
          if (state->watch->done()) {
            sink.done();
            return true;
          }
          return IdleTurn(sink, state->last_write);
        },
        [this, user = c.user.name](bool) { ReleaseStreamSlot(watches, user); });
  }

  void GetJob(Call& c) {
    OnlyParams(c, {"watch"});
    store::Job job = VisibleJob(c, c.req.matches[1].str());
    // ?watch=1: this answer, then again whenever the job or its events change (watch.h).
    if (BoolParam(c, "watch")) return Stream(c, std::make_shared<JobWatch>(store, job.id));
    std::vector<store::Transition> timeline = store.ListTransitions(job.id);
    SetJson(c.res, 200, JobJson(job, /*with_spec=*/true, &timeline));
  }

  void CancelJob(Call& c) {
    if (!Drain(c, kMaxSmallBody))
      throw ApiError{413, api_errors::kPayloadTooLarge, "this route takes no body", {}, {}};
    OnlyParams(c, {});
    store::Job job = VisibleJob(c, c.req.matches[1].str());
    if (store::IsTerminal(job.phase)) return SetJson(c.res, 200, JobJson(job));
    std::optional<store::Job> updated;
    bool first = false;
    for (int attempt = 0;; ++attempt) {
      try {
        updated = store.UpdateJob(job.id, [&](store::Job& j) {
          first = !j.cancel_requested;
          if (first) {
            j.cancel_requested = true;
            j.cancel_requested_at = NowMs();
          }
        });
        break;
      } catch (const store::Conflict&) {
        if (attempt == 4) throw;
      }
    }
    if (!updated)
      throw ApiError{404, api_errors::kNotFound, "job " + job.id + " not found", {}, {}};
    if (first) {
      store.RecordEvent(job.id, "Normal", reasons::kCancelRequested,
                        "cancel requested by " + c.user.name, "api");
      spdlog::info("job {}: cancel requested by {}", job.id, c.user.name);
    }
    controller.Enqueue(job.id);
    SetJson(c.res, store::IsTerminal(updated->phase) ? 200 : 202, JobJson(*updated));
  }

  void JobEvents(Call& c) {
    OnlyParams(c, {});
    store::Job job = VisibleJob(c, c.req.matches[1].str());
    nlohmann::json items = nlohmann::json::array();
    for (const auto& e : store.ListEvents(job.id))
      items.push_back(EventJson(e));
    SetJson(c.res, 200, {{"items", std::move(items)}});
  }

  static std::optional<int64_t> CountParam(const Call& c, const char* name) {
    if (!c.req.has_param(name)) return std::nullopt;
    auto v = ParseCount(Param(c, name));
    if (!v) throw BadRequest(std::string(name) + " must be a non-negative integer", name);
    return v;
  }

  void JobLogs(Call& c) {
    OnlyParams(c, {"tail", "follow", "offset", "file"});
    store::Job job = VisibleJob(c, c.req.matches[1].str());
    // ?file= names another file of the job's logs directory (the fleet's archive: ray-job.log,
    // events.json, …; docs/api.md). One plain name: no path can leave the directory.
    std::string name = "driver.log";
    if (c.req.has_param("file")) {
      name = Param(c, "file");
      static const std::regex kFileName("[A-Za-z0-9][A-Za-z0-9._-]{0,99}");
      if (!std::regex_match(name, kFileName))
        throw BadRequest("file must be a file name of the job's logs, such as ray-job.log", "file");
    }
    const fs::path file = options.storage_root / "jobs" / job.id / "logs" / name;
    // A symbolic link is not followed: a job's pods write this directory (on the kuberay
    // fleet's shared volume) and must not make the server read a file of its own.
    std::error_code ec;
    if (name != "driver.log" && !fs::is_regular_file(fs::symlink_status(file, ec)))
      throw ApiError{
          404, api_errors::kNotFound, "job " + job.id + " has no log file " + name, "file", {}};
    // Kubernetes' convention for a caveat on a good answer: a Warning header (code 299).
    if (const std::string w = DriverLogWarning(job); !w.empty() && name == "driver.log")
      c.res.set_header("Warning", "299 - \"" + w + "\"");
    const std::optional<int64_t> tail = CountParam(c, "tail");
    bool follow = false;
    if (c.req.has_param("follow")) {
      const std::string f = Param(c, "follow");
      if (f == "1" || f == "true" || f.empty())
        follow = true;
      else if (f != "0" && f != "false")
        throw BadRequest("follow must be 1 or 0", "follow");
    }
    if (!follow) {
      if (c.req.has_param("offset")) throw BadRequest("offset needs follow=1", "offset");
      return PlainLog(c, file, tail);
    }
    int64_t start = 0;
    if (const std::string last = c.req.get_header_value("Last-Event-ID"); !last.empty()) {
      auto v = ParseCount(last);
      if (!v) throw BadRequest("Last-Event-ID must be a byte offset from an earlier event");
      start = *v;
    } else if (auto off = CountParam(c, "offset")) {
      start = *off;
    } else if (tail) {
      start = TailOffset(file, *tail);
    }
    FollowLog(c, job.id, file, start);
  }

  // The files of the job's logs directory (the runner's driver.log, the fleet's archive), each
  // readable with GET …/logs?file=NAME. Only regular files: the job writes this directory.
  void JobArtifacts(Call& c) {
    OnlyParams(c, {});
    store::Job job = VisibleJob(c, c.req.matches[1].str());
    const fs::path dir = options.storage_root / "jobs" / job.id / "logs";
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
    if (const std::string w = DriverLogWarning(job); !w.empty()) body["warning"] = w;
    SetJson(c.res, 200, body);
  }

  // GET /api/v1/jobs/{id}/metrics[?offset=N]: the scalars the job wrote to <job dir>/metrics.jsonl
  // from byte N on (metrics.h); the console asks again from the answer's offset while it runs.
  // ?follow=1: the same answers as SSE "metrics" events while the job writes, then "end".
  void JobMetrics(Call& c) {
    OnlyParams(c, {"offset", "follow"});
    store::Job job = VisibleJob(c, c.req.matches[1].str());
    int64_t offset = CountParam(c, "offset").value_or(0);
    const fs::path file = options.storage_root / "jobs" / job.id / "metrics.jsonl";
    if (BoolParam(c, "follow")) {
      if (const std::string last = c.req.get_header_value("Last-Event-ID"); !last.empty()) {
        auto v = ParseCount(last);
        if (!v) throw BadRequest("Last-Event-ID must be a byte offset from an earlier event");
        offset = *v;
      }
      return FollowMetrics(c, job.id, file, offset);
    }
    SetJson(c.res, 200, ReadMetrics(file, offset, MetricsFinal(job)));
  }

  // Ended, and its files written: a last line without '\n' is read too, and nothing comes after.
  static bool MetricsFinal(const store::Job& job) {
    return store::IsTerminal(job.phase) &&
           (job.logs_archived || NowMs() - job.finished_at > kArchiveWaitMs);
  }

  // Like a log follow (one of the user's follow streams): the file is read from the last offset
  // every sse_poll, the store once a second; an event only when there is news.
  void FollowMetrics(Call& c, const std::string& job_id, const fs::path& file, int64_t start) {
    struct State {
      int64_t offset;
      StreamAuth auth;
      Clock::time_point last_write = Clock::now();
      Clock::time_point next_job_check = Clock::now();
      bool final = false;
      bool warned = false;
      bool done = false;
    };
    TakeStreamSlot(c, follows, options.max_follows_per_user,
                   " logs or metrics already, the most one user may; close one (or read without "
                   "follow=1) and retry",
                   "you are following ");
    auto state = std::make_shared<State>(State{start, AuthOf(c)});
    c.res.set_header("Cache-Control", "no-cache");
    c.res.set_header("X-Accel-Buffering", "no");
    c.res.set_chunked_content_provider(
        "text/event-stream",
        [this, state, job_id, file](size_t, httplib::DataSink& sink) {
          if (stopping) return false;
          if (state->done) {
            sink.done();
            return true;
          }
          if (!sink.is_writable()) return false;
          if (!StillAllowed(state->auth)) return false;
          if (!state->final && Clock::now() >= state->next_job_check) {
            state->next_job_check = Clock::now() + kFollowJobCheck;
            const std::optional<store::Job> job = store.GetJob(job_id);
            state->final = !job || MetricsFinal(*job);
          }
          const nlohmann::json a = ReadMetrics(file, state->offset, state->final);
          const bool news = !a["series"].empty() || a["skipped"].get<int64_t>() > 0 ||
                            (a.contains("warning") && !state->warned);
          state->warned = state->warned || a.contains("warning");
          state->offset = a["offset"].get<int64_t>();
          std::string out;
          if (news)
            out = "id: " + std::to_string(state->offset) + "\nevent: metrics\ndata: " + a.dump() +
                  "\n\n";
          if (a["complete"].get<bool>()) {
            out += "event: end\ndata: {}\n\n";
            state->done = true;
          }
          if (!out.empty()) {
            state->last_write = Clock::now();
            return sink.write(out.data(), out.size());
          }
          return IdleTurn(sink, state->last_write);
        },
        [this, user = c.user.name](bool) { ReleaseStreamSlot(follows, user); });
  }

  // GET /api/v1/jobs/{id}/capsule: the capsule's size and its manifest's file list, read from the
  // stored capsule (capsule_info.h), for the job page.
  void JobCapsule(Call& c) {
    OnlyParams(c, {});
    store::Job job = VisibleJob(c, c.req.matches[1].str());
    if (job.capsule_sha256.empty())
      throw ApiError{
          404, api_errors::kNotFound,
          "job " + job.id + " has no capsule yet: it is built while the job is Packaging",
          "capsule"};
    std::string error;
    std::optional<CapsuleInfo> info;
    if (options.objects)
      info = LoadCapsuleInfo(*options.objects, options.state_dir / "capsule-manifests",
                             job.capsule_sha256, &error);
    if (!info) {
      spdlog::warn("job {}: reading its capsule's manifest: {}", job.id,
                   options.objects ? error : "this server has no object store");
      throw ApiError{404, api_errors::kNotFound,
                     "the capsule of job " + job.id +
                         " is not stored (yet), or cannot be read; the server's log says why",
                     "capsule"};
    }
    nlohmann::json files = nlohmann::json::array();
    size_t user_files = 0;
    for (const capsule::ManifestEntry& e : info->manifest.files) {
      const bool own = e.path.starts_with(std::string(capsule::kStarforgeDir) + "/");
      user_files += !own;
      files.push_back({{"path", e.path},
                       {"size", e.size},
                       {"sha256", e.sha256},
                       {"executable", e.executable},
                       {"starforge", own}});
    }
    SetJson(c.res, 200,
            {{"sha256", job.capsule_sha256},
             {"key", capsule::ObjectKey(job.capsule_sha256)},
             {"size", info->size},
             {"userFiles", user_files},
             {"files", std::move(files)}});
  }

  // Why a kuberay job's driver.log cannot reach this server ("" when it can): without
  // FORGE_K8S_STORAGE_PVC the pods have no volume shared with the server.
  std::string DriverLogWarning(const store::Job& job) const {
    if (job.fleet != "kuberay" || !options.config.k8s_storage_pvc.empty()) return "";
    return "FORGE_K8S_STORAGE_PVC is not set on this server, so the job's driver.log stays in "
           "its pods; the archive (ray-job.log, submitter.log, events.json) is kept once the "
           "job ends: forge logs ID --ray";
  }

  // Cluster prerequisites (forge doctor). Admins only: it names the cluster's nodes and the
  // server's identity.
  void Doctor(Call& c) {
    OnlyParams(c, {});
    if (!c.user.admin)
      throw ApiError{403, api_errors::kForbidden, "only an admin may run the doctor"};
    if (!options.doctor) {
      throw ApiError{404, api_errors::kNotFound, "this server has no kuberay fleet to check"};
    }
    SetJson(c.res, 200, options.doctor());
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

  void FollowLog(Call& c, const std::string& job_id, const fs::path& file, int64_t start) {
    struct State {
      LogFollower follower;
      StreamAuth auth;
      Clock::time_point last_write = Clock::now();
      Clock::time_point next_job_check = Clock::now();
      bool done = false;
    };
    // Each stream holds a thread for as long as it lasts: a user gets a bounded number.
    TakeStreamSlot(c, follows, options.max_follows_per_user,
                   " logs already, the most one user may; close one (or read without follow=1) "
                   "and retry",
                   "you are following ");
    auto state = std::make_shared<State>(State{LogFollower(file, start), AuthOf(c)});
    c.res.set_header("Cache-Control", "no-cache");
    c.res.set_header("X-Accel-Buffering", "no");
    // Exactly "text/event-stream": httplib compresses other text types, which would hold
    // events back in the compressor.
    c.res.set_chunked_content_provider(
        "text/event-stream",
        [this, state, job_id](size_t, httplib::DataSink& sink) {
          if (stopping) return false;
          if (state->done) {
            sink.done();
            return true;
          }
          if (!sink.is_writable()) return false;  // the client went away
          if (!StillAllowed(state->auth)) return false;
          std::string chunk = state->follower.Poll(false);
          if (!chunk.empty()) {
            state->last_write = Clock::now();
            return sink.write(chunk.data(), chunk.size());
          }
          // The file is polled often, the store once a second: 200 followers must not cost
          // 1,000 queries a second.
          if (Clock::now() >= state->next_job_check) {
            state->next_job_check = Clock::now() + kFollowJobCheck;
            std::optional<store::Job> job = store.GetJob(job_id);
            if (!job || (store::IsTerminal(job->phase) &&
                         (job->logs_archived || NowMs() - job->finished_at > kArchiveWaitMs))) {
              std::string rest = state->follower.Poll(true);
              if (job) rest += SseEndEvent(*job);
              state->done = true;
              if (!rest.empty() && !sink.write(rest.data(), rest.size())) return false;
              sink.done();
              return true;
            }
          }
          return IdleTurn(sink, state->last_write);
        },
        [this, user = c.user.name](bool) { ReleaseStreamSlot(follows, user); });
  }

  // ------------------------------------------------------------------------------------------
  // Tokens (admins only).

  static void RequireAdmin(const Call& c) {
    if (!c.user.admin)
      throw ApiError{403, api_errors::kForbidden, "only an admin may manage tokens"};
  }

  nlohmann::json TokenJson(const store::TokenInfo& t) const {
    const int64_t now = NowMs();
    return {{"id", t.id},
            {"user", t.user},
            {"description", t.description},
            {"createdAt", FormatTime(t.created_at)},
            {"expiresAt", t.expires_at ? TimeOrNull(t.expires_at) : nlohmann::json(nullptr)},
            {"revokedAt", t.revoked_at ? TimeOrNull(t.revoked_at) : nlohmann::json(nullptr)},
            {"active", t.revoked_at == 0 && (t.expires_at == 0 || t.expires_at > now)}};
  }

  void ListTokens(Call& c) {
    OnlyParams(c, {"user"});
    RequireAdmin(c);
    nlohmann::json items = nlohmann::json::array();
    for (const store::TokenInfo& t :
         store.ListTokens(c.req.has_param("user") ? Param(c, "user") : ""))
      items.push_back(TokenJson(t));
    SetJson(c.res, 200, {{"items", std::move(items)}});
  }

  void CreateToken(Call& c) {
    OnlyParams(c, {});
    c.body_read = true;
    const std::optional<std::string> body = ReadSmallBody(c.req, c.reader, kMaxSmallBody);
    if (!body)
      throw ApiError{413, api_errors::kPayloadTooLarge, "a token request is a small JSON object"};
    RequireAdmin(c);
    const nlohmann::json req = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
    if (!req.is_object() || !req.contains("user") || !req["user"].is_string())
      throw BadRequest(
          "expected a JSON object with \"user\" (and optionally \"description\", "
          "\"expiresInSeconds\", \"admin\")");
    const std::string user = req["user"];
    const std::string description = req.value("description", "");
    int64_t expires_at = 0;
    if (req.contains("expiresInSeconds")) {
      const nlohmann::json& e = req["expiresInSeconds"];
      if (!e.is_number_integer() || e.get<int64_t>() < 1 || e.get<int64_t>() > 10LL * 365 * 86400)
        throw BadRequest("expiresInSeconds must be a whole number of seconds from 1 to 10 years",
                         "expiresInSeconds");
      expires_at = NowMs() + e.get<int64_t>() * 1000;
    }
    try {
      store.EnsureUser(user, false);
    } catch (const std::invalid_argument& e) {
      throw BadRequest(std::string("user: ") + e.what(), "user");
    }
    if (req.contains("admin")) {
      if (!req["admin"].is_boolean()) throw BadRequest("admin must be true or false", "admin");
      if (user == c.user.name && !req["admin"].get<bool>())
        throw BadRequest("an admin cannot take away their own admin rights", "admin");
      store.SetAdmin(user, req["admin"].get<bool>());
    }
    const std::string token = store.CreateToken(user, description, expires_at);
    nlohmann::json out;
    for (const store::TokenInfo& t : store.ListTokens(user))
      if (t.id == "tok-" + Sha256Hex(token).substr(0, 12)) out = TokenJson(t);
    out["token"] = token;
    spdlog::info("{} created a token for {} ({})", c.user.name, user, out.value("id", ""));
    SetJson(c.res, 201, out);
  }

  void RevokeToken(Call& c) {
    if (!Drain(c, kMaxSmallBody))
      throw ApiError{413, api_errors::kPayloadTooLarge, "this route takes no body", {}, {}};
    OnlyParams(c, {});
    RequireAdmin(c);
    const std::string id = c.req.matches[1].str();
    const std::optional<store::TokenInfo> t = store.RevokeToken(id);
    if (!t) throw ApiError{404, api_errors::kNotFound, "token " + id + " not found"};
    spdlog::info("{} revoked token {} of {}", c.user.name, id, t->user);
    SetJson(c.res, 200, TokenJson(*t));
  }

  // The web console's one-time login codes (login_codes.h).

  // POST /api/v1/console/login-codes: a code for the caller's own token.
  void ConsoleLoginCode(Call& c) {
    if (!Drain(c, kMaxSmallBody))
      throw ApiError{413, api_errors::kPayloadTooLarge, "this route takes no body", {}, {}};
    OnlyParams(c, {});
    // Authenticate() accepted "Bearer <token>": the token is the header's last word.
    const std::string header = c.req.get_header_value("Authorization");
    const size_t end = header.find_last_not_of(' ');
    const size_t start = header.find_last_of(' ', end) + 1;
    const std::string token = header.substr(start, end + 1 - start);
    const std::string code = login_codes.Issue(token, NowMs());
    SetJson(c.res, 201, {{"code", code}, {"expiresInSeconds", LoginCodes::kLifetimeMs / 1000}});
  }

  // POST /api/v1/console/login {"code"}: the token, once. Unauthenticated by design: the code
  // is the credential.
  void ConsoleLogin(Call& c) {
    c.body_read = true;
    const std::optional<std::string> body = ReadSmallBody(c.req, c.reader, kMaxSmallBody);
    if (!body) throw ApiError{413, api_errors::kPayloadTooLarge, "the body is too large", {}, {}};
    OnlyParams(c, {});
    const nlohmann::json doc = nlohmann::json::parse(*body, nullptr, false);
    if (!doc.is_object() || !doc.contains("code") || !doc["code"].is_string())
      throw BadRequest("expected {\"code\": \"...\"} from forge console --login", "code");
    auto token = login_codes.Redeem(doc["code"].get<std::string>(), NowMs());
    if (!token)
      throw ApiError{401,
                     api_errors::kUnauthorized,
                     "this login link is used up or expired (it works once, for a minute): run "
                     "forge console --login again, or sign in with a token",
                     "code",
                     {}};
    SetJson(c.res, 200, {{"token", *token}});
  }

  // ------------------------------------------------------------------------------------------
  // Capacity, health, metrics.

  void Capacity(Call& c) {
    OnlyParams(c, {"watch", "resourceVersion"});
    if (BoolParam(c, "watch")) {
      // From the answer the client has (its resourceVersion, or on a reconnect the last
      // event's id): an unchanged answer is not sent again.
      std::string rv = c.req.get_header_value("Last-Event-ID");
      if (rv.empty()) rv = Param(c, "resourceVersion");
      return Stream(c, std::make_shared<CapacityWatch>(
                           [this, user = c.user] { return CapacityFor(user, kCapacityWatchEvery); },
                           kCapacityWatchEvery, std::move(rv)));
    }
    if (c.req.has_param("resourceVersion"))
      throw BadRequest("resourceVersion needs watch=1", "resourceVersion");
    nlohmann::json body = CapacityFor(c.user, std::chrono::milliseconds(0));
    body["resourceVersion"] = CapacityResourceVersion(body);
    SetJson(c.res, 200, body);
  }

  // The fleets' capacity, read at most once per `max_age` for all callers: every capacity watch
  // of every user looks each second, and the fleets' answers are the same for all of them.
  nlohmann::json FleetsCapacity(std::chrono::milliseconds max_age) {
    std::lock_guard<std::mutex> lock(capacity_mu);
    if (max_age.count() > 0 && capacity_read.time_since_epoch().count() != 0 &&
        Clock::now() - capacity_read < max_age)
      return capacity_cache;
    nlohmann::json list = nlohmann::json::array();
    for (const auto& [kind, f] : fleets) {
      if (!f) continue;
      try {
        list.push_back(f->Capacity());
      } catch (const std::exception& e) {
        spdlog::error("capacity of fleet {}: {}", kind, e.what());
        list.push_back({{"fleet", kind}, {"error", "capacity unavailable; see the server's log"}});
      }
    }
    capacity_cache = std::move(list);
    capacity_read = Clock::now();
    return capacity_cache;
  }

  // GET /api/v1/capacity as `user` sees it: {"fleets": [...]}. A non-admin sees other users'
  // jobs as counts only (the fleet's totals), and its own jobs by id.
  nlohmann::json CapacityFor(const store::User& user, std::chrono::milliseconds max_age) {
    nlohmann::json list = FleetsCapacity(max_age);
    if (!user.admin) {
      for (nlohmann::json& cap : list) {
        if (!cap.contains("jobs") || !cap["jobs"].is_array()) continue;
        nlohmann::json own = nlohmann::json::array();
        for (const nlohmann::json& j : cap["jobs"]) {
          const std::optional<store::Job> job = store.GetJob(j.value("id", ""));
          if (job && job->owner == user.name) own.push_back(j);
        }
        cap["jobs"] = std::move(own);
      }
    }
    return {{"fleets", std::move(list)}};
  }

  void Readyz(Call& c) {
    try {
      store.CountUsers();  // the database answers
    } catch (const std::exception& e) {
      spdlog::warn("readyz: the store does not answer: {}", e.what());
      c.res.status = 503;
      c.res.set_content("not ready: the database does not answer\n", "text/plain; charset=utf-8");
      return;
    }
    c.res.set_content("ok\n", "text/plain; charset=utf-8");
  }

  void Metrics(Call& c) {
    MetricsSnapshot m;
    m.jobs_by_phase = store.CountByPhase();
    m.transitions = store.CountTransitions();
    const controller::Metrics& cm = controller.metrics();
    m.reconciles = cm.reconciles;
    m.reconcile_errors = cm.reconcile_errors;
    m.fleet_errors = cm.fleet_errors;
    for (size_t i = 0; i < std::size(controller::Metrics::kBuckets); ++i) {
      m.bucket_bounds.push_back(controller::Metrics::kBuckets[i]);
      m.bucket_counts.push_back(cm.latency_buckets[i]);
    }
    m.latency_count = cm.latency_count;
    m.latency_sum_seconds = static_cast<double>(cm.latency_sum_us.load()) / 1e6;
    // The HTTP front and the upload space (front.h, disk_budget.h).
    const FrontStats f = http.Stats();
    std::string text = MetricsText(m);
    for (const auto& [name, help, type, value] :
         std::initializer_list<std::tuple<const char*, const char*, const char*, int64_t>>{
             {"starforge_http_connections", "Connections open now", "gauge", f.open},
             {"starforge_http_connections_parked",
              "Connections waiting for a request, holding no thread", "gauge", f.parked},
             {"starforge_http_streams", "Answers being streamed (log follows)", "gauge", f.streams},
             {"starforge_http_refused_busy_total", "Requests answered 503: too many connections",
              "counter", f.refused_busy},
             {"starforge_http_refused_client_total",
              "Requests answered 429: too many connections from one address", "counter",
              f.refused_client},
             {"starforge_http_head_timeouts_total",
              "Connections closed: the request's head did not arrive in time", "counter",
              f.head_timeouts},
             {"starforge_upload_reserved_bytes", "Disk space held by uploads in progress", "gauge",
              upload_budget->reserved()},
         }) {
      text += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
    }
    c.res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
  }

  // Leftovers of requests that a crash interrupted: partial uploads, check directories, and
  // archives renamed into place whose job row was never written.
  void CleanUploads() {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(uploads, ec)) {
      const std::string name = entry.path().filename().string();
      bool stale = name.starts_with(".upload-") || name.starts_with(".check-");
      if (!stale && name.ends_with(".zip")) stale = !store.GetJob(name.substr(0, name.size() - 4));
      if (stale) {
        spdlog::info("removing an interrupted upload: {}", entry.path().string());
        std::error_code rm;
        fs::remove_all(entry.path(), rm);
      }
    }
  }
};

Server::Server(ServerOptions options, store::Store& store, controller::Controller& controller,
               std::map<std::string, fleet::Fleet*> fleets)
    : impl_(std::make_unique<Impl>(std::move(options), store, controller, std::move(fleets))) {}

Server::~Server() {
  Stop();
}

std::string Server::Start() {
  Impl& s = *impl_;
  auto addr = ParseListen(s.options.listen);
  if (!addr)
    return "cannot listen on \"" + s.options.listen +
           "\": expected HOST:PORT such as 127.0.0.1:8080";
  std::error_code ec;
  fs::create_directories(s.uploads, ec);
  if (ec) return "cannot create " + s.uploads.string() + ": " + ec.message();
  s.CleanUploads();

  s.Register();
  s.http.set_read_timeout(std::chrono::seconds(s.options.read_timeout_s));
  s.http.set_payload_max_length(static_cast<size_t>(s.options.max_upload_bytes + kBodySlack));
  if (std::string err = s.http.Bind(addr->host, addr->port); !err.empty())
    return "cannot listen on " + s.options.listen + ": " + err +
           " (another process may be using the port: choose another with FORGE_LISTEN or --listen)";
  s.http.Start();
  s.started = true;
  return "";
}

int Server::port() const {
  return impl_->http.port();
}

void Server::Stop() {
  Impl& s = *impl_;
  if (!s.started) return;
  s.started = false;
  {
    std::lock_guard lock(s.stop_mu);
    s.stopping = true;
  }
  s.stop_cv.notify_all();
  s.http.Shutdown();
}

}  // namespace starforge::api
