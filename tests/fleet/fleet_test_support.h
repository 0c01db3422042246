// Helpers for the local fleet tests: a scratch storage root with a filesystem object store, real
// capsules built from small Python jobs, polling, and process inspection.
#pragma once

#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "starforge/capsule/capsule.h"
#include "starforge/capsule/collect.h"
#include "starforge/fleet/local_fleet.h"
#include "starforge/jobspec/parse.h"
#include "starforge/objstore/fs_store.h"
#include "support/files.h"
#include "support/temp_dir.h"

namespace starforge::fleet::testing {

namespace fs = std::filesystem;

using support::ReadFile;
using support::TempDir;
using support::WriteFile;

// Sets an environment variable for the lifetime of the object.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

inline jobspec::JobSpec ParseSpec(const std::string& yaml) {
  jobspec::ParseResult r = jobspec::Parse(yaml, jobspec::Defaults{});
  if (!r.ok()) {
    ADD_FAILURE() << "bad test JobSpec: " << r.errors.front().path << ": "
                  << r.errors.front().message << "\n"
                  << yaml;
    return {};
  }
  return *r.spec;
}

// "name: …, entrypoint: …, pools: [{name: main<pool>}]" plus `extra` top-level YAML.
inline std::string SpecYaml(const std::string& entrypoint, const std::string& pool = "",
                            const std::string& extra = "") {
  return "name: fleet-test\nimage: python:3.11\nentrypoint: " + entrypoint +
         "\npools: [{name: main" + pool + "}]\n" + extra;
}

// (state, pid) from /proc/<pid>/stat; state '\0' when the process is gone.
inline std::pair<char, pid_t> ProcStateAndParent(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos || close + 4 > text.size()) return {'\0', 0};
  std::istringstream rest(text.substr(close + 2));
  char state = '\0';
  pid_t ppid = 0;
  rest >> state >> ppid;
  return {state, ppid};
}

// Gone, or a zombie nobody reaped (PID 1 of a container may not reap).
inline bool IsDead(pid_t pid) {
  const char state = ProcStateAndParent(pid).first;
  return state == '\0' || state == 'Z' || state == 'X';
}

// Zombie children of this process (a spawn must reap its intermediate child).
inline std::vector<pid_t> OurZombies() {
  std::vector<pid_t> zombies;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return zombies;
  while (dirent* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    const auto [state, ppid] = ProcStateAndParent(pid);
    if (ppid == ::getpid() && state == 'Z') zombies.push_back(pid);
  }
  ::closedir(proc);
  return zombies;
}

// A storage root with a filesystem object store, and jobs built from Python scripts.
class FleetFixture : public ::testing::Test {
 protected:
  void SetUp() override { store_ = objstore::OpenFilesystem((root() / "objects").string()); }

  fs::path root() const { return tmp_.path() / "root"; }
  fs::path JobDir(const std::string& id) const { return root() / "jobs" / id; }
  std::string DriverLog(const std::string& id) const {
    return ReadFile(JobDir(id) / "logs" / "driver.log");
  }

  LocalFleetOptions Options(int64_t cpus = 2, int64_t gpus = 0) const {
    LocalFleetOptions o;
    o.storage_root = root();
    o.resources = {cpus, gpus, 8LL << 30};
    o.cancel_grace_ms = 500;
    o.heartbeat_stale_ms = 2000;
    return o;
  }

  // Builds a capsule of `files` (main.py = script) with `spec_yaml`, stores it, and returns the
  // request that submits it as `id`.
  SubmitRequest Job(const std::string& id, const std::map<std::string, std::string>& files,
                    const std::string& spec_yaml, int64_t queued_at = 0) {
    const fs::path code = tmp_.path() / ("code-" + id);
    for (const auto& [path, content] : files)
      WriteFile(code / path, content);
    capsule::CollectResult collected = capsule::Collect(code);
    EXPECT_TRUE(collected.ok());
    SubmitRequest r;
    r.job_id = id;
    r.spec = ParseSpec(spec_yaml);
    r.queued_at = queued_at;
    capsule::BuildOptions opts;
    opts.output_dir = tmp_.path() / "capsules";
    fs::create_directories(opts.output_dir);
    opts.threads = 1;
    capsule::BuildResult built = capsule::Build(collected.files, r.spec, opts);
    EXPECT_TRUE(built.ok()) << (built.errors.empty() ? "" : built.errors.front());
    r.capsule_sha256 = built.sha256;
    r.capsule_key = capsule::ObjectKey(built.sha256);
    auto put = store_->PutFile(r.capsule_key, built.path.string());
    EXPECT_TRUE(put.ok()) << put.status().message();
    return r;
  }

  SubmitRequest PyJob(const std::string& id, const std::string& script,
                      const std::string& pool = "", const std::string& extra = "",
                      int64_t queued_at = 0) {
    return Job(id, {{"main.py", script}}, SpecYaml("python3 main.py", pool, extra), queued_at);
  }

  // Observes until the state is one of `states` (or 30 s pass); returns the last observation.
  static Observation WaitFor(Fleet& fleet, const std::string& id, std::set<State> states,
                             std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    Observation o;
    while (true) {
      o = fleet.Observe(id, "local:" + id, {});
      if (states.count(o.state) || std::chrono::steady_clock::now() > deadline) return o;
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
  }

  static Observation WaitEnded(Fleet& fleet, const std::string& id) {
    return WaitFor(fleet, id, {State::kSucceeded, State::kFailed, State::kCancelled});
  }

  // Waits until `path` contains `text`.
  static bool WaitForText(const fs::path& path, const std::string& text,
                          std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (ReadFile(path).find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  TempDir tmp_;
  std::unique_ptr<objstore::ObjectStore> store_;
  // Fast heartbeats, so that status.json moves quickly.
  ScopedEnv heartbeat_{"FORGE_RUNNER_HEARTBEAT_S", "0.2"};
};

}  // namespace starforge::fleet::testing
