// The local fleet's sandbox: bubblewrap (https://github.com/containers/bubblewrap, Debian
// package `bubblewrap`) gives every job its own PID, IPC and mount namespaces, so that it sees
// neither the server's processes nor the state directory nor other jobs' directories.
// docs/local-fleet.md ("The sandbox") and docs/security.md say what a job can reach.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <sstream>

#include "local_internal.h"

extern char** environ;

namespace starforge::fleet {

namespace fs = std::filesystem;

namespace local {

namespace {

constexpr const char* kStandardPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// The unprivileged identity of jobs when forge serve runs as root (Debian's nobody/nogroup).
constexpr int kNobody = 65534;

// Read-only system directories a job's programs need (those that exist are mounted).
constexpr const char* kSystemDirs[] = {"/usr",   "/bin",    "/sbin", "/lib", "/lib32",
                                       "/lib64", "/libx32", "/etc",  "/opt"};

bool Under(const fs::path& path, const fs::path& dir) {
  const std::string p = path.string(), d = dir.string();
  return p == d || (p.size() > d.size() && p.compare(0, d.size(), d) == 0 && p[d.size()] == '/');
}

}  // namespace

std::map<std::string, std::string> SandboxEnvironment(const LocalSandbox& sandbox) {
  std::map<std::string, std::string> env;
  const std::string bin = fs::path(sandbox.python).parent_path().string();
  env["PATH"] = (bin.empty() ? "" : bin + ":") + kStandardPath;
  env["HOME"] = "/tmp";
  env["TMPDIR"] = "/tmp";
  env["LANG"] = "C.UTF-8";
  for (const char* name :
       {"FORGE_RUNNER_GRACE_S", "FORGE_RUNNER_HEARTBEAT_S", capsule::kEnvNemoRlDir}) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') env[name] = v;
  }
  return env;
}

namespace {

// The walls every sandboxed process has; `inside` adds its own binds. Ends before the command.
using Parents = std::function<void(const fs::path&)>;
std::vector<std::string> SandboxWalls(
    const LocalSandbox& sandbox,
    const std::function<void(std::vector<std::string>&, const Parents&)>& inside) {
  std::vector<std::string> a = {sandbox.bwrap, "--unshare-pid", "--unshare-ipc"};
  // bubblewrap makes the missing parents of a mount point mode 0700, which an unprivileged uid
  // cannot cross: make them 0755 first (they are empty directories of the sandbox's own root).
  std::set<std::string> made = {"/", "/tmp", "/proc", "/dev"};
  auto parents = [&](const fs::path& target) {
    std::vector<std::string> missing;
    for (fs::path p = target.parent_path(); !made.count(p.string()); p = p.parent_path()) {
      if (p.empty() || p == p.parent_path()) break;
      missing.push_back(p.string());
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      a.insert(a.end(), {"--perms", "0755", "--dir", *it});
      made.insert(*it);
    }
    made.insert(target.string());
  };
  for (const fs::path& dir : sandbox.read_only) {
    parents(dir);
    a.insert(a.end(), {"--ro-bind", dir.string(), dir.string()});
  }
  // /tmp and /dev/shm as on any system (1777): the job's uid may not be root.
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/dev/shm",
                     "--perms", "1777", "--tmpfs", "/tmp"});
  for (const fs::path& dev : sandbox.devices) {
    a.insert(a.end(), {"--dev-bind", dev.string(), dev.string()});
  }
  inside(a, parents);
  if (sandbox.uid >= 0) {
    // bubblewrap run by root keeps root's capabilities: keep only what setpriv needs to drop to
    // the unprivileged uid and to empty the bounding set, and setpriv drops those too (bubblewrap
    // also sets no_new_privs: setuid programs gain nothing).
    a.insert(a.end(),
             {"--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
              "--cap-add", "CAP_SETPCAP", "--", "/usr/bin/setpriv",
              "--reuid=" + std::to_string(sandbox.uid), "--regid=" + std::to_string(sandbox.gid),
              "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"});
  }
  a.push_back("--");
  return a;
}

}  // namespace

std::vector<std::string> SandboxArgv(const LocalSandbox& sandbox, const JobPaths& paths,
                                     const std::vector<std::string>& command,
                                     const std::vector<fs::path>& read_only_jobs) {
  std::vector<std::string> a =
      SandboxWalls(sandbox, [&](std::vector<std::string>& b, const Parents& parents) {
        // Of the storage root only this job's directory; its fleet records stay read-only (the
        // fleet trusts them to signal the right processes).
        parents(paths.job_dir);
        b.insert(b.end(), {"--bind", paths.job_dir.string(), paths.job_dir.string()});
        b.insert(b.end(), {"--ro-bind", paths.fleet_dir.string(), paths.fleet_dir.string()});
        for (const fs::path& dir : read_only_jobs) {  // resumeFrom: earlier jobs, read-only
          parents(dir);
          b.insert(b.end(), {"--ro-bind", dir.string(), dir.string()});
        }
        b.insert(b.end(), {"--chdir", paths.capsule_dir.string()});
      });
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

std::vector<std::string> ServerSandboxArgv(const LocalSandbox& sandbox,
                                           const std::vector<fs::path>& read_only,
                                           const std::vector<std::string>& command) {
  std::vector<std::string> a =
      SandboxWalls(sandbox, [&](std::vector<std::string>& b, const Parents& parents) {
        for (const fs::path& dir : read_only) {
          bool covered = false;
          for (const fs::path& have : sandbox.read_only)
            covered = covered || Under(dir, have);
          if (covered) continue;
          parents(dir);
          b.insert(b.end(), {"--ro-bind", dir.string(), dir.string()});
        }
        b.insert(b.end(), {"--chdir", "/tmp"});
      });
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

int RunCapture(const std::vector<std::string>& argv, const std::vector<std::string>& env,
               std::string* output) {
  std::vector<char*> args, envp;
  for (const std::string& s : argv)
    args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  for (const std::string& s : env)
    envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    if (output != nullptr) *output = ErrnoText(rc);
    return -1;
  }
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (text.size() < 65536) text.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (output != nullptr) *output = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string ChownTree(const fs::path& path, int uid, int gid, bool recursive) {
  if (::lchown(path.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(gid)) != 0)
    return "cannot give " + path.string() + " to uid " + std::to_string(uid) + ": " +
           ErrnoText(errno);
  if (!recursive || !fs::is_directory(fs::symlink_status(path))) return "";
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (::lchown(it->path().c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(gid)) != 0)
      return "cannot give " + it->path().string() + " to uid " + std::to_string(uid) + ": " +
             ErrnoText(errno);
  }
  return ec ? "cannot list " + path.string() + ": " + ec.message() : "";
}

}  // namespace local

SandboxProbe ProbeSandbox(const std::string& python) {
  using local::FindProgram;
  SandboxProbe probe;
  const char* path_env = std::getenv("PATH");
  const std::string path =
      std::string(path_env != nullptr ? path_env : "") + ":" + local::kStandardPath;
  LocalSandbox sb;
  sb.bwrap = FindProgram("bwrap", path);
  if (sb.bwrap.empty()) {
    probe.error = "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)";
    return probe;
  }
  const std::string py = FindProgram(python, path);
  if (py.empty()) {
    probe.error = python + " is not on PATH";
    return probe;
  }
  // The real interpreter and its installation: a shim (pyenv) or a venv would not work inside.
  std::string out;
  const int rc = local::RunCapture(
      {py, "-c",
       "import os, sys; print(os.path.realpath(sys.executable)); print(sys.base_prefix); "
       "print(sys.prefix)"},
      {"PATH=" + path}, &out);
  std::istringstream lines(out);
  std::string exe, base_prefix, prefix;
  std::getline(lines, exe);
  std::getline(lines, base_prefix);
  std::getline(lines, prefix);
  if (rc != 0 || exe.empty() || exe[0] != '/') {
    probe.error = "cannot ask " + py + " where it is installed: " + out;
    return probe;
  }
  sb.python = exe;
  for (const char* dir : local::kSystemDirs) {
    if (fs::exists(dir)) sb.read_only.emplace_back(dir);
  }
  for (const std::string& dir : {base_prefix, prefix, fs::path(exe).parent_path().string()}) {
    if (dir.empty() || dir[0] != '/') continue;
    bool covered = false;
    for (const fs::path& have : sb.read_only)
      covered = covered || local::Under(fs::weakly_canonical(dir), have);
    if (!covered) sb.read_only.emplace_back(fs::weakly_canonical(dir));
  }
  std::error_code dev_ec;
  for (const auto& e : fs::directory_iterator("/dev", dev_ec)) {
    if (e.path().filename().string().rfind("nvidia", 0) == 0) sb.devices.push_back(e.path());
  }
  std::sort(sb.devices.begin(), sb.devices.end());
  if (::geteuid() == 0) {
    if (!fs::exists("/usr/bin/setpriv")) {
      probe.error =
          "forge serve runs as root and /usr/bin/setpriv (util-linux) is missing, so "
          "jobs cannot drop to an unprivileged user";
      return probe;
    }
    sb.uid = sb.gid = local::kNobody;
  }

  // A trial job: its directory written from inside, as the job's user.
  char tmpl[] = "/tmp/starforge-sandbox-probe-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    probe.error = "cannot create a directory in /tmp: " + local::ErrnoText(errno);
    return probe;
  }
  const fs::path root = tmpl;
  const local::JobPaths p = local::PathsFor(root, "probe");
  std::error_code ec;
  fs::create_directories(p.fleet_dir, ec);
  fs::create_directories(p.capsule_dir, ec);
  std::string err;
  if (sb.uid >= 0) {
    ::chmod(tmpl, 0755);
    err = local::ChownTree(p.job_dir, sb.uid, sb.gid, true);
    if (err.empty()) err = local::ChownTree(p.fleet_dir, 0, 0, false);
  }
  if (err.empty()) {
    std::vector<std::string> env;
    for (const auto& [k, v] : local::SandboxEnvironment(sb))
      env.push_back(k + "=" + v);
    const std::string marker = (p.job_dir / "ok").string();
    const int code = local::RunCapture(
        local::SandboxArgv(sb, p, {sb.python, "-c", "open('" + marker + "', 'w').write('ok')"}),
        env, &out);
    if (code != 0 || !fs::exists(marker))
      err = "a trial sandbox failed (exit " + std::to_string(code) + "): " + out;
  }
  fs::remove_all(root, ec);
  if (!err.empty()) {
    while (!err.empty() && (err.back() == '\n' || err.back() == ' '))
      err.pop_back();
    probe.error = err;
    return probe;
  }
  probe.sandbox = std::move(sb);
  return probe;
}

}  // namespace starforge::fleet
