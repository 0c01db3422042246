// The process sandbox of kubesim's kubelet: how a container becomes a real local process.
//
// The kubelet writes a SandboxSpec (JSON) and starts the `kubesim-sandbox` launcher (a small
// single-threaded executable next to `kubesim`; see sandbox_main.cc) as a new session with
// stdout+stderr appended to the container's log file. The launcher enters a private mount
// namespace (unshare(CLONE_NEWNS), everything made MS_PRIVATE), mounts an overlayfs over `/`
// (lower = the host's root filesystem, upper/work = per-container dirs in the kubelet's state
// dir), carries the host's other top-level mounts (/proc, /sys, /dev, …) into it, mounts the
// pod's volumes at their mountPaths (bind mounts, tmpfs), a private /dev/shm, the generated
// /etc/hosts, pivots into the overlay and execs the command. Whatever the container writes
// outside its volumes lands in its upper dir, never on the host.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kubesim::node {

struct SandboxMount {
  std::string source;         // host path (bind), or "" for tmpfs
  std::string target;         // absolute path inside the container
  std::string type = "bind";  // "bind" | "tmpfs"
  std::string options;        // tmpfs mount data, e.g. "size=67108864"
  bool read_only = false;
  bool file = false;  // the bind source is a file (the target is created as an empty file)
};

struct SandboxSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in the container's PATH
  std::vector<std::string> env;   // "NAME=value"
  std::string cwd;                // "" = "/"; created when missing, as runc does
  std::string root;               // the overlay's mount point (an empty dir)
  std::string upper;              // overlay upperdir
  std::string work;               // overlay workdir
  std::vector<SandboxMount> mounts;
  // Host mount points under these prefixes are not carried into the container (the kubelet's
  // own state dir, where other pods' volumes live).
  std::vector<std::string> hide;
  // Where the launcher writes why it could not start the command (then exits 128), and the
  // container's mount namespace id ("mnt:[N]") once it has one.
  std::string error_file;
  std::string ns_file;
  // Size of the private /dev/shm when no volume is mounted there (bytes).
  int64_t shm_bytes = 64ll << 20;
  // A cgroup.procs file the launcher joins before the command (and exec probes) run: every
  // container of the kubelet in one CPU cgroup ("" = none). See Kubelet::SetUpPodCgroup.
  std::string cgroup_procs;
  // A network namespace (/run/netns/<name>) the launcher enters before anything else: the pod's
  // own (kubelet --pod-network netns), shared by its containers ("" = the host's network).
  std::string netns;
  // With netns: the pod's hostname, set in a UTS namespace of the container's own ("" = the
  // host's), as a pod's sandbox has one.
  std::string hostname;

  nlohmann::json ToJson() const;
  static SandboxSpec FromJson(const nlohmann::json& j);
};

// Exit code of the launcher when it could not start the command (the runtime's StartError).
inline constexpr int kStartErrorExit = 128;

// Path of kubesim-sandbox: next to the running executable.
std::string DefaultLauncherPath();

// Starts `launcher run <spec_file>` in a new session (so pid == process group id) with an empty
// signal mask and default dispositions, stdin from /dev/null and stdout+stderr appended to
// `log_file`. Throws std::runtime_error when the launcher cannot be started.
pid_t SpawnContainer(const std::string& launcher, const std::string& spec_file,
                     const std::string& log_file);

// Runs `argv` inside the mount namespace of the running container `pid` (the container's env and
// working directory come from `spec_file`), for exec probes. Returns its exit status (0 = success)
// with the combined output in `output`; -1 when it ran past `timeout` (it is killed).
int ExecInContainer(const std::string& launcher, pid_t pid, const std::string& spec_file,
                    const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                    std::string* output);

// Checks once that this process may create sandboxes (mount namespaces, overlayfs over /, tmpfs)
// by running `launcher probe <dir>`. Returns "" when it can, else why not (for messages).
std::string CheckSandboxSupport(const std::string& launcher, const std::string& dir);

// The launcher's entry point (sandbox_main.cc): `run SPEC`, `exec PID SPEC -- ARGV…`, `probe DIR`.
int SandboxMain(int argc, char** argv);

}  // namespace kubesim::node
