// `forge serve`: the control plane on this machine (store, controller, the local fleet and, when a
// cluster and S3 are configured, the kuberay fleet; REST API);
// `forge token create`: API tokens, by whoever can write the store's file.
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <regex>

#include <fmt/format.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "command.h"
#include "starforge/api/convert.h"
#include "starforge/api/server.h"
#include "starforge/cli/forge.h"
#include "starforge/common/atomic_file.h"
#include "starforge/common/disk_budget.h"
#include "starforge/common/format.h"
#include "starforge/controller/controller.h"
#include "starforge/doctor/doctor.h"
#include "starforge/fleet/kuberay_fleet.h"
#include "starforge/fleet/local_fleet.h"
#include "starforge/kube/client_config.h"
#include "starforge/objstore/object_store.h"
#include "starforge/playground/kube_backend.h"
#include "starforge/playground/local_backend.h"
#include "starforge/playground/manager.h"
#include "starforge/store/store.h"

namespace starforge::cli {

namespace {

namespace fs = std::filesystem;

// sysexits' EX_CONFIG: the configuration cannot work here (not a usage error).
constexpr int kExitConfig = 78;

struct ServeOptions {
  std::string listen;
  std::string port_file;
  int64_t resync_ms = 1000;
  int64_t sync_period_s = 30;
  int workers = 4;
  int cleanup_workers = controller::Options{}.cleanup_workers;
  int64_t cancel_grace_s = 30;
  int64_t sse_keepalive_ms = 15'000;
  int64_t orphan_grace_s = 600;
  bool no_sandbox = false;  // tests: behave as where bubblewrap cannot run
  // The HTTP front's limits (api::ServerOptions, docs/security.md).
  int max_connections = 2048;
  int max_connections_per_client = 256;
  int head_timeout_s = 10;
  int64_t upload_space_bytes = 0;  // tests: the disk space uploads may hold (0: the free space)
};

struct TokenOptions {
  std::string user;
  bool admin = false;
  bool no_admin = false;
  std::string description;
  std::string expires_in;
  std::string id;  // revoke
};

// "90s", "30m", "12h", "30d" or plain seconds → seconds; nullopt when malformed or < 1 s.
std::optional<int64_t> ParseDuration(const std::string& text) {
  static const std::regex kDuration("([0-9]{1,9})([smhd]?)");
  std::smatch m;
  if (!std::regex_match(text, m, kDuration)) return std::nullopt;
  const int64_t n = std::stoll(m[1]);
  const std::string unit = m[2];
  const int64_t scale = unit == "m" ? 60 : unit == "h" ? 3600 : unit == "d" ? 86400 : 1;
  if (n < 1) return std::nullopt;
  return n * scale;
}

std::string TimeText(int64_t unix_ms) {
  return unix_ms == 0 ? "-" : api::FormatTime(unix_ms);
}

// Before FORGE_STATE_DIR the control plane kept its state in <storage root>/control, where jobs
// can write. Moves it to the state directory when that does not exist yet (a rename: same file
// system); otherwise says what to do. False (after printing why) when the server must not start.
bool MigrateControlDir(Context& c, const config::Config& cfg, const fs::path& state) {
  const fs::path old = fs::path(cfg.storage_root) / "control";
  std::error_code ec;
  if (!fs::exists(old / "starforge.db", ec)) return true;
  if (fs::exists(state / "starforge.db", ec)) {
    c.err << "forge: both " << old.string() << " (an earlier StarForge's state, under the storage "
          << "root where jobs can write it) and " << state.string()
          << " hold a store; keep one: move or delete " << old.string() << "\n";
    return false;
  }
  // An old server still running holds control/serve.lock: never move its store under it.
  const fs::path lock = old / "serve.lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (fd >= 0) ::close(fd);
    c.err << "forge: an older forge serve is using " << old.string() << "; stop it first\n";
    return false;
  }
  fs::create_directories(state.parent_path(), ec);
  const bool empty_target = !fs::exists(state) || fs::is_empty(state, ec);
  if (empty_target) fs::remove(state, ec);
  if (!empty_target || ::rename(old.c_str(), state.c_str()) != 0) {
    const std::string why = empty_target ? std::strerror(errno) : "it is not empty";
    ::close(fd);
    c.err << "forge: the control plane's state moved out of the storage root (jobs can write "
          << "there) to FORGE_STATE_DIR=" << state.string() << ", but " << old.string()
          << " cannot be renamed to it (" << why << "); with forge serve stopped, copy it: "
          << "cp -a " << old.string() << "/. " << state.string() << "/ && rm -r " << old.string()
          << "\n";
    return false;
  }
  ::close(fd);
  c.err << "forge: moved the control plane's state from " << old.string() << " to "
        << state.string() << " (FORGE_STATE_DIR; jobs cannot reach it there)\n";
  return true;
}

// Creates `dir` (with `perms` when given) and checks that a file can be written in it; "" or why
// not.
std::string MakeWritableDir(const fs::path& dir, std::optional<fs::perms> perms) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!ec && perms) fs::permissions(dir, *perms, fs::perm_options::replace, ec);
  if (ec) return ec.message();
  const fs::path probe = dir / ".write-test";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

// The control plane's own directory (FORGE_STATE_DIR, mode 0700), after checking that the
// storage root can be written too. Prints the problem and how to fix it and returns "" when
// either cannot be used.
fs::path StateDir(Context& c, const config::Config& cfg) {
  if (std::string why = MakeWritableDir(cfg.storage_root, std::nullopt); !why.empty()) {
    c.err << "forge: the storage root " << cfg.storage_root << " is not writable (" << why
          << "): set FORGE_STORAGE_ROOT to a directory you can write, e.g. "
          << "FORGE_STORAGE_ROOT=$HOME/.local/share/starforge\n";
    return {};
  }
  const fs::path dir = cfg.StateDir();
  if (!MigrateControlDir(c, cfg, dir)) return {};
  if (std::string why = MakeWritableDir(dir, fs::perms::owner_all); !why.empty()) {
    c.err << "forge: the state directory " << dir.string() << " is not writable (" << why
          << "): set FORGE_STATE_DIR to a directory you can write (outside "
          << "FORGE_STORAGE_ROOT)\n";
    return {};
  }
  return dir;
}

std::unique_ptr<store::Store> OpenStore(Context& c, const fs::path& control) {
  try {
    return store::Store::Open(control / "starforge.db");
  } catch (const std::exception& e) {
    c.err << "forge: " << e.what() << "\n";
    return nullptr;
  }
}

// Two servers on one store would both act on the same jobs (submit, archive, delete), so a
// server holds an exclusive lock on <state dir>/serve.lock for its whole life; the kernel drops it
// when the process ends, however it ends. Prints who holds it and returns false when taken.
bool LockControlDir(Context& c, const fs::path& control) {
  const fs::path path = control / "serve.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    c.err << "forge serve: cannot open " << path.string() << ": " << std::strerror(errno) << "\n";
    return false;
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' '))
      holder.pop_back();
    ::close(fd);
    c.err << "forge serve: another forge serve" << (holder.empty() ? "" : " (pid " + holder + ")")
          << " is using the state directory " << control.string()
          << "; stop it first (two servers on one store would act twice on the same jobs), or "
             "set FORGE_STATE_DIR (or FORGE_STORAGE_ROOT) to another directory\n";
    return false;
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The lock holds without the pid; it only makes the message above less helpful.
  }
  return true;  // fd stays open until the process ends: that is the lock
}

// SIGTERM/SIGINT arrive through a pipe, so the main thread can wait for them with read() and
// the handler does nothing but write one byte (async-signal-safe).
int g_signal_pipe[2] = {-1, -1};

extern "C" void OnStopSignal(int) {
  const int saved = errno;
  const char b = 1;
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

bool InstallStopSignals() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) return false;
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  return ::sigaction(SIGTERM, &sa, nullptr) == 0 && ::sigaction(SIGINT, &sa, nullptr) == 0;
}

void WaitForStopSignal() {
  char b;
  while (::read(g_signal_pipe[0], &b, 1) < 0 && errno == EINTR) {
  }
}

// Logs go to stderr (stdout carries only what a script may capture: the admin token, the URL).
void SetUpLogging() {
  auto logger = spdlog::stderr_color_mt("forge");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::flush_on(spdlog::level::info);
}

// glibc raises its mmap threshold to the size of each large block freed (up to 32 MiB), and the
// trim threshold with it: after the first upload's MiB-sized buffers had come and gone, such
// buffers were carved from the arena of the thread that used them and kept there once freed — a
// few MiB in each of up to 8 × cores arenas (API workers, stream checks, informers). A fixed
// threshold keeps the dynamic adjustment off: blocks of 128 KiB and more are mapped and
// returned at free. Measured with bench/kuberay_fleet_scale.sh at N = 20 (docs/kuberay-fleet.md,
// "Scale"): peak RSS 82 → 35 MiB. An operator's own setting (GLIBC_TUNABLES,
// MALLOC_MMAP_THRESHOLD_) wins.
void FixMmapThreshold() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
      (tunables != nullptr && std::strstr(tunables, "mmap_threshold") != nullptr))
    return;
  ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);
}

int Serve(Context& c, const ServeOptions& o) {
  FixMmapThreshold();
  config::Config cfg;
  if (!LoadConfig(c, &cfg)) return kExitUsage;
  // kuberay runs where a cluster and S3 are configured; elsewhere its jobs are refused with what
  // to configure.
  const fleet::KubeRaySetup kuberay_setup = fleet::DetectKubeRay(cfg, kube::ProcessConfigSources());
  if (!kuberay_setup.available && cfg.default_fleet_kind == config::FleetKind::kKuberay) {
    c.err << "forge serve: FORGE_DEFAULT_FLEET_KIND=kuberay, but " << kuberay_setup.message
          << "; or unset FORGE_DEFAULT_FLEET_KIND (or set it to local) to run jobs on this "
             "machine\n";
    return kExitConfig;
  }
  const std::string listen = o.listen.empty() ? cfg.listen : o.listen;
  if (!api::ParseListen(listen)) {
    c.err << "forge serve: --listen/FORGE_LISTEN: expected HOST:PORT such as 127.0.0.1:8080, got \""
          << listen << "\"\n";
    return kExitUsage;
  }
  const fs::path control = StateDir(c, cfg);
  if (control.empty()) return kExitConfig;
  if (!LockControlDir(c, control)) return kExitConfig;
  SetUpLogging();

  std::unique_ptr<store::Store> db = OpenStore(c, control);
  if (!db) return kExitConfig;
  auto objects = objstore::Open(cfg);
  if (!objects) {
    c.err << "forge serve: " << objects.status().message() << "\n";
    return kExitConfig;
  }
  spdlog::info("store {}, objects in {}", (control / "starforge.db").string(),
               objects.value()->Describe());

  fleet::LocalFleetOptions local_options;
  local_options.storage_root = cfg.storage_root;
  local_options.resources = fleet::DetectLocalResources();
  local_options.cancel_grace_ms = o.cancel_grace_s * 1000;
  // Every local job runs in a bubblewrap sandbox; where none can be made, local jobs are for
  // admins only (they would run with this server's rights).
  fleet::SandboxProbe sandbox;
  if (o.no_sandbox)
    sandbox.error = "--no-sandbox";
  else
    sandbox = fleet::ProbeSandbox();
  local_options.sandbox = sandbox.sandbox;
  local_options.unsandboxed_admins_only = !sandbox.sandbox;
  if (sandbox.sandbox) {
    spdlog::info("local fleet: jobs run in a bubblewrap sandbox{}",
                 sandbox.sandbox->uid >= 0 ? " as uid " + std::to_string(sandbox.sandbox->uid)
                                           : std::string());
  } else {
    spdlog::warn(
        "local fleet: no sandbox ({}): only admins may submit local jobs, and they run "
        "with this server's rights",
        sandbox.error);
  }
  fleet::LocalFleet local(local_options, *objects.value());
  spdlog::info("local fleet: {} CPUs, {} GPUs", local_options.resources.cpus,
               local_options.resources.gpus);
  std::map<std::string, fleet::Fleet*> fleets = {{"local", &local}};

  std::unique_ptr<fleet::KubeRayFleet> kuberay;
  std::unique_ptr<fleet::UnavailableFleet> no_kuberay;
  if (kuberay_setup.available) {
    fleet::KubeRayFleetOptions kr;
    kr.config = cfg;
    kr.client = kuberay_setup.client;
    kr.storage_root = cfg.storage_root;
    kr.state_dir = control;
    kr.orphan_grace = std::chrono::seconds(o.orphan_grace_s);
    store::Store* store = db.get();
    kr.job_exists = [store](const std::string& id) { return store->GetJob(id).has_value(); };
    try {
      kuberay = std::make_unique<fleet::KubeRayFleet>(std::move(kr), *objects.value());
    } catch (const std::exception& e) {
      c.err << "forge serve: the kuberay fleet: " << e.what() << "\n";
      return kExitConfig;
    }
    fleets["kuberay"] = kuberay.get();
    spdlog::info("kuberay fleet: API server from {}, namespace {}", kuberay_setup.client.source,
                 cfg.k8s_namespace);
    if (cfg.k8s_storage_pvc.empty()) {
      spdlog::warn(
          "kuberay fleet: FORGE_K8S_STORAGE_PVC is not set: Ray pods get no storage volume, so "
          "jobs' driver.log, checkpoints and outputs never reach this server (forge logs shows "
          "only the archive kept at the end: ray-job.log, submitter.log, events.json); "
          "`forge doctor` checks the whole set-up");
    }
  } else {
    no_kuberay = std::make_unique<fleet::UnavailableFleet>("kuberay", kuberay_setup.message);
    fleets["kuberay"] = no_kuberay.get();
    spdlog::info("kuberay fleet: not available ({})", kuberay_setup.message);
  }

  // One disk budget for the state directory: the API's uploads and the controller's packagings
  // hold their bytes in it (disk_budget.h), so together they cannot fill the disk.
  api::ServerOptions defaults;
  DiskBudget disk_budget(o.upload_space_bytes > 0
                             ? std::function<int64_t()>([n = o.upload_space_bytes] { return n; })
                             : DiskBudget::FreeSpaceOf(control),
                         o.upload_space_bytes > 0 ? 0 : defaults.upload_keep_free_bytes);
  controller::Options ctl_options;
  ctl_options.disk_budget = &disk_budget;
  ctl_options.storage_root = cfg.storage_root;
  ctl_options.state_dir = control;
  ctl_options.resync = std::chrono::milliseconds(o.resync_ms);
  ctl_options.sync_period = std::chrono::seconds(o.sync_period_s);
  ctl_options.workers = o.workers;
  ctl_options.cleanup_workers = o.cleanup_workers;
  ctl_options.capsule_max_bytes = cfg.capsule_max_bytes;
  ctl_options.submit_deadline = std::chrono::seconds(cfg.submit_deadline_s);
  controller::Controller ctl(*db, fleets, *objects.value(), ctl_options);
  local.SetNotify([&ctl](const std::string& id) { ctl.Enqueue(id); });
  // Started once the controller listens to its notifications; stopped before the controller
  // goes (this guard is destroyed first).
  struct StopOnExit {
    fleet::KubeRayFleet* fleet;
    ~StopOnExit() {
      if (fleet != nullptr) fleet->Stop();
    }
  } stop_kuberay{kuberay.get()};
  if (kuberay) kuberay->Start();

  // The first start makes the admin; its token exists in clear only here and in the output.
  std::string admin_token;
  try {
    if (!db->GetUser("admin")) {
      db->EnsureUser("admin", /*admin=*/true);
      admin_token = db->CreateToken("admin", "created by the first start of forge serve");
      spdlog::info("created user admin (its token is printed on standard output, once)");
    }
  } catch (const std::exception& e) {
    c.err << "forge serve: " << e.what() << "\n";
    return kExitConfig;
  }

  api::ServerOptions server_options;
  server_options.listen = listen;
  server_options.storage_root = cfg.storage_root;
  server_options.state_dir = control;
  if (!sandbox.sandbox) server_options.local_unsandboxed = sandbox.error;
  server_options.max_upload_bytes = cfg.capsule_max_bytes;
  server_options.config = cfg;
  server_options.objects = objects.value().get();
  server_options.sse_keepalive = std::chrono::milliseconds(o.sse_keepalive_ms);
  server_options.max_connections = o.max_connections;
  server_options.max_connections_per_client = o.max_connections_per_client;
  server_options.head_timeout_s = o.head_timeout_s;
  server_options.disk_budget = &disk_budget;
  if (kuberay_setup.available) {
    doctor::RunOptions doctor_options;
    doctor_options.config = cfg;
    doctor_options.kube = kuberay_setup.client;
    doctor_options.objects = objects.value().get();
    doctor_options.objects_are_s3 = !cfg.s3_endpoint.empty();
    server_options.doctor = [doctor_options] {
      return doctor::ToJson(doctor::Run(doctor_options));
    };
  }
  // Playgrounds (docs/playground.md): on the kuberay fleet's cluster when there is one.
  std::unique_ptr<playground::Backend> pg_kuberay;
  if (kuberay_setup.available) {
    playground::KubeBackendOptions pk;
    pk.config = cfg;
    pk.client = kuberay_setup.client;
    pk.client_options.max_attempts = 3;  // the reconciler retries at its next pass
    pk.admission = kuberay.get();
    pk.cache = kuberay.get();  // the pod and its events from the fleet's informers
    pg_kuberay = std::make_unique<playground::KubeBackend>(std::move(pk));
  } else {
    pg_kuberay = std::make_unique<playground::UnavailableBackend>("kuberay", kuberay_setup.message);
  }
  // On this machine: FORGE_LOCAL_VLLM_COMMAND in the local jobs' sandbox.
  playground::LocalBackendOptions pl;
  pl.config = cfg;
  pl.state_dir = control;
  pl.sandbox = sandbox.sandbox;
  pl.sandbox_error = sandbox.error;
  pl.machine = &local;
  playground::LocalBackend pg_local(std::move(pl));
  pg_local.Readopt();  // before the controller starts local jobs into its share
  if (pg_local.Command().empty())
    spdlog::info("local playgrounds: refused ({} is not found; FORGE_LOCAL_VLLM_COMMAND)",
                 cfg.local_vllm_command);
  playground::ManagerOptions pg_options;
  pg_options.config = cfg;
  pg_options.storage_root = cfg.storage_root;
  pg_options.resync = std::chrono::milliseconds(o.resync_ms);
  playground::Manager playgrounds(*db, {{"kuberay", pg_kuberay.get()}, {"local", &pg_local}},
                                  pg_options);
  server_options.playgrounds = &playgrounds;
  api::Server server(server_options, *db, ctl, fleets);

  if (!InstallStopSignals()) {
    c.err << "forge serve: cannot install signal handlers: " << std::strerror(errno) << "\n";
    return kExitInvalid;
  }
  ctl.Start();
  playgrounds.Start();
  if (std::string error = server.Start(); !error.empty()) {
    c.err << "forge serve: " << error << "\n";
    playgrounds.Stop();
    ctl.Stop();
    return kExitInvalid;
  }
  const api::ListenAddress addr = *api::ParseListen(listen);
  const std::string host =
      addr.host.find(':') != std::string::npos ? "[" + addr.host + "]" : addr.host;
  const std::string url = "http://" + host + ":" + std::to_string(server.port());
  if (!admin_token.empty())
    c.out << "admin token (shown once, store it now): " << admin_token << "\n";
  c.out << "forge serve: listening on " << url << "\n" << std::flush;
  admin_token.assign(admin_token.size(), '\0');
  spdlog::info("listening on {}", url);
  if (!o.port_file.empty()) {
    const Status written = WriteFileAtomic(o.port_file, std::to_string(server.port()) + "\n");
    if (!written.ok()) spdlog::error("the port file: {}", written.message());
  }

  WaitForStopSignal();
  spdlog::info("stopping: the API first, then the controller (running jobs keep running)");
  server.Stop();
  playgrounds.Stop();
  spdlog::info("playgrounds: {} requests to the Kubernetes API since start",
               playgrounds.ApiRequests());
  ctl.Stop();
  if (kuberay) kuberay->Stop();
  spdlog::info("stopped");
  return kExitOk;
}

// The store of FORGE_STATE_DIR, for the `forge token` commands (a local admin's actions on the
// file, beside a running server). An exit code other than kExitOk when it cannot be opened.
int OpenConfiguredStore(Context& c, std::unique_ptr<store::Store>* db) {
  config::Config cfg;
  if (!LoadConfig(c, &cfg)) return kExitUsage;
  const fs::path control = StateDir(c, cfg);
  if (control.empty()) return kExitConfig;
  *db = OpenStore(c, control);
  return *db ? kExitOk : kExitConfig;
}

int CreateToken(Context& c, const TokenOptions& o) {
  static const std::regex kUserName("[a-z0-9][a-z0-9-]{0,62}");
  if (!std::regex_match(o.user, kUserName)) {
    c.err << "forge token create: --user: expected a user name of a-z, 0-9 and '-' (starting "
             "with a letter or digit, at most 63 characters), got \""
          << o.user << "\"\n";
    return kExitUsage;
  }
  int64_t expires_at = 0;
  if (!o.expires_in.empty()) {
    const std::optional<int64_t> seconds = ParseDuration(o.expires_in);
    if (!seconds) {
      c.err << "forge token create: --expires-in: expected a duration such as 90m, 12h or 30d, "
               "got \""
            << o.expires_in << "\"\n";
      return kExitUsage;
    }
    expires_at = NowMs() + *seconds * 1000;
  }
  if (o.admin && o.no_admin) {
    c.err << "forge token create: --admin and --no-admin contradict each other\n";
    return kExitUsage;
  }
  std::unique_ptr<store::Store> db;
  if (const int code = OpenConfiguredStore(c, &db); code != kExitOk) return code;
  try {
    db->EnsureUser(o.user, o.admin);
    if (o.no_admin) db->SetAdmin(o.user, false);
    c.out << db->CreateToken(o.user, o.description, expires_at) << "\n";
  } catch (const std::exception& e) {
    c.err << "forge token create: " << e.what() << "\n";
    return kExitInvalid;
  }
  return kExitOk;
}

// `forge token list`: every token (or one user's), never the tokens themselves.
int ListTokens(Context& c, const TokenOptions& o) {
  std::unique_ptr<store::Store> db;
  if (const int code = OpenConfiguredStore(c, &db); code != kExitOk) return code;
  const int64_t now = NowMs();
  c.out << "ID                USER                 STATE     CREATED                    "
           "EXPIRES                    DESCRIPTION\n";
  for (const store::TokenInfo& t : db->ListTokens(o.user)) {
    const char* state = t.revoked_at                            ? "revoked"
                        : (t.expires_at && t.expires_at <= now) ? "expired"
                                                                : "active";
    c.out << fmt::format("{:<17} {:<20} {:<9} {:<26} {:<26} {}\n", t.id, t.user, state,
                         TimeText(t.created_at), TimeText(t.expires_at), t.description);
  }
  return kExitOk;
}

// `forge token revoke ID`: refused by the server from the next request on.
int RevokeToken(Context& c, const TokenOptions& o) {
  std::unique_ptr<store::Store> db;
  if (const int code = OpenConfiguredStore(c, &db); code != kExitOk) return code;
  const std::optional<store::TokenInfo> t = db->RevokeToken(o.id);
  if (!t) {
    c.err << "forge token revoke: no token " << o.id << " (see forge token list)\n";
    return kExitInvalid;
  }
  c.out << "revoked " << t->id << " of " << t->user << "\n";
  return kExitOk;
}

}  // namespace

void RegisterServeCommands(Registry& registry) {
  auto serve = std::make_shared<ServeOptions>();
  CLI::App* cmd =
      registry.Add("serve",
                   "Run the control plane: REST API, controller, the local fleet and the kuberay "
                   "fleet when a cluster and S3 are configured (state in FORGE_STATE_DIR)",
                   [serve](Context& c) { return Serve(c, *serve); });
  cmd->add_option("--listen", serve->listen,
                  "HOST:PORT to listen on (default: FORGE_LISTEN); port 0 picks a free port");
  cmd->add_option("--port-file", serve->port_file,
                  "Write the bound port to this file once listening (for scripts and tests)");
  cmd->add_option("--resync-ms", serve->resync_ms,
                  "How often running jobs are looked at again, in ms")
      ->check(CLI::Range(int64_t{10}, int64_t{3'600'000}));
  cmd->add_option("--sync-period-s", serve->sync_period_s,
                  "How often a live job of a watched fleet (kuberay) is looked at when nothing "
                  "about it changed, in s (default 30; a deadline still wakes it in time)")
      ->check(CLI::Range(int64_t{1}, int64_t{86'400}));
  // Steps mostly wait (API server, S3, Ray's dashboard, log reads): more workers than cores keep
  // many jobs ending at once from queueing behind each other's archiving.
  cmd->add_option("--workers", serve->workers,
                  "How many jobs the controller works on at once (default 4)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--cleanup-workers", serve->cleanup_workers,
                  fmt::format("Workers beside --workers that serve only ended jobs' archive "
                              "and release, so that jobs ending together give their machines "
                              "back without waiting behind live jobs (default {})",
                              serve->cleanup_workers))
      ->check(CLI::Range(1, 64));
  cmd->add_option("--cancel-grace-s", serve->cancel_grace_s,
                  "Seconds between SIGTERM and SIGKILL when a local job is cancelled")
      ->check(CLI::Range(int64_t{0}, int64_t{3600}));
  cmd->add_option("--orphan-grace-s", serve->orphan_grace_s,
                  "Age after which a StarForge RayJob whose job is not in the store is deleted")
      ->check(CLI::Range(int64_t{0}, int64_t{30 * 86400}));
  cmd->add_option("--sse-keepalive-ms", serve->sse_keepalive_ms,
                  "Silence after which a log stream gets a keep-alive comment, in ms")
      ->check(CLI::Range(int64_t{10}, int64_t{3'600'000}))
      ->group("");  // for tests
  cmd->add_option("--max-connections", serve->max_connections,
                  "Connections open at once, in all (beyond: 503 + Retry-After; default 2048)")
      ->check(CLI::Range(4, 1'000'000));
  cmd->add_option("--max-connections-per-client", serve->max_connections_per_client,
                  "Connections open at once from one client address (beyond: 429 + "
                  "Retry-After; default 256)")
      ->check(CLI::Range(1, 1'000'000));
  cmd->add_option("--head-timeout-s", serve->head_timeout_s,
                  "Seconds a request's headers may take to arrive (default 10)")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--upload-space-bytes", serve->upload_space_bytes,
                  "Disk space uploads in progress may hold, instead of the free space")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 50))
      ->group("");  // for tests
  cmd->add_flag("--no-sandbox", serve->no_sandbox,
                "Run local jobs without a sandbox, as where bubblewrap cannot run (admins only)")
      ->group("");  // for tests

  auto token = std::make_shared<TokenOptions>();
  CLI::App* tokens =
      registry.app().add_subcommand("token", "API tokens (works on the store file directly)");
  tokens->require_subcommand(1);
  CLI::App* create =
      registry.Add(tokens, "create",
                   "Create an API token for a user (created if missing) and print only the token",
                   [token](Context& c) { return CreateToken(c, *token); });
  create->add_option("--user", token->user, "User name")->required();
  create->add_flag("--admin", token->admin, "The user is an admin (sees every job)");
  create->add_flag("--no-admin", token->no_admin, "Take the user's admin rights away");
  create->add_option("--description", token->description, "What the token is for");
  create->add_option("--expires-in", token->expires_in,
                     "Refuse the token after this long: 90m, 12h, 30d (default: never)");
  auto list_opts = std::make_shared<TokenOptions>();
  CLI::App* list = registry.Add(tokens, "list", "List API tokens (never the tokens themselves)",
                                [list_opts](Context& c) { return ListTokens(c, *list_opts); });
  list->add_option("--user", list_opts->user, "Only this user's tokens");
  auto revoke_opts = std::make_shared<TokenOptions>();
  CLI::App* revoke =
      registry.Add(tokens, "revoke", "Revoke an API token at once (its id from forge token list)",
                   [revoke_opts](Context& c) { return RevokeToken(c, *revoke_opts); });
  revoke->add_option("id", revoke_opts->id, "Token id, e.g. tok-0123456789ab")->required();
}

}  // namespace starforge::cli
