#include "node/sandbox.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace kubesim::node {

using nlohmann::json;

json SandboxSpec::ToJson() const {
  json mounts_json = json::array();
  for (const auto& m : mounts) {
    mounts_json.push_back({{"source", m.source},
                           {"target", m.target},
                           {"type", m.type},
                           {"options", m.options},
                           {"readOnly", m.read_only},
                           {"file", m.file}});
  }
  return {{"argv", argv},
          {"env", env},
          {"cwd", cwd},
          {"root", root},
          {"upper", upper},
          {"work", work},
          {"mounts", mounts_json},
          {"hide", hide},
          {"errorFile", error_file},
          {"nsFile", ns_file},
          {"shmBytes", shm_bytes},
          {"cgroupProcs", cgroup_procs},
          {"netns", netns},
          {"hostname", hostname}};
}

SandboxSpec SandboxSpec::FromJson(const json& j) {
  SandboxSpec s;
  s.argv = j.value("argv", std::vector<std::string>{});
  s.env = j.value("env", std::vector<std::string>{});
  s.cwd = j.value("cwd", "");
  s.root = j.value("root", "");
  s.upper = j.value("upper", "");
  s.work = j.value("work", "");
  for (const auto& m : j.value("mounts", json::array())) {
    SandboxMount sm;
    sm.source = m.value("source", "");
    sm.target = m.value("target", "");
    sm.type = m.value("type", "bind");
    sm.options = m.value("options", "");
    sm.read_only = m.value("readOnly", false);
    sm.file = m.value("file", false);
    s.mounts.push_back(sm);
  }
  s.hide = j.value("hide", std::vector<std::string>{});
  s.error_file = j.value("errorFile", "");
  s.ns_file = j.value("nsFile", "");
  s.shm_bytes = j.value("shmBytes", int64_t{64} << 20);
  s.cgroup_procs = j.value("cgroupProcs", "");
  s.netns = j.value("netns", "");
  s.hostname = j.value("hostname", "");
  return s;
}

std::string DefaultLauncherPath() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "kubesim-sandbox";
  return (self.parent_path() / "kubesim-sandbox").string();
}

namespace {

// Spawns `argv` as a new session with clean signal state; stdout+stderr go to `out_file`.
pid_t Spawn(const std::vector<std::string>& args, const std::string& out_file, bool append) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_file.c_str(),
                                   O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // kubesim blocks SIGTERM/SIGINT in every thread and ignores SIGPIPE: a container must start
  // with neither inherited.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig = 1; sig < 32; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaddset(&defaults, sig);
  }
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0].c_str(), &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  }
  return pid;
}

// Waits for `pid` up to `timeout`; kills its process group when it runs over. Returns the wait
// status, or -1 on timeout.
int WaitWithTimeout(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempFile(const std::string& tag) {
  static std::atomic<uint64_t> counter{0};
  return (std::filesystem::temp_directory_path() /
          ("kubesim-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(++counter)))
      .string();
}

}  // namespace

pid_t SpawnContainer(const std::string& launcher, const std::string& spec_file,
                     const std::string& log_file) {
  return Spawn({launcher, "run", spec_file}, log_file, true);
}

int ExecInContainer(const std::string& launcher, pid_t pid, const std::string& spec_file,
                    const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                    std::string* output) {
  std::vector<std::string> args = {launcher, "exec", std::to_string(pid), spec_file, "--"};
  args.insert(args.end(), argv.begin(), argv.end());
  const std::string out = TempFile("probe");
  int status = -1;
  try {
    const pid_t child = Spawn(args, out, false);
    status = WaitWithTimeout(child, timeout);
  } catch (const std::exception& e) {
    if (output != nullptr) *output = e.what();
    return 1;
  }
  if (output != nullptr) *output = Slurp(out);
  std::remove(out.c_str());
  if (status < 0) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string CheckSandboxSupport(const std::string& launcher, const std::string& dir) {
  if (access(launcher.c_str(), X_OK) != 0) {
    return "the sandbox launcher " + launcher + " is missing or not executable";
  }
  const std::string out = TempFile("sandbox-check");
  int status = -1;
  try {
    const pid_t child = Spawn({launcher, "probe", dir}, out, false);
    status = WaitWithTimeout(child, std::chrono::seconds(20));
  } catch (const std::exception& e) {
    return e.what();
  }
  std::string text = Slurp(out);
  std::remove(out.c_str());
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return text.empty() ? "the sandbox check failed" : text;
}

}  // namespace kubesim::node
