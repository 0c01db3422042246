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
#include "starforge/fleet/local_process.h"

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

}  // namespace starforge::fleet::local
