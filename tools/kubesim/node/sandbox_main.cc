// kubesim-sandbox: the launcher that turns a SandboxSpec into a running container process
// (sandbox.h). It is single-threaded and short-lived: it sets up the mount namespace and execs.
//
//   kubesim-sandbox run SPEC               set up the container and exec its command
//   kubesim-sandbox exec PID SPEC -- ARGV  run ARGV in the mount namespace of container PID
//   kubesim-sandbox probe DIR              check that sandboxes can be made here (exit 0 = yes)
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "node/sandbox.h"

namespace kubesim::node {

namespace {

std::string Errno() {
  return std::strerror(errno);
}

void WriteFile(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// mkdir -p; returns false with errno set.
bool MakeDirs(const std::string& path, mode_t mode = 0755) {
  if (path.empty()) return true;
  std::string cur;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    cur = path.substr(0, next);
    pos = next + 1;
    if (cur.empty()) continue;
    if (mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) return false;
  }
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? true : (errno = ENOTDIR, false);
}

// `path` (absolute, inside the container) with the symlinks of its existing components resolved
// inside `root`, as runc resolves a mount destination (securejoin): /var/run/secrets/… is
// /run/secrets/… on Debian, and a mount point made through the link without this would be
// created, and mounted, on the HOST's /run (symlinks resolve against the process's root, and we
// have not pivoted yet), leaving the container's own path empty.
std::string InRoot(const std::string& root, const std::string& path) {
  std::vector<std::string> todo;  // components still to walk, last first
  auto push_path = [&](const std::string& p) {
    std::vector<std::string> parts;
    size_t pos = 0;
    while (pos <= p.size()) {
      size_t next = p.find('/', pos);
      if (next == std::string::npos) next = p.size();
      if (next > pos) parts.push_back(p.substr(pos, next - pos));
      pos = next + 1;
    }
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  push_path(path);
  std::vector<std::string> done;
  int hops = 0;
  while (!todo.empty()) {
    std::string comp = todo.back();
    todo.pop_back();
    if (comp == ".") continue;
    if (comp == "..") {
      if (!done.empty()) done.pop_back();
      continue;
    }
    std::string cur;
    for (const auto& d : done)
      cur += "/" + d;
    cur += "/" + comp;
    struct stat st {};
    char buf[4096];
    ssize_t n = -1;
    if (hops < 40 && lstat((root + cur).c_str(), &st) == 0 && S_ISLNK(st.st_mode) &&
        (n = readlink((root + cur).c_str(), buf, sizeof buf - 1)) > 0) {
      ++hops;
      const std::string link(buf, static_cast<size_t>(n));
      if (link[0] == '/') done.clear();
      push_path(link);
      continue;
    }
    done.push_back(comp);
  }
  std::string out;
  for (const auto& d : done)
    out += "/" + d;
  return out.empty() ? "/" : out;
}

bool MakeFile(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0 && !MakeDirs(path.substr(0, slash))) return false;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  close(fd);
  return true;
}

void CloseExtraFds() {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
#endif
  for (int fd = 3; fd < 65536; ++fd)
    close(fd);
}

// Octal escapes of /proc/self/mountinfo (\040 for a space).
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string oct = s.substr(i + 1, 3);
      if (oct.size() == 3 && oct.find_first_not_of("01234567") == std::string::npos) {
        out += static_cast<char>(std::stoi(oct, nullptr, 8));
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

bool Under(const std::string& path, const std::string& prefix) {
  if (prefix.empty()) return false;
  if (path == prefix) return true;
  std::string p = prefix;
  if (p.back() != '/') p += '/';
  return path.rfind(p, 0) == 0;
}

// The host's top-level mounts other than "/" (those whose parent is the root mount), in order.
std::vector<std::string> TopLevelMounts() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  struct Entry {
    std::string id, parent, point;
  };
  std::vector<Entry> entries;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    Entry e;
    std::string devs, root;
    ss >> e.id >> e.parent >> devs >> root >> e.point;
    e.point = Unescape(e.point);
    entries.push_back(e);
  }
  std::string root_id;
  for (const auto& e : entries) {
    if (e.point == "/") root_id = e.id;  // the last one mounted on "/" is the visible root
  }
  std::vector<std::string> out;
  for (const auto& e : entries) {
    if (e.parent == root_id && e.point != "/") out.push_back(e.point);
  }
  return out;
}

std::string LookPath(const std::string& file, const std::vector<std::string>& env,
                     std::string* why) {
  if (file.find('/') != std::string::npos) {
    struct stat st {};
    if (stat(file.c_str(), &st) != 0) {
      *why = "stat " + file + ": " + Errno();
      return "";
    }
    return file;
  }
  std::string path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (const auto& kv : env) {
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
  }
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t colon = path.find(':', pos);
    if (colon == std::string::npos) colon = path.size();
    std::string dir = path.substr(pos, colon - pos);
    pos = colon + 1;
    if (dir.empty()) dir = ".";
    const std::string cand = dir + "/" + file;
    struct stat st {};
    if (stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(cand.c_str(), X_OK) == 0) {
      return cand;
    }
  }
  *why = "executable file not found in $PATH";
  return "";
}

// The start-error file, opened before the pivot (afterwards its path is the container's).
int g_error_fd = -1;

void ReportError(const std::string& text) {
  if (g_error_fd < 0) return;
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = write(g_error_fd, text.data() + off, text.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
}

[[noreturn]] void Exec(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  if (argv.empty()) {
    ReportError("no command to run");
    std::_Exit(kStartErrorExit);
  }
  std::string why;
  const std::string path = LookPath(argv[0], env, &why);
  if (!path.empty()) {
    std::vector<char*> a;
    for (const auto& s : argv)
      a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    std::vector<char*> e;
    for (const auto& s : env)
      e.push_back(const_cast<char*>(s.c_str()));
    e.push_back(nullptr);
    execve(path.c_str(), a.data(), e.data());
    why = Errno();
  }
  ReportError("exec: \"" + argv[0] + "\": " + why);
  std::_Exit(kStartErrorExit);
}

int Fail(const SandboxSpec&, const std::string& msg) {
  ReportError("kubesim sandbox: " + msg);
  return kStartErrorExit;
}

// Moves this process into the pods' CPU cgroup (best effort: a container still runs without it).
void JoinCgroup(const SandboxSpec& s) {
  if (s.cgroup_procs.empty()) return;
  const int fd = open(s.cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)!write(fd, "0", 1);  // 0 = the writing process
  close(fd);
}

int Run(const SandboxSpec& s) {
  if (!s.error_file.empty()) {
    g_error_fd = open(s.error_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  JoinCgroup(s);
  if (!s.netns.empty()) {
    const int net = open(s.netns.c_str(), O_RDONLY | O_CLOEXEC);
    if (net < 0) return Fail(s, "opening the pod's network namespace " + s.netns + ": " + Errno());
    if (setns(net, CLONE_NEWNET) != 0) {
      return Fail(s, "entering the pod's network namespace " + s.netns + ": " + Errno());
    }
    close(net);
  }
  if (!s.hostname.empty()) {
    if (unshare(CLONE_NEWUTS) != 0) return Fail(s, "unshare(CLONE_NEWUTS): " + Errno());
    if (sethostname(s.hostname.data(), s.hostname.size()) != 0) {
      return Fail(s, "sethostname(\"" + s.hostname + "\"): " + Errno());
    }
  }
  if (unshare(CLONE_NEWNS) != 0) return Fail(s, "unshare(CLONE_NEWNS): " + Errno());
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return Fail(s, "making / private: " + Errno());
  }
  {
    char buf[64] = {0};
    const ssize_t n = readlink("/proc/self/ns/mnt", buf, sizeof buf - 1);
    if (n > 0) WriteFile(s.ns_file, std::string(buf, static_cast<size_t>(n)));
  }
  for (const std::string* d : {&s.root, &s.upper, &s.work}) {
    if (!MakeDirs(*d)) return Fail(s, "mkdir " + *d + ": " + Errno());
  }
  const std::string opts = "lowerdir=/,upperdir=" + s.upper + ",workdir=" + s.work;
  if (mount("overlay", s.root.c_str(), "overlay", 0, opts.c_str()) != 0) {
    return Fail(s, "mounting an overlay over / at " + s.root + ": " + Errno());
  }
  // The overlay shows the root filesystem only: carry the host's other mounts (/proc, /sys,
  // /dev, …) into it, except the kubelet's own state (other pods' volumes live there).
  for (const std::string& point : TopLevelMounts()) {
    bool hidden = Under(point, s.root);
    for (const auto& h : s.hide)
      hidden |= Under(point, h);
    if (hidden) continue;
    const std::string target = s.root + point;
    struct stat st {};
    if (stat(point.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode) ? !MakeDirs(target) : !MakeFile(target)) continue;
    if (mount(point.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      return Fail(s, "bind-mounting " + point + ": " + Errno());
    }
  }
  bool have_shm = false;
  for (const SandboxMount& m : s.mounts) {
    const std::string target = s.root + InRoot(s.root, m.target);
    have_shm |= m.target == "/dev/shm";
    if (m.type == "tmpfs") {
      if (!MakeDirs(target)) return Fail(s, "mkdir " + m.target + ": " + Errno());
      if (mount("tmpfs", target.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                m.options.empty() ? nullptr : m.options.c_str()) != 0) {
        return Fail(s, "mounting tmpfs at " + m.target + ": " + Errno());
      }
    } else {
      if (m.file ? !MakeFile(target) : !MakeDirs(target)) {
        return Fail(s, "creating mount point " + m.target + ": " + Errno());
      }
      if (mount(m.source.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
        return Fail(s, "bind-mounting " + m.source + " at " + m.target + ": " + Errno());
      }
    }
    if (m.read_only &&
        mount(nullptr, target.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
      return Fail(s, "making " + m.target + " read-only: " + Errno());
    }
  }
  if (!have_shm) {
    const std::string shm = s.root + "/dev/shm";
    const std::string data = "mode=1777,size=" + std::to_string(s.shm_bytes);
    if (MakeDirs(shm) &&
        mount("shm", shm.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, data.c_str()) != 0) {
      return Fail(s, "mounting /dev/shm: " + Errno());
    }
  }
  if (chdir(s.root.c_str()) != 0) return Fail(s, "chdir " + s.root + ": " + Errno());
  if (syscall(SYS_pivot_root, ".", ".") != 0) return Fail(s, "pivot_root: " + Errno());
  if (umount2(".", MNT_DETACH) != 0) return Fail(s, "detaching the old root: " + Errno());
  const std::string cwd = s.cwd.empty() ? "/" : s.cwd;
  if (!MakeDirs(cwd) || chdir(cwd.c_str()) != 0) {
    return Fail(s, "chdir to cwd (\"" + cwd + "\"): " + Errno());
  }
  Exec(s.argv, s.env);
}

int ExecIn(pid_t pid, const SandboxSpec& s, const std::vector<std::string>& argv) {
  JoinCgroup(s);
  // The container's network namespace first (the pod's, or the host's own), then its mounts.
  const std::string net = "/proc/" + std::to_string(pid) + "/ns/net";
  if (const int nfd = open(net.c_str(), O_RDONLY | O_CLOEXEC); nfd >= 0) {
    if (setns(nfd, CLONE_NEWNET) != 0) {
      std::fprintf(stderr, "kubesim sandbox: setns %s: %s\n", net.c_str(), Errno().c_str());
      return 126;
    }
    close(nfd);
  }
  const std::string ns = "/proc/" + std::to_string(pid) + "/ns/mnt";
  const int fd = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::fprintf(stderr, "kubesim sandbox: open %s: %s\n", ns.c_str(), Errno().c_str());
    return 126;
  }
  if (setns(fd, CLONE_NEWNS) != 0) {
    std::fprintf(stderr, "kubesim sandbox: setns: %s\n", Errno().c_str());
    return 126;
  }
  close(fd);
  if (chdir(s.cwd.empty() ? "/" : s.cwd.c_str()) != 0 && chdir("/") != 0) return 126;
  std::string why;
  const std::string path = LookPath(argv.empty() ? "" : argv[0], s.env, &why);
  if (path.empty()) {
    std::fprintf(stderr, "exec: \"%s\": %s\n", argv.empty() ? "" : argv[0].c_str(), why.c_str());
    return 127;
  }
  std::vector<char*> a;
  for (const auto& x : argv)
    a.push_back(const_cast<char*>(x.c_str()));
  a.push_back(nullptr);
  std::vector<char*> e;
  for (const auto& x : s.env)
    e.push_back(const_cast<char*>(x.c_str()));
  e.push_back(nullptr);
  execve(path.c_str(), a.data(), e.data());
  std::fprintf(stderr, "exec: \"%s\": %s\n", argv[0].c_str(), Errno().c_str());
  return 127;
}

int Probe(const std::string& dir) {
  if (geteuid() != 0) {
    std::printf("kubesim runs as uid %d: the kubelet needs root (mount namespaces, overlayfs)\n",
                static_cast<int>(geteuid()));
    return 1;
  }
  if (unshare(CLONE_NEWNS) != 0) {
    std::printf("unshare(CLONE_NEWNS): %s\n", Errno().c_str());
    return 1;
  }
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    std::printf("making / private: %s\n", Errno().c_str());
    return 1;
  }
  const std::string root = dir + "/root", upper = dir + "/upper", work = dir + "/work";
  for (const auto& d : {root, upper, work}) {
    if (!MakeDirs(d)) {
      std::printf("mkdir %s: %s\n", d.c_str(), Errno().c_str());
      return 1;
    }
  }
  const std::string opts = "lowerdir=/,upperdir=" + upper + ",workdir=" + work;
  if (mount("overlay", root.c_str(), "overlay", 0, opts.c_str()) != 0) {
    std::printf("mounting an overlay over /: %s\n", Errno().c_str());
    return 1;
  }
  const std::string shm = root + "/dev/shm";
  if (!MakeDirs(shm) || mount("shm", shm.c_str(), "tmpfs", 0, "size=1048576") != 0) {
    std::printf("mounting tmpfs: %s\n", Errno().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int SandboxMain(int argc, char** argv) {
  CloseExtraFds();
  const std::string cmd = argc > 1 ? argv[1] : "";
  auto read_spec = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return SandboxSpec::FromJson(nlohmann::json::parse(ss.str()));
  };
  try {
    if (cmd == "run" && argc == 3) return Run(read_spec(argv[2]));
    if (cmd == "exec" && argc >= 6 && std::string(argv[4]) == "--") {
      std::vector<std::string> rest(argv + 5, argv + argc);
      return ExecIn(static_cast<pid_t>(std::stol(argv[2])), read_spec(argv[3]), rest);
    }
    if (cmd == "probe" && argc == 3) return Probe(argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kubesim-sandbox: %s\n", e.what());
    return kStartErrorExit;
  }
  std::fprintf(stderr, "usage: kubesim-sandbox run SPEC | exec PID SPEC -- ARGV... | probe DIR\n");
  return 2;
}

}  // namespace kubesim::node

int main(int argc, char** argv) {
  return kubesim::node::SandboxMain(argc, argv);
}
