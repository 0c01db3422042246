// `forge serve`: the control plane on this machine (store, controller, the local fleet and, when a
// cluster and S3 are configured, the kuberay fleet; REST API);
// `forge token create`: API tokens, by whoever can write the store's file.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "command.h"
#include "starforge/api/convert.h"
#include "starforge/api/server.h"
#include "starforge/cli/forge.h"
#include "starforge/common/atomic_file.h"
#include "starforge/controller/controller.h"
#include "starforge/fleet/kuberay_fleet.h"
#include "starforge/fleet/local_fleet.h"
#include "starforge/kube/client_config.h"
#include "starforge/objstore/object_store.h"
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
  int workers = 4;
  int64_t cancel_grace_s = 30;
  int64_t sse_keepalive_ms = 15'000;
  int64_t orphan_grace_s = 600;
};

struct TokenOptions {
  std::string user;
  bool admin = false;
  std::string description;
};

// The control plane's own directory under the storage root, created and checked writable.
// Prints the problem and how to fix it and returns "" when it cannot be used.
fs::path ControlDir(Context& c, const config::Config& cfg) {
  const fs::path dir = fs::path(cfg.storage_root) / "control";
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::string why = ec ? ec.message() : "";
  if (why.empty()) {
    const fs::path probe = dir / ".write-test";
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
      why = std::strerror(errno);
    } else {
      ::close(fd);
      ::unlink(probe.c_str());
    }
  }
  if (!why.empty()) {
    c.err << "forge: the storage root " << cfg.storage_root << " is not writable (" << dir.string()
          << ": " << why << "): set FORGE_STORAGE_ROOT to a directory you can write, e.g. "
          << "FORGE_STORAGE_ROOT=$HOME/.local/share/starforge\n";
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
// server holds an exclusive lock on control/serve.lock for its whole life; the kernel drops it
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
          << " is using the storage root " << control.parent_path().string()
          << "; stop it first (two servers on one store would act twice on the same jobs), or "
             "set FORGE_STORAGE_ROOT to another directory\n";
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

int Serve(Context& c, const ServeOptions& o) {
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
  const fs::path control = ControlDir(c, cfg);
  if (control.empty()) return kExitConfig;
  if (!LockControlDir(c, control)) return kExitConfig;
  SetUpLogging();

  std::unique_ptr<store::Store> db = OpenStore(c, control);
  if (!db) return kExitConfig;
  auto objects = objstore::Open(cfg);
  if (!objects) {
    c.err << "forge serve: " << objects.error().message << "\n";
    return kExitConfig;
  }
  spdlog::info("store {}, objects in {}", (control / "starforge.db").string(),
               objects.value()->Describe());

  fleet::LocalFleetOptions local_options;
  local_options.storage_root = cfg.storage_root;
  local_options.resources = fleet::DetectLocalResources();
  local_options.cancel_grace_ms = o.cancel_grace_s * 1000;
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
  } else {
    no_kuberay = std::make_unique<fleet::UnavailableFleet>("kuberay", kuberay_setup.message);
    fleets["kuberay"] = no_kuberay.get();
    spdlog::info("kuberay fleet: not available ({})", kuberay_setup.message);
  }

  controller::Options ctl_options;
  ctl_options.storage_root = cfg.storage_root;
  ctl_options.resync = std::chrono::milliseconds(o.resync_ms);
  ctl_options.workers = o.workers;
  ctl_options.capsule_max_bytes = cfg.capsule_max_bytes;
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
  server_options.max_upload_bytes = cfg.capsule_max_bytes;
  server_options.config = cfg;
  server_options.sse_keepalive = std::chrono::milliseconds(o.sse_keepalive_ms);
  api::Server server(server_options, *db, ctl, fleets);

  if (!InstallStopSignals()) {
    c.err << "forge serve: cannot install signal handlers: " << std::strerror(errno) << "\n";
    return kExitInvalid;
  }
  ctl.Start();
  if (std::string error = server.Start(); !error.empty()) {
    c.err << "forge serve: " << error << "\n";
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
    const std::string error = WriteFileAtomic(o.port_file, std::to_string(server.port()) + "\n");
    if (!error.empty()) spdlog::error("the port file: {}", error);
  }

  WaitForStopSignal();
  spdlog::info("stopping: the API first, then the controller (running jobs keep running)");
  server.Stop();
  ctl.Stop();
  if (kuberay) kuberay->Stop();
  spdlog::info("stopped");
  return kExitOk;
}

int CreateToken(Context& c, const TokenOptions& o) {
  static const std::regex kUserName("[a-z0-9][a-z0-9-]{0,62}");
  if (!std::regex_match(o.user, kUserName)) {
    c.err << "forge token create: --user: expected a user name of a-z, 0-9 and '-' (starting "
             "with a letter or digit, at most 63 characters), got \""
          << o.user << "\"\n";
    return kExitUsage;
  }
  config::Config cfg;
  if (!LoadConfig(c, &cfg)) return kExitUsage;
  const fs::path control = ControlDir(c, cfg);
  if (control.empty()) return kExitConfig;
  std::unique_ptr<store::Store> db = OpenStore(c, control);
  if (!db) return kExitConfig;
  try {
    db->EnsureUser(o.user, o.admin);
    c.out << db->CreateToken(o.user, o.description) << "\n";
  } catch (const std::exception& e) {
    c.err << "forge token create: " << e.what() << "\n";
    return kExitInvalid;
  }
  return kExitOk;
}

}  // namespace

void RegisterServeCommands(Registry& registry) {
  auto serve = std::make_shared<ServeOptions>();
  CLI::App* cmd =
      registry.Add("serve",
                   "Run the control plane: REST API, controller, the local fleet and the kuberay "
                   "fleet when a cluster and S3 are configured (state under FORGE_STORAGE_ROOT)",
                   [serve](Context& c) { return Serve(c, *serve); });
  cmd->add_option("--listen", serve->listen,
                  "HOST:PORT to listen on (default: FORGE_LISTEN); port 0 picks a free port");
  cmd->add_option("--port-file", serve->port_file,
                  "Write the bound port to this file once listening (for scripts and tests)");
  cmd->add_option("--resync-ms", serve->resync_ms,
                  "How often running jobs are looked at again, in ms")
      ->check(CLI::Range(int64_t{10}, int64_t{3'600'000}));
  // Steps mostly wait (API server, S3, Ray's dashboard, log reads): more workers than cores keep
  // many jobs ending at once from queueing behind each other's archiving.
  cmd->add_option("--workers", serve->workers,
                  "How many jobs the controller works on at once (default 4)")
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
  create->add_option("--description", token->description, "What the token is for");
}

}  // namespace starforge::cli
