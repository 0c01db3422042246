// Pieces of the local fleet that touch the operating system: the job directory's files, the
// run.lock probe, /proc, and the detached spawn of the runner. Private to src/fleet.
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

#include "starforge/fleet/local_fleet.h"

namespace starforge::fleet::local {

namespace fs = std::filesystem;

// Everything the local fleet keeps about one job, under <storage root>/jobs/<id>/.
struct JobPaths {
  fs::path job_dir;
  fs::path fleet_dir;    // fleet/: the fleet's own records
  fs::path lock;         // fleet/run.lock: held by the runner for its whole life
  fs::path launch;       // fleet/launch.json: the runner's pid and start time
  fs::path request;      // fleet/request.json: the submitted job (waiting or launched)
  fs::path cancel;       // fleet/cancel.json: a cancel was requested (and what was sent)
  fs::path failed;       // fleet/failed.json: the runner could not be started (final)
  fs::path capsule_zip;  // fleet/capsule.zip: the capsule fetched from the object store
  fs::path capsule_dir;  // capsule/: the unpacked capsule (the runner's cwd)
  fs::path logs_dir;     // logs/
  fs::path runner_log;   // logs/runner.log: the runner's stdout and stderr
  fs::path status;       // status.json: written by the runner
};
JobPaths PathsFor(const fs::path& storage_root, const std::string& job_id);

// The JSON object in `path`; nullopt when it is missing, not a regular file (a job may plant a
// symlink or a FIFO in its directory: neither is followed nor blocks), over 1 MiB, or not a
// JSON object.
std::optional<nlohmann::json> ReadJson(const fs::path& path);

// The last `max_lines` non-empty lines of a text file (reads at most its last 16 KiB; the same
// rules as ReadJson for what is read).
std::vector<std::string> TailLines(const fs::path& path, size_t max_lines);

enum class LockState { kHeld, kFree, kError };
// Whether some process holds run.lock: tries LOCK_EX|LOCK_NB on a fresh descriptor and lets go
// at once. A missing file is free. kError (with *error) when the file cannot be opened.
LockState ProbeLock(const fs::path& lock, std::string* error = nullptr);

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

// The bubblewrap command line that runs `command` for the job at `paths` (pure): new PID and IPC
// namespaces; a mount namespace with the sandbox's read-only directories, a fresh /proc, /dev,
// /dev/shm and /tmp, and of the storage root only the job's directory (read-write) with its
// fleet/ records read-only, and the directories of `read_only_jobs` (earlier jobs it resumes
// from) read-only at their own paths; the capsule as working directory; with a uid, setpriv drops
// to it and every capability.
std::vector<std::string> SandboxArgv(const LocalSandbox& sandbox, const JobPaths& paths,
                                     const std::vector<std::string>& command,
                                     const std::vector<fs::path>& read_only_jobs = {});

// Runs `argv` (argv[0] an absolute path) with `env`, waits, and returns its exit status (128+N
// for signal N, -1 when it could not start); its stdout and stderr, merged, in *output (at most
// 64 KiB).
int RunCapture(const std::vector<std::string>& argv, const std::vector<std::string>& env,
               std::string* output);

// Gives `path` (not following symlinks) and, for a directory, everything below it to uid:gid.
// "" or the first error.
std::string ChownTree(const fs::path& path, int uid, int gid, bool recursive);

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
// here (e.g. records the pid) and the program is exec'd only if it returns "". Otherwise, or if
// we die first, the grandchild exits without running anything.
SpawnResult SpawnDetached(const SpawnSpec& spec,
                          const std::function<std::string(pid_t)>& before_exec);

std::string ErrnoText(int errnum);

}  // namespace starforge::fleet::local
