// The local fleet: a FIFO of jobs waiting for CPUs/GPUs, and runners started as detached
// processes whose state lives in files under each job's directory (local_fleet.h). The files
// are the truth; memory only holds the queue and who holds which resources, and both are
// rebuilt from the files when a new LocalFleet starts over the same storage root.
#include "starforge/fleet/local_fleet.h"
#include "starforge/common/format.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "local_internal.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/extract.h"
#include "starforge/common/atomic_file.h"
#include "starforge/common/quantity.h"
#include "starforge/common/sha256.h"

namespace starforge::fleet {

namespace {

using local::JobPaths;
using local::LockState;
namespace fs = std::filesystem;

constexpr const char* kSource = "fleet:local";
constexpr const char* kUseKuberay = "use `fleet: kuberay`";

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// Job ids become directory names: refuse anything that could leave jobs/.
bool SafeJobId(const std::string& id) {
  if (id.empty() || id == "." || id == ".." || id.size() > 128) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

std::string Handle(const std::string& job_id) {
  return "local:" + job_id;
}

// What one job takes from the machine while it runs.
struct Need {
  int64_t cpus = 0;
  int64_t gpus = 0;
};

// CPUs: cpusPerMachine rounded up, or 1 when unset; GPUs: gpusPerMachine (one machine in all).
Need NeedOf(const jobspec::JobSpec& spec) {
  Need need;
  for (const jobspec::Pool& pool : spec.pools) {
    int64_t cpus = 1;
    if (pool.cpus_per_machine) {
      if (auto q = Quantity::Parse(*pool.cpus_per_machine)) cpus = std::max<int64_t>(1, q->Value());
    }
    need.cpus += cpus * pool.machines;
    need.gpus += pool.gpus_per_machine * pool.machines;
  }
  return need;
}

std::string JsonString(const nlohmann::json& doc, const char* key) {
  auto it = doc.find(key);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : "";
}

int64_t JsonInt(const nlohmann::json& doc, const char* key, int64_t fallback = 0) {
  auto it = doc.find(key);
  return it != doc.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

std::string Seconds(int64_t ms) {
  std::string s = fmt::format("{:.3f}", static_cast<double>(ms) / 1000.0);
  while (s.back() == '0')
    s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s + "s";
}

// The runner's own exit codes (runner/README.md), when status.json's `error` says it was the
// runner and not the program that chose the code.
std::string RunnerReason(int64_t code) {
  switch (code) {
    case 65:
      return reasons::kCapsuleVerificationFailed;
    case 78:
      return reasons::kInvalidJob;
    case 126:
    case 127:
      return reasons::kEntrypointNotRunnable;
    default:
      return reasons::kAppFailed;
  }
}

struct LaunchOutcome {
  bool ok = false;
  bool cancelled = false;  // a cancel arrived before the runner was started
  bool retryable = false;
  std::string message;
};

}  // namespace

struct LocalFleet::Impl {
  LocalFleetOptions options;
  objstore::ObjectStore& store;
  std::string host = HostName();

  struct Waiting {
    std::string job_id;
    int64_t queued_at = 0;
    Need need;
    std::string capsule_key;
    std::string capsule_sha256;
    std::vector<std::string> resume_from;  // earlier jobs whose directories it reads
    bool owner_admin = false;
  };
  struct Held {
    Need need;
    std::vector<int> gpu_ids;
    // Set for a share held by a process that is not a job (LocalFleet::Hold): the lock that
    // process holds while it lives. Jobs are watched through their own run.lock.
    std::optional<fs::path> lock;
  };

  std::mutex mu;
  std::vector<Waiting> queue;        // FIFO: by queued_at, then job id
  std::map<std::string, Held> held;  // launched and alive, or being launched; and Hold()s
  std::set<std::string> launching;   // being launched right now (outside mu)
  std::function<void(const std::string&)> notify;

  Impl(LocalFleetOptions o, objstore::ObjectStore& s) : options(std::move(o)), store(s) {
    options.storage_root = fs::absolute(options.storage_root);
  }

  JobPaths Paths(const std::string& id) const { return local::PathsFor(options.storage_root, id); }

  // ---- Admission --------------------------------------------------------------------------

  Admission Admit(const jobspec::JobSpec& spec) const {
    const LocalResources& have = options.resources;
    int64_t machines = 0;
    for (size_t i = 0; i < spec.pools.size(); ++i) {
      machines += spec.pools[i].machines;
      if (machines > 1) {
        return {false,
                "this job asks for " + std::to_string(spec.TotalMachines()) +
                    " machines; the local fleet is this one machine — " + kUseKuberay,
                fmt::format("pools[{}].machines", i)};
      }
    }
    for (size_t i = 0; i < spec.pools.size(); ++i) {
      const jobspec::Pool& pool = spec.pools[i];
      if (pool.gpus_per_machine > have.gpus) {
        std::string note;
        if (have.gpus == 0) {
          const char* path = std::getenv("PATH");
          note = local::FindProgram("nvidia-smi", path != nullptr ? path : "").empty()
                     ? " (no nvidia-smi)"
                     : " (nvidia-smi lists none)";
        }
        return {false,
                "this job asks for " + Plural(pool.gpus_per_machine, "GPU", "GPUs") +
                    "; this machine has " + std::to_string(have.gpus) + note + " — " + kUseKuberay,
                fmt::format("pools[{}].gpusPerMachine", i)};
      }
      if (pool.cpus_per_machine) {
        const auto q = Quantity::Parse(*pool.cpus_per_machine);
        const std::string field = fmt::format("pools[{}].cpusPerMachine", i);
        if (!q) return {false, "\"" + *pool.cpus_per_machine + "\" is not a CPU quantity", field};
        if (q->MilliValue() > have.cpus * 1000) {
          return {false,
                  "this job asks for " + q->Text() + " CPUs; this machine has " +
                      std::to_string(have.cpus) + " — lower cpusPerMachine or " + kUseKuberay,
                  field};
        }
      }
      // memory_bytes 0: not known, not limited.
      if (pool.memory_per_machine && have.memory_bytes > 0) {
        const auto q = Quantity::Parse(*pool.memory_per_machine);
        const std::string field = fmt::format("pools[{}].memoryPerMachine", i);
        if (!q) return {false, "\"" + *pool.memory_per_machine + "\" is not a quantity", field};
        if (q->Value() > have.memory_bytes) {
          return {false,
                  "this job asks for " + q->Text() + " of memory; this machine has " +
                      capsule::FormatBytes(static_cast<uint64_t>(have.memory_bytes)) +
                      " — lower memoryPerMachine or " + kUseKuberay,
                  field};
        }
      }
    }
    return {};
  }

  // ---- Resources (callers hold mu) ----------------------------------------------------------

  Need InUse() const {
    Need used;
    for (const auto& [id, h] : held) {
      used.cpus += h.need.cpus;
      used.gpus += h.need.gpus;
    }
    return used;
  }

  bool Fits(const Need& need) const {
    const Need used = InUse();
    return used.cpus + need.cpus <= options.resources.cpus &&
           used.gpus + need.gpus <= options.resources.gpus;
  }

  std::vector<int> FreeGpus(int64_t count) const {
    std::set<int> taken;
    for (const auto& [id, h] : held)
      taken.insert(h.gpu_ids.begin(), h.gpu_ids.end());
    std::vector<int> ids;
    for (int g = 0; g < options.resources.gpus && static_cast<int64_t>(ids.size()) < count; ++g)
      if (!taken.count(g)) ids.push_back(g);
    return ids;
  }

  // Forgets jobs whose runner is gone (their lock is free), so their resources count as free.
  void DropEnded() {
    for (auto it = held.begin(); it != held.end();) {
      const fs::path& lock = it->second.lock ? *it->second.lock : Paths(it->first).lock;
      if (!launching.count(it->first) && local::LockFree(lock))
        it = held.erase(it);
      else
        ++it;
    }
  }

  void Enqueue(Waiting w) {
    auto pos = std::find_if(queue.begin(), queue.end(), [&](const Waiting& q) {
      return std::tie(q.queued_at, q.job_id) > std::tie(w.queued_at, w.job_id);
    });
    queue.insert(pos, std::move(w));
  }

  // "waiting for 1 CPU and 2 GPUs: 1 of 2 CPUs and 1 of 2 GPUs in use by 1 job" — for a queued
  // job and for a Hold that does not fit alike. Counts only: it goes to a user who may not see
  // other users' jobs.
  std::string WaitingFor(const Need& need) const {
    const Need used = InUse();
    std::string what = Plural(need.cpus, "CPU", "CPUs");
    if (need.gpus > 0) what += " and " + Plural(need.gpus, "GPU", "GPUs");
    std::string usage;
    if (need.gpus > 0) {
      usage = fmt::format("{} of {} CPUs and {} of {} GPUs in use", used.cpus,
                          options.resources.cpus, used.gpus, options.resources.gpus);
    } else {
      usage = fmt::format("{} of {} in use", used.cpus, options.resources.cpus);
    }
    return "waiting for " + what + ": " + usage + HeldBy();
  }

  std::string WaitingMessage(size_t position) const {
    std::string message = WaitingFor(queue[position].need);
    if (position > 0)
      message += "; " + Plural(static_cast<int64_t>(position), "job", "jobs") + " ahead of it";
    return message;
  }

  // " by 2 jobs and 1 playground", or "" when nothing is held.
  std::string HeldBy() const {
    int64_t jobs = 0;
    int64_t others = 0;
    for (const auto& [id, h] : held)
      (h.lock ? others : jobs) += 1;
    std::string by;
    if (jobs > 0) by = Plural(jobs, "job", "jobs");
    if (others > 0) by += (by.empty() ? "" : " and ") + Plural(others, "playground", "playgrounds");
    return by.empty() ? "" : " by " + by;
  }

  // ---- Starting jobs ----------------------------------------------------------------------

  // Starts queued jobs from the head while they fit. Returns what happened to each job it tried.
  std::map<std::string, LaunchOutcome> StartQueued(const std::string& caller_job = "") {
    std::vector<std::pair<Waiting, std::vector<int>>> batch;
    {
      std::lock_guard<std::mutex> lock(mu);
      DropEnded();
      while (!queue.empty() && Fits(queue.front().need)) {
        Waiting w = std::move(queue.front());
        queue.erase(queue.begin());
        Held h{w.need, FreeGpus(w.need.gpus), std::nullopt};
        held[w.job_id] = h;
        launching.insert(w.job_id);
        batch.emplace_back(std::move(w), h.gpu_ids);
      }
    }
    std::map<std::string, LaunchOutcome> outcomes;
    for (auto& [w, gpus] : batch) {
      LaunchOutcome out = Launch(w, gpus);
      {
        std::lock_guard<std::mutex> lock(mu);
        launching.erase(w.job_id);
        if (!out.ok) {
          held.erase(w.job_id);
          if (out.retryable) Enqueue(w);  // tried again on the next Submit/Observe
        }
      }
      if (!out.ok && !out.retryable && !out.cancelled) {
        nlohmann::json failed = {{"reason", reasons::kSubmissionFailed}, {"message", out.message}};
        WriteFileAtomic(Paths(w.job_id).failed, failed.dump() + "\n");
      }
      outcomes[w.job_id] = out;
    }
    for (const auto& [w, gpus] : batch) {
      if (w.job_id != caller_job && notify) notify(w.job_id);
    }
    return outcomes;
  }

  // Fetches and unpacks the capsule and starts the runner (no lock held: this takes time).
  LaunchOutcome Launch(const Waiting& w, const std::vector<int>& gpu_ids) {
    const JobPaths p = Paths(w.job_id);
    LaunchOutcome out;
    auto fail = [&](std::string message, bool retryable) {
      out.ok = false;
      out.retryable = retryable;
      out.message = std::move(message);
      return out;
    };
    std::error_code ec;
    fs::create_directories(p.fleet_dir, ec);
    if (!ec) fs::create_directories(p.logs_dir, ec);
    if (ec) return fail("cannot create " + p.job_dir.string() + ": " + ec.message(), true);
    if (fs::exists(p.cancel)) {
      out.cancelled = true;
      return out;
    }
    const StatusOr<LockState> lock = local::ProbeLock(p.lock);
    if (!lock.ok()) return fail(lock.status().message(), true);
    // Already started (a runner holds the lock, or ran and ended): never a second runner.
    if (*lock == LockState::kHeld || fs::exists(p.launch)) {
      out.ok = true;
      return out;
    }

    auto got = store.GetFile(w.capsule_key, p.capsule_zip.string());
    if (!got) {
      const Status& e = got.status();
      if (e.code() == Code::kNotFound) {
        return fail("the capsule " + w.capsule_key + " is not in the object store (" +
                        store.Describe() + ")",
                    false);
      }
      return fail("cannot fetch the capsule " + w.capsule_key + ": " + e.message(), e.retryable());
    }
    if (!w.capsule_sha256.empty()) {
      const std::string digest = FileSha256(p.capsule_zip);
      if (digest != w.capsule_sha256) {
        return fail("the capsule " + w.capsule_key + " fetched from the object store has SHA-256 " +
                        (digest.empty() ? "(unreadable)" : digest) + ", not " + w.capsule_sha256,
                    false);
      }
    }
    fs::remove_all(p.capsule_dir, ec);  // leftovers of an interrupted earlier attempt
    if (ec) return fail("cannot remove " + p.capsule_dir.string() + ": " + ec.message(), true);
    const capsule::ExtractResult unpacked = capsule::ExtractZip(p.capsule_zip, p.capsule_dir);
    if (!unpacked.ok()) {
      std::string why;
      for (size_t i = 0; i < unpacked.errors.size() && i < 3; ++i)
        why += (i ? "; " : "") + unpacked.errors[i];
      return fail("cannot unpack the capsule: " + why, false);
    }
    const fs::path runner = p.capsule_dir / capsule::kRunnerPath;
    if (!fs::is_regular_file(runner))
      return fail(std::string("the capsule has no ") + capsule::kRunnerPath, false);

    const LocalSandbox* sandbox = options.sandbox ? &*options.sandbox : nullptr;
    // Admitted while a sandbox could be made, launched after a restart without one: it would
    // run with the server's rights (docs/security.md).
    if (!sandbox && options.unsandboxed_admins_only && !w.owner_admin) {
      return fail(
          "this server cannot run local jobs in a sandbox now, and the job's owner is not an "
          "admin: it would run with the server's rights. Install bubblewrap (or enable user "
          "namespaces) and submit it again",
          false);
    }
    // Earlier jobs it resumes from (checked at submit: the owner's own): read-only in the
    // sandbox, at the same paths as outside.
    std::vector<fs::path> resume_dirs;
    std::string resume_env;
    for (const std::string& id : w.resume_from) {
      if (!SafeJobId(id)) return fail("resumeFrom: \"" + id + "\" is not a valid job id", false);
      const fs::path dir = Paths(id).job_dir;
      if (!fs::is_directory(fs::symlink_status(dir, ec)))
        return fail("resumeFrom: the directory of job " + id + " is gone", false);
      resume_dirs.push_back(dir);
      resume_env += (resume_env.empty() ? "" : ":") + dir.string();
    }
    // Sandboxed: nothing of ours but the runner's own settings. Otherwise (a single-user
    // machine): our environment minus secrets.
    std::map<std::string, std::string> env =
        sandbox ? local::SandboxEnvironment(*sandbox) : local::ScrubbedEnvironment();
    const std::string python =
        sandbox ? sandbox->python
                : local::FindProgram(options.python, env.count("PATH") ? env["PATH"] : "");
    if (python.empty()) {
      return fail(options.python +
                      " (the interpreter that runs the job's runner) is not on PATH; install "
                      "Python 3.8 or later",
                  false);
    }
    env[capsule::kEnvJobId] = w.job_id;
    env[capsule::kEnvStorageRoot] = options.storage_root.string();
    env[capsule::kEnvCapsuleSha256] = w.capsule_sha256;
    if (!resume_env.empty()) env[capsule::kEnvResumeDirs] = resume_env;
    std::string cuda;
    for (int g : gpu_ids)
      cuda += (cuda.empty() ? "" : ",") + std::to_string(g);
    env["CUDA_VISIBLE_DEVICES"] = cuda;
    // The runner's own SIGTERM→SIGKILL grace matches ours, so it usually records the kill.
    env.emplace("FORGE_RUNNER_GRACE_S",
                fmt::format("{}", static_cast<double>(options.cancel_grace_ms) / 1000.0));
    // runner.log (the runner's stdout and stderr) keeps the runner's own messages; the job's
    // output is in driver.log, and in runner.log only while driver.log cannot take it.
    env["FORGE_RUNNER_STDOUT"] = "fallback";

    local::SpawnSpec spec;
    spec.program = python;
    spec.argv = {python, runner.string(), capsule::kRunnerCommand};
    if (sandbox) {
      if (std::string err = PrepareSandboxed(p, *sandbox); !err.empty()) return fail(err, true);
      spec.program = sandbox->bwrap;
      spec.argv = local::SandboxArgv(*sandbox, p, spec.argv, resume_dirs);
      spec.ignore_stop_signals = true;
    }
    for (const auto& [k, v] : env)
      spec.env.push_back(k + "=" + v);
    spec.cwd = p.capsule_dir;
    spec.lock = p.lock;
    spec.log = p.runner_log;
    if (fs::exists(p.cancel)) {  // a cancel arrived while the capsule was unpacked
      out.cancelled = true;
      return out;
    }
    Need need = w.need;
    local::SpawnResult spawned = local::SpawnDetached(spec, [&](pid_t pid) -> Status {
      // The runner waits for this record before it runs anything: a launched job always has
      // its launch.json.
      const auto start = local::ProcStartTime(pid);
      if (!start) return Status::Unavailable("the runner's process vanished before it started");
      nlohmann::json launch = {{"jobId", w.job_id},   {"pid", pid},
                               {"startTime", *start}, {"launchedAt", NowMs()},
                               {"host", host},        {"cpus", need.cpus},
                               {"gpus", gpu_ids},     {"capsuleSha256", w.capsule_sha256}};
      return WriteFileAtomic(p.launch, launch.dump(2) + "\n");
    });
    if (spawned.lock_held) {
      out.ok = true;  // someone else started it meanwhile
      return out;
    }
    if (!spawned.ok) {
      if (spawned.pid > 0) {
        // exec failed after launch.json was written: this launch never happened.
        fs::remove(p.launch, ec);
        std::ofstream(p.runner_log, std::ios::app) << "starforge: " << spawned.error << "\n";
      }
      return fail("cannot start the runner: " + spawned.error, spawned.retryable);
    }
    out.ok = true;
    return out;
  }

  // What a job running as the sandbox's uid writes: its directory, logs/ and the capsule (its
  // working directory); fleet/ stays ours (and read-only inside).
  static std::string PrepareSandboxed(const JobPaths& p, const LocalSandbox& sandbox) {
    if (sandbox.uid < 0) return "";
    std::string err = local::ChownTree(p.job_dir, sandbox.uid, sandbox.gid, false);
    if (err.empty()) err = local::ChownTree(p.logs_dir, sandbox.uid, sandbox.gid, true);
    if (err.empty()) err = local::ChownTree(p.capsule_dir, sandbox.uid, sandbox.gid, true);
    if (err.empty() && fs::exists(fs::symlink_status(p.status)))
      err = local::ChownTree(p.status, sandbox.uid, sandbox.gid, false);
    return err;
  }

  static std::string FileSha256(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return "";
    Sha256 sha;
    std::vector<char> buf(1 << 16);
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      if (in.gcount() > 0) sha.Update(buf.data(), static_cast<size_t>(in.gcount()));
    }
    return sha.HexDigest();
  }

  // ---- Observing a launched (or cancelled/failed) job from its files ------------------------

  static void AddEvent(Observation* o, const char* type, std::string reason, std::string message) {
    o->events.push_back({type, std::move(reason), std::move(message), kSource});
  }

  // Reads the job's files under fleet/ (launch.json, cancel.json, failed.json, status.json and the
  // runner's lock) and says what they mean, in the steps below.
  Observation ObserveFiles(const std::string& id) {
    const JobPaths p = Paths(id);
    const auto launch = local::ReadJson(p.launch);
    const auto cancel = local::ReadJson(p.cancel);
    const StatusOr<LockState> lock = local::ProbeLock(p.lock);
    const bool locked = lock.ok() && *lock == LockState::kHeld;
    if (!launch && !locked) return NeverLaunched(p, cancel.has_value());

    Observation o;
    const int64_t runner_pid = launch ? JsonInt(*launch, "pid") : 0;
    const std::string runner_host = launch ? JsonString(*launch, "host") : host;
    const bool cancel_sent = AddLaunchEvents(launch, cancel, runner_pid, runner_host, &o);

    const auto status = local::ReadJson(p.status);
    const std::string state = status ? JsonString(*status, "state") : "";
    bool alive = locked;
    if (!lock.ok()) {
      // Without the lock, only the heartbeat tells: a fresh one means the runner lives.
      if (state.empty()) {
        o.retryable_error = true;
        o.message = lock.status().message();
        return o;
      }
      const int64_t beat = ParseRfc3339(JsonString(*status, "heartbeatAt")).value_or(0);
      alive = state == "running" && NowMs() - beat < options.heartbeat_stale_ms;
    }
    if (alive) return Running(status, state, runner_pid, runner_host, std::move(o));
    if (state == "succeeded" || state == "failed") {
      return Exited(*status, state, cancel_sent, std::move(o));
    }
    if (state == "signalled") return Signalled(*status, cancel_sent, std::move(o));
    return RunnerGone(p, runner_pid, cancel_sent, std::move(o));
  }

  // No runner was launched and none holds the lock: failed before launch, cancelled before it
  // started, or unknown.
  static Observation NeverLaunched(const JobPaths& p, bool cancel_recorded) {
    Observation o;
    if (const auto failed = local::ReadJson(p.failed)) {
      o.state = State::kFailed;
      o.reason = JsonString(*failed, "reason");
      o.message = JsonString(*failed, "message");
      AddEvent(&o, "Warning", o.reason, o.message);
      return o;
    }
    if (cancel_recorded) {
      o.state = State::kCancelled;
      o.reason = "";  // the controller's CancelledByUser, as for every fleet
      o.message = "cancelled before it started";
    }
    return o;  // kUnknown unless cancelled
  }

  // The Started, Stopping and Killing events the launch and cancel records tell of; returns
  // whether SIGTERM was sent (a cancel is under way).
  bool AddLaunchEvents(const std::optional<nlohmann::json>& launch,
                       const std::optional<nlohmann::json>& cancel, int64_t runner_pid,
                       const std::string& runner_host, Observation* o) const {
    if (launch) {
      AddEvent(o, "Normal", reasons::kStarted,
               fmt::format("runner pid {} started on {}", runner_pid, runner_host));
    }
    const int64_t sigterm_at = cancel ? JsonInt(*cancel, "sigtermAt") : 0;
    const int64_t sigkill_at = cancel ? JsonInt(*cancel, "sigkillAt") : 0;
    if (sigterm_at > 0) {
      AddEvent(o, "Normal", reasons::kStopping,
               fmt::format("sent SIGTERM to the runner (pid {})", runner_pid));
    }
    if (sigkill_at > 0) {
      AddEvent(o, "Warning", reasons::kKilling,
               "the job did not stop within " + Seconds(options.cancel_grace_ms) +
                   " of SIGTERM; sent SIGKILL");
    }
    return sigterm_at > 0;
  }

  static Observation Running(const std::optional<nlohmann::json>& status, const std::string& state,
                             int64_t runner_pid, const std::string& runner_host, Observation o) {
    o.state = State::kRunning;
    const int64_t pid = status && state == "running" ? JsonInt(*status, "pid") : 0;
    if (pid > 0)
      o.message = fmt::format("the entrypoint (pid {}) runs on {}", pid, runner_host);
    else if (runner_pid > 0)
      o.message =
          fmt::format("the runner (pid {}) is starting the job on {}", runner_pid, runner_host);
    else
      o.message = "a runner holds fleet/run.lock and is starting the job on " + runner_host;
    return o;
  }

  static Observation Cancelled(std::string message, Observation o) {
    o.state = State::kCancelled;
    o.reason = "";  // the controller's CancelledByUser, as for every fleet
    o.message = std::move(message);
    AddEvent(&o, "Normal", reasons::kCancelled, o.message);
    return o;
  }

  // The runner's final status.json says the entrypoint exited (state succeeded or failed).
  static Observation Exited(const nlohmann::json& status, const std::string& state,
                            bool cancel_sent, Observation o) {
    const int64_t code = JsonInt(status, "exitCode", -1);
    if (cancel_sent && status.contains("stopSignal")) {
      return Cancelled(fmt::format("cancelled: the job exited with code {} after SIGTERM", code),
                       std::move(o));
    }
    o.exit_code = static_cast<int>(code);
    if (state == "succeeded") {
      o.state = State::kSucceeded;
      o.reason = reasons::kCompleted;
      o.message = "the entrypoint exited with code 0";
      return o;
    }
    const std::string error = JsonString(status, "error");
    o.state = State::kFailed;
    o.reason = error.empty() ? reasons::kAppFailed : RunnerReason(code);
    o.message = error.empty() ? fmt::format("the entrypoint exited with code {}", code) : error;
    AddEvent(&o, "Warning", o.reason, o.message);
    return o;
  }

  // The runner's final status.json says the entrypoint died on a signal.
  static Observation Signalled(const nlohmann::json& status, bool cancel_sent, Observation o) {
    const std::string name = JsonString(status, "signalName");
    const std::string signal =
        name.empty() ? "signal " + std::to_string(JsonInt(status, "signal")) : name;
    if (cancel_sent) {
      if (status.value("forcedKill", false)) {
        return Cancelled(
            "cancelled: the job did not stop within the grace period after SIGTERM and was "
            "killed with " +
                signal,
            std::move(o));
      }
      return Cancelled("cancelled: the job ended on " + signal, std::move(o));
    }
    o.state = State::kFailed;
    o.reason = reasons::kSignalled;
    o.message = "killed by " + signal;
    AddEvent(&o, "Warning", o.reason, o.message);
    return o;
  }

  // The runner is gone without a final status.json: the end of its log says what it last did.
  static Observation RunnerGone(const JobPaths& p, int64_t runner_pid, bool cancel_sent,
                                Observation o) {
    if (cancel_sent) {
      return Cancelled("cancelled: the runner was killed with SIGKILL after the grace period",
                       std::move(o));
    }
    o.state = State::kFailed;
    o.reason = reasons::kRunnerLost;
    // driver.log holds the job's output and the runner's messages; runner.log only the runner's
    // own stdout and stderr (the job's output too while driver.log could not take it).
    std::string tail, from = "driver.log";
    for (const char* name : {"driver.log", "runner.log"}) {
      for (const std::string& line : local::TailLines(p.logs_dir / name, 5))
        tail += (tail.empty() ? "" : " | ") + line.substr(0, 300);
      from = name;
      if (!tail.empty()) break;
    }
    o.message = (runner_pid > 0 ? fmt::format("the runner (pid {})", runner_pid)
                                : std::string("the runner")) +
                " ended without reporting how the job ended; " +
                (tail.empty() ? "its logs are empty" : "logs/" + from + " ends with: " + tail);
    AddEvent(&o, "Warning", o.reason, o.message);
    return o;
  }

  // ---- Cancel -----------------------------------------------------------------------------

  std::string RecordCancel(const JobPaths& p, nlohmann::json doc) {
    std::error_code ec;
    fs::create_directories(p.fleet_dir, ec);
    if (ec) return "cannot create " + p.fleet_dir.string() + ": " + ec.message();
    return WriteFileAtomic(p.cancel, doc.dump(2) + "\n").message();  // "" when written
  }

  std::string CancelRunning(const std::string& id, int64_t since_ms) {
    const JobPaths p = Paths(id);
    if (!local::LockHeld(p.lock)) return "";  // ended, or never started
    const auto launch = local::ReadJson(p.launch);
    nlohmann::json cancel = local::ReadJson(p.cancel).value_or(nlohmann::json::object());
    if (!cancel.contains("requestedAt")) cancel["requestedAt"] = NowMs();
    // Written before any signal, so that the outcome reads as Cancelled even after a crash.
    if (std::string err = RecordCancel(p, cancel); !err.empty()) return err;
    if (!launch) return "";  // the runner is still being started; the next call signals it
    const pid_t pid = static_cast<pid_t>(JsonInt(*launch, "pid"));
    const auto start = local::ProcStartTime(pid);
    if (pid <= 1 || !start || *start != static_cast<uint64_t>(JsonInt(*launch, "startTime"))) {
      return "";  // that pid is no longer our runner (it exited; the number may be reused)
    }
    bool changed = false;
    if (JsonInt(cancel, "sigtermAt") == 0) {
      if (::kill(-pid, SIGTERM) != 0 && errno != ESRCH)
        return "cannot signal the runner (pid " + std::to_string(pid) +
               "): " + local::ErrnoText(errno);
      cancel["sigtermAt"] = NowMs();
      changed = true;
    }
    if (since_ms >= options.cancel_grace_ms) {
      ::kill(-pid, SIGKILL);
      const auto status = local::ReadJson(p.status);
      if (status && JsonInt(*status, "runnerPid") == pid) {
        local::SignalJobGroup(static_cast<pid_t>(JsonInt(*status, "pid")), id, SIGKILL);
      }
      if (JsonInt(cancel, "sigkillAt") == 0) {
        cancel["sigkillAt"] = NowMs();
        changed = true;
      }
    }
    return changed ? RecordCancel(p, cancel) : "";
  }

  // The queue entry of a job that was submitted but never launched, cancelled or refused.
  std::optional<Waiting> WaitingFromRequest(const std::string& id) const {
    const JobPaths p = Paths(id);
    const auto request = local::ReadJson(p.request);
    if (!request || fs::exists(p.launch) || fs::exists(p.cancel) || fs::exists(p.failed))
      return std::nullopt;
    Waiting w;
    w.job_id = id;
    w.queued_at = JsonInt(*request, "queuedAt");
    w.need.cpus = JsonInt(*request, "cpus", 1);
    w.need.gpus = JsonInt(*request, "gpus");
    w.capsule_key = JsonString(*request, "capsuleKey");
    w.capsule_sha256 = JsonString(*request, "capsuleSha256");
    if (auto it = request->find("resumeFrom"); it != request->end() && it->is_array()) {
      for (const auto& earlier : *it)
        if (earlier.is_string()) w.resume_from.push_back(earlier.get<std::string>());
    }
    // Missing (a record from before it was kept): not an admin, the safe reading.
    if (auto it = request->find("ownerAdmin"); it != request->end() && it->is_boolean())
      w.owner_admin = it->get<bool>();
    return w;
  }

  bool IsQueued(const std::string& id) const {
    return std::any_of(queue.begin(), queue.end(),
                       [&](const Waiting& q) { return q.job_id == id; });
  }

  // Pending while the job waits in the queue or is being launched; nullopt otherwise. Advances
  // the queue first, so that every resync of a waiting job may start it.
  std::optional<Observation> ObserveQueued(const std::string& id) {
    std::unique_lock<std::mutex> lock(mu);
    if (IsQueued(id)) {
      lock.unlock();
      StartQueued(id);
      lock.lock();
    }
    Observation o;
    o.state = State::kPending;
    for (size_t i = 0; i < queue.size(); ++i) {
      if (queue[i].job_id != id) continue;
      o.reason = reasons::kWaitingForResources;
      o.message = WaitingMessage(i);
      return o;
    }
    if (launching.count(id)) {
      o.reason = reasons::kStarting;
      o.message = "unpacking the capsule and starting the runner";
      return o;
    }
    return std::nullopt;
  }

  // ---- Re-adoption ------------------------------------------------------------------------

  void Adopt() {
    std::error_code ec;
    for (const fs::directory_entry& entry :
         fs::directory_iterator(options.storage_root / "jobs", ec)) {
      const std::string id = entry.path().filename().string();
      if (!SafeJobId(id) || !fs::is_directory(entry.path() / "fleet", ec)) continue;
      const JobPaths p = Paths(id);
      const auto launch = local::ReadJson(p.launch);
      const auto request = local::ReadJson(p.request);
      if (local::LockHeld(p.lock)) {
        Held h;
        const nlohmann::json& src = launch ? *launch : request.value_or(nlohmann::json::object());
        h.need.cpus = JsonInt(src, "cpus", 1);
        auto gpus = src.find("gpus");
        if (gpus != src.end() && gpus->is_array()) {
          for (const auto& g : *gpus)
            if (g.is_number_integer()) h.gpu_ids.push_back(g.get<int>());
          h.need.gpus = static_cast<int64_t>(h.gpu_ids.size());
        } else if (gpus != src.end() && gpus->is_number_integer()) {
          h.need.gpus = gpus->get<int64_t>();
        }
        held[id] = h;
        continue;
      }
      // Waiting when the server stopped: back into the queue.
      if (auto w = WaitingFromRequest(id)) Enqueue(std::move(*w));
    }
  }
};

LocalFleet::LocalFleet(LocalFleetOptions options, objstore::ObjectStore& store)
    : impl_(std::make_unique<Impl>(std::move(options), store)) {
  impl_->notify = [this](const std::string& id) { Notify(id); };
  impl_->Adopt();
}

LocalFleet::~LocalFleet() = default;

Admission LocalFleet::Admit(const jobspec::JobSpec& spec) {
  return impl_->Admit(spec);
}

SubmitResult LocalFleet::Submit(const SubmitRequest& request) {
  SubmitResult result;
  const std::string& id = request.job_id;
  if (!SafeJobId(id)) {
    return {Status::Permanent(reasons::kSubmissionFailed, "\"" + id + "\" is not a valid job id"),
            ""};
  }
  const JobPaths p = impl_->Paths(id);
  result.handle = Handle(id);
  if (fs::exists(p.launch)) return result;  // launched before (running or ended)
  if (const auto failed = local::ReadJson(p.failed)) {
    return {Status::Permanent(JsonString(*failed, "reason"), JsonString(*failed, "message")), ""};
  }
  const Admission admission = impl_->Admit(request.spec);
  if (!admission.possible) return {Status::Permanent(reasons::kRejected, admission.message), ""};

  Impl::Waiting w;
  w.job_id = id;
  w.queued_at = request.queued_at;
  w.need = NeedOf(request.spec);
  w.capsule_key = request.capsule_key;
  w.capsule_sha256 = request.capsule_sha256;
  w.resume_from = request.spec.resume_from;
  w.owner_admin = request.owner_admin;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->launching.count(id) || impl_->IsQueued(id)) return result;
    std::error_code ec;
    fs::create_directories(p.fleet_dir, ec);
    if (ec) {
      return {Status::Retryable(reasons::kSubmissionFailed,
                                "cannot create " + p.fleet_dir.string() + ": " + ec.message()),
              ""};
    }
    // The queue entry survives a restart of the server (Adopt reads it back).
    if (!fs::exists(p.request)) {
      nlohmann::json doc = {{"jobId", id},
                            {"queuedAt", w.queued_at},
                            {"capsuleKey", w.capsule_key},
                            {"capsuleSha256", w.capsule_sha256},
                            {"cpus", w.need.cpus},
                            {"gpus", w.need.gpus},
                            {"resumeFrom", w.resume_from},
                            {"ownerAdmin", w.owner_admin}};
      if (Status written = WriteFileAtomic(p.request, doc.dump(2) + "\n"); !written.ok())
        return {Status::Retryable(reasons::kSubmissionFailed, written.message()), ""};
    }
    // A runner holds the lock but has not recorded its launch yet: it is launched.
    if (local::LockHeld(p.lock)) {
      impl_->held.try_emplace(id, Impl::Held{w.need, {}, std::nullopt});
      return result;
    }
    impl_->Enqueue(std::move(w));
  }
  const auto outcomes = impl_->StartQueued(id);
  auto it = outcomes.find(id);
  if (it != outcomes.end() && !it->second.ok && !it->second.cancelled) {
    return {it->second.retryable
                ? Status::Retryable(reasons::kSubmissionFailed, it->second.message)
                : Status::Permanent(reasons::kSubmissionFailed, it->second.message),
            ""};
  }
  return result;  // started, or waiting for resources
}

Observation LocalFleet::Observe(const std::string& job_id, const std::string& /*handle*/,
                                const jobspec::JobSpec& /*spec*/) {
  if (!SafeJobId(job_id)) return {};
  if (auto queued = impl_->ObserveQueued(job_id)) return *queued;
  Observation o = impl_->ObserveFiles(job_id);
  if (o.state == State::kUnknown) {
    // Submitted, but neither waiting nor launched: a launch was interrupted (a crash, or a
    // runner that let go of its lock before it ran). Queue it again.
    if (auto w = impl_->WaitingFromRequest(job_id)) {
      {
        std::lock_guard<std::mutex> lock(impl_->mu);
        if (!impl_->IsQueued(job_id) && !impl_->launching.count(job_id) &&
            !local::LockHeld(impl_->Paths(job_id).lock))
          impl_->Enqueue(std::move(*w));
      }
      if (auto queued = impl_->ObserveQueued(job_id)) return *queued;
      o = impl_->ObserveFiles(job_id);
    }
  }
  const bool ended =
      o.state == State::kSucceeded || o.state == State::kFailed || o.state == State::kCancelled;
  if (ended) {
    bool freed;
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      freed = impl_->held.erase(job_id) > 0;
    }
    if (freed) impl_->StartQueued();
  }
  return o;
}

Status LocalFleet::Cancel(const std::string& job_id, const std::string& /*handle*/,
                          int64_t since_ms) {
  if (!SafeJobId(job_id)) return Status::Ok();
  const JobPaths p = impl_->Paths(job_id);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = std::find_if(impl_->queue.begin(), impl_->queue.end(),
                           [&](const Impl::Waiting& q) { return q.job_id == job_id; });
    if (it != impl_->queue.end() || impl_->launching.count(job_id)) {
      // Waiting: leave the queue. Being launched: Launch sees cancel.json before the spawn
      // (or, if the runner is already started, the next Cancel signals it).
      if (fs::exists(p.cancel)) {
        if (it != impl_->queue.end()) impl_->queue.erase(it);
        return Status::Ok();
      }
      std::string err = impl_->RecordCancel(p, {{"requestedAt", NowMs()}});
      if (err.empty() && it != impl_->queue.end()) impl_->queue.erase(it);
      return RetryableUnlessEmpty(reasons::kCancelFailed, err);
    }
    if (!local::LockHeld(p.lock) && impl_->WaitingFromRequest(job_id)) {
      // Submitted but not queued here (an interrupted launch): make sure it never starts.
      return RetryableUnlessEmpty(reasons::kCancelFailed,
                                  impl_->RecordCancel(p, {{"requestedAt", NowMs()}}));
    }
    return RetryableUnlessEmpty(reasons::kCancelFailed, impl_->CancelRunning(job_id, since_ms));
  }
}

Status LocalFleet::CollectLogs(const std::string& /*job_id*/, const std::string& /*handle*/,
                               const fs::path& logs_dir) {
  // The runner writes driver.log into logs_dir itself: nothing to copy.
  std::error_code ec;
  fs::create_directories(logs_dir, ec);
  return RetryableUnlessEmpty(reasons::kLogCollectionFailed,
                              ec ? "cannot create " + logs_dir.string() + ": " + ec.message() : "");
}

Status LocalFleet::Release(const std::string& job_id, const std::string& /*handle*/) {
  if (!SafeJobId(job_id)) return Status::Ok();
  const JobPaths p = impl_->Paths(job_id);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->launching.count(job_id))
      return RetryableUnlessEmpty(reasons::kReleaseFailed, "the job is being started; try again");
    std::erase_if(impl_->queue, [&](const Impl::Waiting& q) { return q.job_id == job_id; });
    if (local::LockHeld(p.lock)) {
      // Released while running (e.g. past a deadline): stop it first.
      impl_->CancelRunning(job_id, impl_->options.cancel_grace_ms);
      return RetryableUnlessEmpty(reasons::kReleaseFailed,
                                  "the job's runner is still running; sent it SIGKILL");
    }
    impl_->held.erase(job_id);
  }
  // An entrypoint whose runner died (RunnerLost) may have outlived it.
  if (const auto status = local::ReadJson(p.status)) {
    local::SignalJobGroup(static_cast<pid_t>(JsonInt(*status, "pid")), job_id, SIGKILL);
  }
  std::error_code ec;
  fs::remove_all(p.capsule_dir, ec);
  if (ec)
    return RetryableUnlessEmpty(reasons::kReleaseFailed,
                                "cannot remove " + p.capsule_dir.string() + ": " + ec.message());
  fs::remove(p.capsule_zip, ec);
  if (ec)
    return RetryableUnlessEmpty(reasons::kReleaseFailed,
                                "cannot remove " + p.capsule_zip.string() + ": " + ec.message());
  // A released job never re-enters the queue after a restart.
  fs::remove(p.request, ec);
  if (ec)
    return RetryableUnlessEmpty(reasons::kReleaseFailed,
                                "cannot remove " + p.request.string() + ": " + ec.message());
  impl_->StartQueued();
  return Status::Ok();
}

Status LocalFleet::Hold(const std::string& holder, int64_t cpus, int64_t gpus, const fs::path& lock,
                        std::vector<int>* gpu_ids) {
  std::lock_guard<std::mutex> guard(impl_->mu);
  impl_->DropEnded();
  if (auto it = impl_->held.find(holder); it != impl_->held.end()) {
    *gpu_ids = it->second.gpu_ids;
    return Status::Ok();
  }
  const Need need{std::max<int64_t>(cpus, 1), gpus};
  if (!impl_->Fits(need)) {
    return Status::Retryable(reasons::kWaitingForResources, impl_->WaitingFor(need));
  }
  Impl::Held h{need, impl_->FreeGpus(need.gpus), lock};
  *gpu_ids = h.gpu_ids;
  impl_->held[holder] = std::move(h);
  impl_->launching.insert(holder);  // its process does not hold the lock yet
  return Status::Ok();
}

void LocalFleet::HoldStarted(const std::string& holder) {
  std::lock_guard<std::mutex> guard(impl_->mu);
  impl_->launching.erase(holder);
}

void LocalFleet::Readopt(const std::string& holder, int64_t cpus, const std::vector<int>& gpu_ids,
                         const fs::path& lock) {
  std::lock_guard<std::mutex> guard(impl_->mu);
  impl_->held.try_emplace(
      holder,
      Impl::Held{
          {std::max<int64_t>(cpus, 1), static_cast<int64_t>(gpu_ids.size())}, gpu_ids, lock});
}

void LocalFleet::Unhold(const std::string& holder) {
  {
    std::lock_guard<std::mutex> guard(impl_->mu);
    impl_->launching.erase(holder);
    if (impl_->held.erase(holder) == 0) return;
  }
  impl_->StartQueued();  // what it held may be what the head of the queue waits for
}

nlohmann::json LocalFleet::Capacity() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->DropEnded();
  const Need used = impl_->InUse();
  nlohmann::json jobs = nlohmann::json::array();
  size_t running = 0;
  size_t playgrounds = 0;
  for (const auto& [id, h] : impl_->held) {
    if (h.lock) {  // not a job: counted in the totals, not listed (its id is not a job's)
      ++playgrounds;
      continue;
    }
    const bool starting = impl_->launching.count(id) > 0;
    if (!starting) ++running;
    jobs.push_back({{"id", id},
                    {"cpus", h.need.cpus},
                    {"gpus", h.need.gpus},
                    {"state", starting ? "starting" : "running"}});
  }
  for (const Impl::Waiting& w : impl_->queue) {
    jobs.push_back(
        {{"id", w.job_id}, {"cpus", w.need.cpus}, {"gpus", w.need.gpus}, {"state", "waiting"}});
  }
  return {{"fleet", Kind()},
          {"host", impl_->host},
          {"cpus", impl_->options.resources.cpus},
          {"gpus", impl_->options.resources.gpus},
          {"memoryBytes", impl_->options.resources.memory_bytes},
          {"cpusInUse", used.cpus},
          {"gpusInUse", used.gpus},
          {"running", running},
          {"waiting", impl_->queue.size()},
          {"playgrounds", playgrounds},
          {"jobs", jobs}};
}

}  // namespace starforge::fleet
