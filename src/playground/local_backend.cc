#include "starforge/playground/local_backend.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "starforge/common/atomic_file.h"
#include "starforge/common/quantity.h"
#include "starforge/common/reasons.h"
#include "starforge/fleet/local_process.h"
#include "starforge/kuberay/playground.h"
#include "starforge/net/http.h"

namespace starforge::playground {

namespace fs = std::filesystem;
namespace local = fleet::local;
using nlohmann::json;

namespace {

constexpr const char* kCreateFailed = "PlaygroundCreationFailed";
constexpr const char* kDeleteFailed = "PlaygroundDeletionFailed";
constexpr const char* kServerExited = "ServerExited";
constexpr const char* kServerLost = "ServerLost";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A loopback port nobody listens on now (the kernel's pick). Another process could take it
// before the server binds it: the server then exits and the playground is Failed with its log.
StatusOr<int> FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable("socket: " + local::ErrnoText(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  const bool found = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!found) {
    return Status::Unavailable("cannot find a free loopback port: " + local::ErrnoText(err));
  }
  return static_cast<int>(ntohs(a.sin_port));
}

// The environment the server starts with: the sandbox's (a standard PATH, HOME and TMPDIR =
// /tmp, LANG) with the command's directory first on PATH, the marker that lets us signal its
// group, and of forge serve's own environment only what configures vLLM and the GPUs (VLLM_*,
// HF_*, CUDA_VISIBLE_DEVICES; KUBESIM_VLLM_* for kubesim's emulator).
std::vector<std::string> ServerEnvironment(const fleet::LocalSandbox& sandbox,
                                           const std::string& command, const std::string& marker,
                                           const std::optional<std::vector<int>>& gpu_ids) {
  std::map<std::string, std::string> env = local::SandboxEnvironment(sandbox);
  env["PATH"] = fs::path(command).parent_path().string() + ":" + env["PATH"];
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    if (name.rfind("VLLM_", 0) == 0 || name.rfind("HF_", 0) == 0 ||
        name.rfind("KUBESIM_VLLM_", 0) == 0 || name == "CUDA_VISIBLE_DEVICES") {
      env[name] = entry.substr(eq + 1);
    }
  }
  // The GPUs the local fleet holds for it, as a job gets its own (none: "", no GPU).
  if (gpu_ids) {
    std::string cuda;
    for (int g : *gpu_ids)
      cuda += (cuda.empty() ? "" : ",") + std::to_string(g);
    env["CUDA_VISIBLE_DEVICES"] = cuda;
  }
  std::vector<std::string> out;
  out.reserve(env.size() + 1);
  for (const auto& [k, v] : env)
    out.push_back(k + "=" + v);
  out.push_back(marker);
  return out;
}

std::string Marker(const std::string& id) {
  return "FORGE_PLAYGROUND_ID=" + id;
}

// The local fleet's name for a playground's share of the machine (never a job id).
std::string Holder(const std::string& id) {
  return "playground:" + id;
}

// What a playground takes of the machine's CPUs: its quantity rounded up, at least 1 (as a job).
int64_t Cpus(const Spec& spec) {
  if (spec.cpus) {
    if (auto q = Quantity::Parse(*spec.cpus)) return std::max<int64_t>(1, q->Value());
  }
  return 1;
}

std::vector<int> GpuIds(const json& launch) {
  std::vector<int> ids;
  if (auto it = launch.find("gpus"); it != launch.end() && it->is_array()) {
    for (const json& g : *it)
      if (g.is_number_integer()) ids.push_back(g.get<int>());
  }
  return ids;
}

// What of the filesystem the command needs: its directory and, for <prefix>/bin/<command> (a
// virtualenv or an install prefix), the prefix.
std::vector<fs::path> Installation(const std::string& command) {
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(command, ec);
  std::vector<fs::path> dirs;
  for (const fs::path& exe : {fs::path(command), real}) {
    const fs::path bin = exe.parent_path();
    dirs.push_back(bin.filename() == "bin" ? bin.parent_path() : bin);
  }
  return dirs;
}

}  // namespace

LocalBackend::LocalBackend(LocalBackendOptions options)
    : options_(std::move(options)), http_(std::make_unique<net::Transport>()) {}

LocalBackend::~LocalBackend() = default;

fs::path LocalBackend::Dir(const std::string& id) const {
  return options_.state_dir / "playgrounds" / id;
}

std::string LocalBackend::Command() const {
  std::string path = options_.path;
  if (path.empty()) {
    const char* p = std::getenv("PATH");
    path = p != nullptr ? p : "";
  }
  return local::FindProgram(options_.config.local_vllm_command, path);
}

std::string LocalBackend::NotFoundMessage() const {
  return "the local fleet runs playgrounds with \"" + options_.config.local_vllm_command +
         "\" (FORGE_LOCAL_VLLM_COMMAND), which is not found on forge serve's PATH: install vLLM "
         "on this machine, or set FORGE_LOCAL_VLLM_COMMAND to its path, or start the playground "
         "with fleet kuberay";
}

std::string LocalBackend::Unavailable() const {
  if (Command().empty()) return NotFoundMessage();
  if (!options_.sandbox) {
    return "the local fleet runs playgrounds only in its sandbox, and there is none on this "
           "machine (" +
           options_.sandbox_error + "); start the playground with fleet kuberay";
  }
  return "";
}

fleet::Admission LocalBackend::Admit(const store::Playground& row, const Spec& spec) {
  if (std::string why = Unavailable(); !why.empty()) return {false, why, "fleet"};
  if (options_.machine == nullptr) return {};
  kuberay::PlaygroundRender in;
  in.id = row.id;
  in.machine.name = kuberay::kPlaygroundPool;
  in.machine.gpu_series = spec.series;
  in.machine.gpus_per_machine = spec.gpus;
  in.machine.cpus_per_machine = spec.cpus;
  in.machine.memory_per_machine = spec.memory;
  return AdmitAsJob(*options_.machine, kuberay::PlaygroundAsJobSpec(in));
}

Status LocalBackend::Create(const store::Playground& row, const Spec& spec) {
  const fs::path dir = Dir(row.id);
  const fs::path lock = dir / "server.lock";
  // Started before a restart: running, or ended (Observe says so).
  if (fs::exists(dir / "launch.json")) return Status::Ok();
  const std::string command = Command();
  if (command.empty()) return Status::Permanent(reasons::kRejected, NotFoundMessage());
  if (!options_.sandbox) return Status::Permanent(reasons::kRejected, "no sandbox on this machine");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return Status::Retryable(kCreateFailed, "cannot create " + dir.string() + ": " + ec.message());
  }
  // Its share of the machine first: local jobs must not be started onto its CPUs and GPUs.
  std::optional<std::vector<int>> gpu_ids;
  if (options_.machine != nullptr) {
    gpu_ids.emplace();
    Status held = options_.machine->Hold(Holder(row.id), Cpus(spec), spec.gpus, lock, &*gpu_ids);
    if (!held.ok()) return held;
  }
  // Gives the share back unless the server was started (then its lock ends the share).
  bool started = false;
  struct GiveBack {
    std::function<void()> f;
    ~GiveBack() { f(); }
  } give_back{[&] {
    if (options_.machine == nullptr) return;
    if (started) {
      options_.machine->HoldStarted(Holder(row.id));
    } else {
      options_.machine->Unhold(Holder(row.id));
    }
  }};
  const StatusOr<int> free_port = FreeLoopbackPort();
  if (!free_port.ok()) return Status::Retryable(kCreateFailed, free_port.status().message());
  const int port = *free_port;

  std::string model = spec.model;
  std::vector<fs::path> read_only = Installation(command);
  const StatusOr<ModelLocation> located = Locate(spec.model, options_.config.storage_root);
  if (!located.ok())
    return Status::Permanent(kCreateFailed, "model: " + located.status().message());
  const ModelLocation& loc = *located;
  if (loc.on_storage) {
    // Only the model's directory of the storage root, read-only, at its own path.
    const fs::path m = fs::path(options_.config.storage_root) / loc.relative;
    model = m.string();
    read_only.push_back(m);
  }
  std::vector<std::string> argv = {command,
                                   "serve",
                                   model,
                                   "--host",
                                   "127.0.0.1",
                                   "--port",
                                   std::to_string(port),
                                   "--served-model-name",
                                   spec.served_name};
  bool has_tp = false;
  for (const std::string& a : spec.args)
    has_tp = has_tp || a.rfind("--tensor-parallel-size", 0) == 0 || a == "-tp";
  if (spec.gpus > 1 && !has_tp) {
    argv.insert(argv.end(), {"--tensor-parallel-size", std::to_string(spec.gpus)});
  }
  argv.insert(argv.end(), spec.args.begin(), spec.args.end());

  local::SpawnSpec s;
  s.program = options_.sandbox->bwrap;
  s.argv = local::ServerSandboxArgv(*options_.sandbox, read_only, argv);
  s.env = ServerEnvironment(*options_.sandbox, command, Marker(row.id), gpu_ids);
  s.cwd = dir;
  s.lock = lock;
  s.log = dir / "server.log";
  // Unlike a job's runner, the stop's SIGTERM may end bubblewrap's outer process too (nothing
  // waits for its exit status); ignoring it would also make the server inherit SIG_IGN, and a
  // server without its own handler (the emulator) would then outlive every SIGTERM.
  s.ignore_stop_signals = false;
  const local::SpawnResult r = local::SpawnDetached(s, [&](pid_t pid) -> Status {
    const json launch = {{"pid", pid},
                         {"port", port},
                         {"cpus", Cpus(spec)},
                         {"gpus", gpu_ids.value_or(std::vector<int>{})},
                         {"startTime", local::ProcStartTime(pid).value_or(0)},
                         {"command", argv}};
    return WriteFileAtomic(dir / "launch.json", launch.dump() + "\n");
  });
  started = r.ok || r.lock_held;
  if (r.lock_held) return Status::Ok();  // another pass started it a moment ago
  if (!r.ok) {
    return r.retryable ? Status::Retryable(kCreateFailed, r.error)
                       : Status::Permanent(kCreateFailed, r.error);
  }
  return Status::Ok();
}

void LocalBackend::Readopt() {
  if (options_.machine == nullptr) return;
  std::error_code ec;
  for (const fs::directory_entry& e :
       fs::directory_iterator(options_.state_dir / "playgrounds", ec)) {
    const fs::path lock = e.path() / "server.lock";
    const std::optional<json> launch = local::ReadJson(e.path() / "launch.json");
    if (!launch || !local::LockHeld(lock)) continue;
    options_.machine->Readopt(Holder(e.path().filename().string()),
                              launch->value("cpus", int64_t{1}), GpuIds(*launch), lock);
  }
}

Observation LocalBackend::Observe(const store::Playground& row, const Spec&) {
  Observation o;
  const fs::path dir = Dir(row.id);
  const std::optional<json> launch = local::ReadJson(dir / "launch.json");
  if (!launch) {
    o.state = store::PlaygroundState::kFailed;
    o.reason = kServerLost;
    o.message = "its records (" + (dir / "launch.json").string() + ") are gone";
    return o;
  }
  const StatusOr<local::LockState> lock = local::ProbeLock(dir / "server.lock");
  if (!lock.ok()) {
    o.retryable_error = true;
    o.message = lock.status().message();
    return o;
  }
  if (*lock == local::LockState::kFree) {
    if (options_.machine != nullptr) options_.machine->Unhold(Holder(row.id));
    o.state = store::PlaygroundState::kFailed;
    o.reason = kServerExited;
    std::string tail;
    for (const std::string& line : local::TailLines(dir / "server.log", 3))
      tail += (tail.empty() ? "" : " | ") + line;
    o.message = "the model server exited" + (tail.empty() ? "" : ": " + tail) +
                " (forge playground logs " + row.id + ")";
    return o;
  }
  net::Request req;
  req.url = "http://127.0.0.1:" + std::to_string(launch->value("port", 0)) + "/health";
  req.connect_timeout = std::chrono::milliseconds(1000);
  req.timeout = std::chrono::milliseconds(2000);
  net::Response resp;
  http_->Perform(req, &resp);
  if (resp.status == 200) {
    o.state = store::PlaygroundState::kReady;
    return o;
  }
  o.state = store::PlaygroundState::kPending;
  o.reason = reasons::kRunning;
  o.message = "the model server runs (pid " + std::to_string(launch->value("pid", 0)) +
              ") but does not answer /health yet" +
              (resp.status != 0 ? " (HTTP " + std::to_string(resp.status) + ")" : "");
  return o;
}

Status LocalBackend::Delete(const store::Playground& row) {
  const fs::path dir = Dir(row.id);
  const fs::path lock = dir / "server.lock";
  const std::optional<json> launch = local::ReadJson(dir / "launch.json");
  if (!launch || local::LockFree(lock)) return Status::Ok();
  const pid_t pgid = static_cast<pid_t>(launch->value("pid", 0));
  const std::optional<json> stop = local::ReadJson(dir / "stop.json");
  if (!stop) {
    const Status written =
        WriteFileAtomic(dir / "stop.json", json{{"termAt", NowMs()}}.dump() + "\n");
    if (!written.ok()) return Status::Retryable(kDeleteFailed, written.message());
    local::SignalMarkedGroup(pgid, Marker(row.id), SIGTERM);
  } else if (NowMs() - stop->value("termAt", int64_t{0}) >= options_.stop_grace.count()) {
    local::SignalMarkedGroup(pgid, Marker(row.id), SIGKILL);
  }
  // Most servers are gone within a moment of the signal: wait that long rather than a resync.
  for (int i = 0; i < 40; ++i) {
    if (local::LockFree(lock)) {
      if (options_.machine != nullptr) options_.machine->Unhold(Holder(row.id));
      return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::Retryable(kDeleteFailed, "the model server (process group " +
                                              std::to_string(pgid) + ") is still stopping");
}

ProxyReply LocalBackend::Proxy(const store::Playground& row, const ProxyCall& call,
                               const std::function<bool(std::string_view)>& on_data,
                               const std::atomic<bool>* stop) {
  ProxyReply out;
  const std::optional<json> launch = local::ReadJson(Dir(row.id) / "launch.json");
  if (!launch) {
    out.message = "the model server's records are gone";
    return out;
  }
  net::Request req;
  req.method = call.method;
  req.url = "http://127.0.0.1:" + std::to_string(launch->value("port", 0)) + "/" + call.path;
  if (call.method == "POST") req.body = call.body;
  if (!call.content_type.empty()) req.headers.push_back("Content-Type: " + call.content_type);
  req.connect_timeout = std::chrono::milliseconds(5000);
  req.on_data = on_data;
  req.stop = stop;
  net::Response resp;
  http_->Perform(req, &resp);
  out.status = resp.status;
  auto ct = resp.headers.find("content-type");
  if (ct != resp.headers.end()) out.content_type = ct->second;
  out.body = std::move(resp.body);
  if (resp.status == 0) out.message = "the model server did not answer: " + resp.error;
  return out;
}

Status LocalBackend::Logs(const store::Playground& row, int64_t tail_lines, std::string* out) {
  const fs::path log = Dir(row.id) / "server.log";
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(log, ec))) {
    return Status::Permanent(reasons::kNotFound, "the model server has written no log");
  }
  // The last 4 MiB at most, then the last `tail_lines` lines of that.
  std::ifstream in(log, std::ios::binary);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - (4 << 20));
  in.seekg(from);
  // rdbuf(), not istreambuf_iterator: GCC 12 -O2 sees a null pointer in the iterator's inlined
  // buffer reads (-Wnull-dereference) and the Release build stops.
  std::ostringstream whole;
  whole << in.rdbuf();
  std::string text = whole.str();
  if (tail_lines > 0) {
    size_t pos = text.size();
    if (pos > 0 && text[pos - 1] == '\n') --pos;
    for (int64_t n = 0; n < tail_lines && pos != std::string::npos && pos > 0; ++n)
      pos = text.rfind('\n', pos - 1);
    if (pos != std::string::npos && pos > 0) text = text.substr(pos + 1);
  }
  *out = std::move(text);
  return Status::Ok();
}

}  // namespace starforge::playground
