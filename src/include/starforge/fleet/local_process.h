// The local fleet's process pieces, shared by its jobs and by the local playgrounds
// (playground/local_backend.h): detached spawns that hold a lock for their whole life, the lock
// probe, /proc, signalling a process group only when it is ours, PATH look-ups, the environments
// a sandboxed process starts with, and the bubblewrap command line of a sandboxed server.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/common/status_or.h"
#include "starforge/fleet/local_fleet.h"

namespace starforge::fleet::local {

namespace fs = std::filesystem;

// The JSON object in `path`; nullopt when it is missing, not a regular file (a job may plant a
// symlink or a FIFO in its directory: neither is followed nor blocks), over 1 MiB, or not a
// JSON object.
std::optional<nlohmann::json> ReadJson(const fs::path& path);

// The last `max_lines` non-empty lines of a text file (reads at most its last 16 KiB; the same
// rules as ReadJson for what is read).
std::vector<std::string> TailLines(const fs::path& path, size_t max_lines);

enum class LockState { kHeld, kFree };
// Whether some process holds run.lock: tries LOCK_EX|LOCK_NB on a fresh descriptor and lets go
// at once. A missing file is free. Fails when the file cannot be opened or locked.
StatusOr<LockState> ProbeLock(const fs::path& lock);
// ProbeLock found it held (not when it cannot tell).
bool LockHeld(const fs::path& lock);
// ProbeLock found it free (not when it cannot tell).
bool LockFree(const fs::path& lock);

// Field 22 of /proc/<pid>/stat (start time in clock ticks after boot); nullopt when gone.
std::optional<uint64_t> ProcStartTime(pid_t pid);

// Sends `sig` to process group `pgid` if a live process of that group has FORGE_JOB_ID=<job_id>
// in its environment (so a recycled group id never hits a stranger). True if sent.
bool SignalJobGroup(pid_t pgid, const std::string& job_id, int sig);

// Where `program` is: itself when it contains '/', else the first executable match on `path`
// (a PATH value). "" when there is none.
std::string FindProgram(const std::string& program, const std::string& path);

// This process's environment minus secrets (FORGE_TOKEN, FORGE_K8S_TOKEN, FORGE_S3_* and every
// setting config::Settings() marks secret): what a job may see of ours.
std::map<std::string, std::string> ScrubbedEnvironment();

// What a sandboxed runner starts with besides its FORGE_JOB_ID & co: a standard PATH (the
// interpreter's directory first), HOME and TMPDIR = /tmp, LANG, and of this process's own
// environment only the runner's documented settings (FORGE_RUNNER_GRACE_S,
// FORGE_RUNNER_HEARTBEAT_S, FORGE_NEMO_RL_DIR).
std::map<std::string, std::string> SandboxEnvironment(const LocalSandbox& sandbox);

struct SpawnSpec {
  std::string program;  // absolute path: execve, no PATH search after fork
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value"
  fs::path cwd;
  fs::path lock;  // held (LOCK_EX, inherited across exec) by the spawned process
  fs::path log;   // stdout and stderr, appended
  // SIGTERM and SIGINT ignored from exec on (bubblewrap: its outer process must outlive a
  // cancel's SIGTERM, which the runner inside handles; the runner installs its own handlers).
  bool ignore_stop_signals = false;
};

struct SpawnResult {
  bool ok = false;
  pid_t pid = -1;
  bool lock_held = false;  // another process holds the lock: nothing was started
  bool retryable = false;
  std::string error;
};

// Starts spec.program detached: double fork (setsid in the intermediate child, which is reaped
// here), so the program is never our child and lives on when we exit; its own process group;
// default signal dispositions and an empty signal mask; stdin /dev/null; only fds 0-2 and the
// lock open. The grandchild takes the lock, reports its pid and WAITS: `before_exec(pid)` runs
// here (e.g. records the pid) and the program is exec'd only if it returns ok. Otherwise (its
// message is the result's retryable error), or if we die first, the grandchild exits without
// running anything.
SpawnResult SpawnDetached(const SpawnSpec& spec, const std::function<Status(pid_t)>& before_exec);

std::string ErrnoText(int errnum);

// Sends `sig` to process group `pgid` if a live process of that group has `marker` ("NAME=value")
// in its environment. True if sent. (SignalJobGroup is this with FORGE_JOB_ID=<job id>.)
bool SignalMarkedGroup(pid_t pgid, const std::string& marker, int sig);

// The bubblewrap command line of a long-running server (pure): the walls of a job's sandbox
// (new PID and IPC namespaces, the sandbox's read-only system directories, a fresh /proc, /dev,
// /dev/shm and /tmp, GPU devices, setpriv to the sandbox's uid) but no job directory: only
// `read_only` (e.g. the model and the server's installation) of the rest of the filesystem, /tmp
// as working directory, and the host's network, so that it can listen on a loopback port.
std::vector<std::string> ServerSandboxArgv(const LocalSandbox& sandbox,
                                           const std::vector<fs::path>& read_only,
                                           const std::vector<std::string>& command);

}  // namespace starforge::fleet::local
