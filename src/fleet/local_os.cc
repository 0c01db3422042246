// The local fleet's contact with the operating system (see local_internal.h).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "local_internal.h"
#include "starforge/common/atomic_file.h"
#include "starforge/common/regular_file.h"
#include "starforge/config/config.h"

extern char** environ;

namespace starforge::fleet::local {

std::string ErrnoText(int errnum) {
  char buf[256];
  // GNU strerror_r returns the message (maybe not in buf).
  return ::strerror_r(errnum, buf, sizeof buf);
}

JobPaths PathsFor(const fs::path& storage_root, const std::string& job_id) {
  JobPaths p;
  p.job_dir = storage_root / "jobs" / job_id;
  p.fleet_dir = p.job_dir / "fleet";
  p.lock = p.fleet_dir / "run.lock";
  p.launch = p.fleet_dir / "launch.json";
  p.request = p.fleet_dir / "request.json";
  p.cancel = p.fleet_dir / "cancel.json";
  p.failed = p.fleet_dir / "failed.json";
  p.capsule_zip = p.fleet_dir / "capsule.zip";
  p.capsule_dir = p.job_dir / "capsule";
  p.logs_dir = p.job_dir / "logs";
  p.runner_log = p.logs_dir / "runner.log";
  p.status = p.job_dir / "status.json";
  return p;
}

namespace {

// Up to `max` bytes of the regular file `path` from `offset` (negative: that far from the end);
// nullopt when it is not a regular file that can be opened.
std::optional<std::string> ReadRegular(const fs::path& path, int64_t offset, size_t max) {
  const int fd = OpenRegularNoFollow(path);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  ::fstat(fd, &st);
  const int64_t size = static_cast<int64_t>(st.st_size);
  int64_t start = offset >= 0 ? offset : std::max<int64_t>(0, size + offset);
  std::string text(std::min<size_t>(max, static_cast<size_t>(std::max<int64_t>(0, size - start))),
                   '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::pread(fd, text.data() + got, text.size() - got,
                              static_cast<off_t>(start) + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return text;
}

}  // namespace

std::optional<nlohmann::json> ReadJson(const fs::path& path) {
  constexpr size_t kMax = 1 << 20;
  const std::optional<std::string> text = ReadRegular(path, 0, kMax + 1);
  if (!text || text->size() > kMax) return std::nullopt;
  nlohmann::json doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return std::nullopt;
  return doc;
}

std::vector<std::string> TailLines(const fs::path& path, size_t max_lines) {
  constexpr int64_t kWindow = 16 * 1024;
  const std::optional<std::string> window = ReadRegular(path, -kWindow, kWindow);
  if (!window) return {};
  struct stat st {};
  const int64_t start = ::stat(path.c_str(), &st) == 0 && st.st_size > kWindow ? 1 : 0;
  const std::string& text = *window;
  std::vector<std::string> lines;
  std::istringstream stream(text);
  std::string line;
  bool first = start > 0;  // a partial first line is dropped
  while (std::getline(stream, line)) {
    if (first) {
      first = false;
      continue;
    }
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
      line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  if (lines.size() > max_lines) lines.erase(lines.begin(), lines.end() - max_lines);
  return lines;
}

StatusOr<LockState> ProbeLock(const fs::path& lock) {
  const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return LockState::kFree;
    return Status::Internal("cannot open " + lock.string() + ": " + ErrnoText(errno));
  }
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);  // also lets go of the lock if we took it
  if (rc == 0) return LockState::kFree;
  if (err == EWOULDBLOCK) return LockState::kHeld;
  return Status::Internal("cannot lock " + lock.string() + ": " + ErrnoText(err));
}

bool LockHeld(const fs::path& lock) {
  const StatusOr<LockState> state = ProbeLock(lock);
  return state.ok() && *state == LockState::kHeld;
}

bool LockFree(const fs::path& lock) {
  const StatusOr<LockState> state = ProbeLock(lock);
  return state.ok() && *state == LockState::kFree;
}

namespace {

// The fields after "(comm)" of /proc/<pid>/stat: [0] = state (field 3), [1] = ppid, [2] = pgrp,
// [19] = starttime (field 22).
std::vector<std::string> StatFields(const std::string& pid_dir) {
  std::ifstream in(pid_dir + "/stat");
  if (!in) return {};
  // rdbuf(), not istreambuf_iterator: GCC 12 -O3 sees a null pointer in the iterator's inlined
  // buffer reads (-Wnull-dereference).
  std::ostringstream whole;
  whole << in.rdbuf();
  const std::string text = whole.str();
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(text.substr(close + 1));
  std::vector<std::string> fields;
  std::string f;
  while (rest >> f)
    fields.push_back(f);
  return fields;
}

}  // namespace

std::optional<uint64_t> ProcStartTime(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  const std::vector<std::string> f = StatFields("/proc/" + std::to_string(pid));
  if (f.size() < 20) return std::nullopt;
  return std::stoull(f[19]);
}

bool SignalJobGroup(pid_t pgid, const std::string& job_id, int sig) {
  return SignalMarkedGroup(pgid, "FORGE_JOB_ID=" + job_id, sig);
}

bool SignalMarkedGroup(pid_t pgid, const std::string& marker, int sig) {
  if (pgid <= 1) return false;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return false;
  const std::string pgid_text = std::to_string(pgid);
  const std::string& needle = marker;
  bool ours = false;
  while (dirent* e = ::readdir(proc)) {
    if (!std::all_of(e->d_name, e->d_name + std::strlen(e->d_name), ::isdigit)) continue;
    const std::string dir = std::string("/proc/") + e->d_name;
    const std::vector<std::string> f = StatFields(dir);
    if (f.size() < 3 || f[2] != pgid_text || f[0] == "Z" || f[0] == "X") continue;
    std::ifstream env(dir + "/environ", std::ios::binary);
    std::string entry;
    while (std::getline(env, entry, '\0')) {
      if (entry == needle) {
        ours = true;
        break;
      }
    }
    if (ours) break;
  }
  ::closedir(proc);
  return ours && ::kill(-pgid, sig) == 0;
}

std::string FindProgram(const std::string& program, const std::string& path) {
  if (program.empty()) return "";
  if (program.find('/') != std::string::npos)
    return ::access(program.c_str(), X_OK) == 0 ? program : "";
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + program;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return fs::absolute(candidate).string();
  }
  return "";
}

std::map<std::string, std::string> ScrubbedEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  for (auto it = env.begin(); it != env.end();) {
    const std::string& name = it->first;
    bool secret =
        name == "FORGE_TOKEN" || name == "FORGE_K8S_TOKEN" || name.rfind("FORGE_S3_", 0) == 0;
    for (const config::SettingInfo& s : config::Settings())
      secret = secret || (s.secret && s.name == name);
    it = secret ? env.erase(it) : std::next(it);
  }
  return env;
}

// ---- The detached spawn -------------------------------------------------------------------
//
// Between fork and exec only async-signal-safe calls: everything is prepared before fork.

namespace {

enum ReportKind : int32_t { kReady = 1, kFailed = 2, kLockHeld = 3 };
enum Stage : int32_t {
  kSetsid = 1,
  kFork,
  kOpenLock,
  kFlock,
  kOpenLog,
  kOpenNull,
  kChdir,
  kDup,
  kExec,
};

// One message from a child; 16 bytes, so each write to the pipe is atomic.
struct Report {
  int32_t kind = 0;
  int32_t stage = 0;
  int32_t err = 0;
  int32_t pid = 0;
};

const char* StageText(int32_t stage) {
  switch (stage) {
    case kSetsid:
      return "setsid";
    case kFork:
      return "fork";
    case kOpenLock:
      return "open run.lock";
    case kFlock:
      return "lock run.lock";
    case kOpenLog:
      return "open runner.log";
    case kOpenNull:
      return "open /dev/null";
    case kChdir:
      return "change to the capsule directory";
    case kDup:
      return "set up stdin/stdout/stderr";
    case kExec:
      return "execute";
    default:
      return "start";
  }
}

void SendReport(int fd, int32_t kind, int32_t stage, int32_t err, int32_t pid) {
  Report r;
  r.kind = kind;
  r.stage = stage;
  r.err = err;
  r.pid = pid;
  const char* p = reinterpret_cast<const char*>(&r);
  size_t left = sizeof r;
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

[[noreturn]] void ChildFail(int report_fd, int32_t stage) {
  SendReport(report_fd, kFailed, stage, errno, 0);
  ::_exit(127);
}

// A descriptor at 3 or above (0-2 are about to be replaced); async-signal-safe.
int AboveStdio(int fd, bool cloexec) {
  if (fd > 2) return fd;
  return ::fcntl(fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, 3);
}

void CloseRange(unsigned first, unsigned last) {
  if (first > last) return;
  if (::close_range(first, last, 0) == 0) return;
  const unsigned stop = std::min(last, 65535U);  // no close_range: close one by one
  for (unsigned fd = first; fd <= stop; ++fd)
    ::close(static_cast<int>(fd));
}

struct Prepared {
  const char* program;
  std::vector<char*> argv;
  std::vector<char*> envp;
  const char* cwd;
  const char* lock;
  const char* log;
  bool ignore_stop_signals;
};

// The grandchild: takes the lock, reports, waits for the go, becomes the program.
[[noreturn]] void Grandchild(const Prepared& p, int report_fd, int go_fd) {
  report_fd = AboveStdio(report_fd, true);
  go_fd = AboveStdio(go_fd, true);
  ::setpgid(0, 0);  // its own process group, whose id is its pid: what Cancel signals

  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  if (p.ignore_stop_signals) {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    ::sigemptyset(&ign.sa_mask);
    ::sigaction(SIGTERM, &ign, nullptr);
    ::sigaction(SIGINT, &ign, nullptr);
  }

  // No O_CLOEXEC: the runner keeps the lock for its whole life.
  int lock_fd = ::open(p.lock, O_RDWR | O_CREAT, 0644);
  if (lock_fd < 0) ChildFail(report_fd, kOpenLock);
  lock_fd = AboveStdio(lock_fd, false);
  // A probe (ProbeLock) holds the lock for an instant: retry for about a second.
  for (int attempt = 0;; ++attempt) {
    if (::flock(lock_fd, LOCK_EX | LOCK_NB) == 0) break;
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) ChildFail(report_fd, kFlock);
    if (attempt >= 100) {
      SendReport(report_fd, kLockHeld, kFlock, 0, 0);
      ::_exit(0);
    }
    struct timespec ten_ms {
      0, 10'000'000
    };
    ::nanosleep(&ten_ms, nullptr);
  }
  const int log_fd =
      AboveStdio(::open(p.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644), true);
  if (log_fd < 0) ChildFail(report_fd, kOpenLog);
  const int null_fd = AboveStdio(::open("/dev/null", O_RDONLY | O_CLOEXEC), true);
  if (null_fd < 0) ChildFail(report_fd, kOpenNull);
  if (::chdir(p.cwd) != 0) ChildFail(report_fd, kChdir);

  SendReport(report_fd, kReady, 0, 0, static_cast<int32_t>(::getpid()));
  char go = 0;
  ssize_t n;
  do {
    n = ::read(go_fd, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1 || go != 'g') ::_exit(0);  // the launcher changed its mind or died: run nothing

  if (::dup2(null_fd, 0) < 0 || ::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0)
    ChildFail(report_fd, kDup);
  // Only 0-2, the lock and the report pipe (close-on-exec) stay open.
  const unsigned lo = static_cast<unsigned>(std::min(lock_fd, report_fd));
  const unsigned hi = static_cast<unsigned>(std::max(lock_fd, report_fd));
  CloseRange(3, lo - 1);
  CloseRange(lo + 1, hi - 1);
  CloseRange(hi + 1, ~0U);
  ::execve(p.program, p.argv.data(), p.envp.data());
  ChildFail(report_fd, kExec);
}

// Reads one Report; false at end of file.
bool ReadReport(int fd, Report* r) {
  char* p = reinterpret_cast<char*>(r);
  size_t got = 0;
  while (got < sizeof *r) {
    const ssize_t n = ::read(fd, p + got, sizeof *r - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

// Serialises spawns in this process, so that one spawn's children do not inherit (and keep
// open) another spawn's pipes.
std::mutex spawn_mutex;

}  // namespace

SpawnResult SpawnDetached(const SpawnSpec& spec, const std::function<Status(pid_t)>& before_exec) {
  SpawnResult result;
  Prepared p;
  p.program = spec.program.c_str();
  for (const std::string& a : spec.argv)
    p.argv.push_back(const_cast<char*>(a.c_str()));
  p.argv.push_back(nullptr);
  for (const std::string& e : spec.env)
    p.envp.push_back(const_cast<char*>(e.c_str()));
  p.envp.push_back(nullptr);
  const std::string cwd = spec.cwd.string(), lock = spec.lock.string(), log = spec.log.string();
  p.cwd = cwd.c_str();
  p.lock = lock.c_str();
  p.log = log.c_str();
  p.ignore_stop_signals = spec.ignore_stop_signals;

  std::lock_guard<std::mutex> guard(spawn_mutex);
  int report[2], go[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    result.retryable = true;
    result.error = "cannot create a pipe: " + ErrnoText(errno);
    return result;
  }
  if (::pipe2(go, O_CLOEXEC) != 0) {
    result.retryable = true;
    result.error = "cannot create a pipe: " + ErrnoText(errno);
    ::close(report[0]);
    ::close(report[1]);
    return result;
  }
  const pid_t middle = ::fork();
  if (middle == 0) {
    ::close(report[0]);
    ::close(go[1]);
    if (::setsid() < 0) ChildFail(report[1], kSetsid);
    const pid_t grandchild = ::fork();
    if (grandchild < 0) ChildFail(report[1], kFork);
    if (grandchild > 0) ::_exit(0);
    Grandchild(p, report[1], go[0]);
  }
  const int fork_errno = errno;
  ::close(report[1]);
  ::close(go[0]);
  if (middle < 0) {
    ::close(report[0]);
    ::close(go[1]);
    result.retryable = true;
    result.error = "cannot fork: " + ErrnoText(fork_errno);
    return result;
  }
  int status = 0;
  while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
  }

  Report r;
  const bool got = ReadReport(report[0], &r);
  auto finish = [&](SpawnResult out) {
    ::close(go[1]);
    ::close(report[0]);
    return out;
  };
  if (!got) {
    result.retryable = true;
    result.error = "the launcher's child exited before starting the runner";
    return finish(result);
  }
  if (r.kind == kLockHeld) {
    result.lock_held = true;
    result.error = "another process holds " + lock;
    return finish(result);
  }
  if (r.kind != kReady) {
    result.retryable = r.stage == kFork || r.err == EAGAIN || r.err == ENOMEM || r.err == EMFILE ||
                       r.err == ENFILE || r.err == EINTR;
    result.error = std::string("cannot ") + StageText(r.stage) + ": " + ErrnoText(r.err);
    return finish(result);
  }
  const pid_t pid = r.pid;
  if (const Status ready = before_exec ? before_exec(pid) : Status::Ok(); !ready.ok()) {
    result.retryable = true;
    result.error = ready.message();
    return finish(result);  // closing the go pipe makes the grandchild exit
  }
  const char go_byte = 'g';
  if (!WriteAll(go[1], &go_byte, 1)) {
    result.retryable = true;
    result.error = "the runner's process vanished before it started";
    return finish(result);
  }
  ::close(go[1]);
  go[1] = -1;
  // End of file without a report: execve succeeded (the pipe is close-on-exec).
  if (ReadReport(report[0], &r) && r.kind == kFailed) {
    ::close(report[0]);
    result.pid = pid;
    result.error =
        std::string("cannot ") + StageText(r.stage) + " " + spec.program + ": " + ErrnoText(r.err);
    return result;
  }
  ::close(report[0]);
  result.ok = true;
  result.pid = pid;
  return result;
}

}  // namespace starforge::fleet::local
