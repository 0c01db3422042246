// The local fleet's sandbox (bubblewrap) as a hostile job meets it: the store, the server's
// /proc, other jobs' directories and the server's secrets are out of reach, while a normal job
// runs, writes its job directory and can be cancelled as before.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "fleet_test_support.h"

namespace starforge::fleet {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using testing::FleetFixture;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::ScopedEnv;

class LocalSandboxTest : public FleetFixture {
 protected:
  void SetUp() override {
    FleetFixture::SetUp();
    SandboxProbe probe = ProbeSandbox();
    // bubblewrap is one of the project's dependencies (scripts/deps.txt): no skipping.
    ASSERT_TRUE(probe.sandbox) << probe.error;
    sandbox_ = *probe.sandbox;
  }

  LocalFleetOptions SandboxedOptions() const {
    LocalFleetOptions o = Options();
    o.sandbox = sandbox_;
    return o;
  }

  // Pids of live processes whose environment has FORGE_JOB_ID=<id>.
  static std::vector<pid_t> JobProcesses(const std::string& id) {
    std::vector<pid_t> found;
    DIR* proc = ::opendir("/proc");
    while (proc != nullptr) {
      dirent* e = ::readdir(proc);
      if (e == nullptr) break;
      const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      if (pid <= 0) continue;
      std::ifstream env("/proc/" + std::string(e->d_name) + "/environ", std::ios::binary);
      std::string entry;
      while (std::getline(env, entry, '\0')) {
        if (entry == "FORGE_JOB_ID=" + id) found.push_back(pid);
      }
    }
    if (proc != nullptr) ::closedir(proc);
    return found;
  }

  LocalSandbox sandbox_;
};

TEST_F(LocalSandboxTest, AHostileJobReachesNothingOfTheServerOrOtherJobs) {
  // What a job must not reach: the control plane's store, another job's files, the server's
  // secrets (in this process's environment, which a plain child would inherit).
  const fs::path state = tmp_.path() / "root-state";
  testing::WriteFile(state / "starforge.db", "the store");
  testing::WriteFile(JobDir("j-other") / "checkpoint.txt", "someone else's");
  ScopedEnv k8s("FORGE_K8S_TOKEN", "k8s-token-of-the-server");
  ScopedEnv s3("FORGE_S3_SECRET_KEY", "s3-secret-of-the-server");
  ScopedEnv other("SERVER_ONLY_VARIABLE", "server-only");

  const std::string script = R"(import json, os
r = {}
def attempt(name, fn):
    try:
        fn()
        r[name] = "ok"
    except Exception as e:
        r[name] = type(e).__name__
attempt("store", lambda: open(")" +
                             (state / "starforge.db").string() +
                             R"(").read())
attempt("server_environ", lambda: open("/proc/)" +
                             std::to_string(::getpid()) +
                             R"(/environ", "rb").read())
attempt("other_read", lambda: open(")" +
                             (JobDir("j-other") / "checkpoint.txt").string() +
                             R"(").read())
attempt("other_write", lambda: open(")" +
                             (JobDir("j-other") / "planted").string() +
                             R"(", "w").write("x"))
attempt("fleet_write", lambda: open(")" +
                             (JobDir("j-evil") / "fleet" / "launch.json").string() +
                             R"(", "w").write("{}"))
r["jobs"] = sorted(os.listdir(")" +
                             (root() / "jobs").string() + R"("))
r["root"] = sorted(os.listdir(")" +
                             root().string() + R"("))
r["env"] = dict(os.environ)
r["uid"] = os.getuid()
r["pids"] = [int(p) for p in os.listdir("/proc") if p.isdigit()]
with open(os.path.join(os.environ["FORGE_JOB_DIR"], "probe.json"), "w") as f:
    json.dump(r, f)
print("probed")
)";
  LocalFleet fleet(SandboxedOptions(), *store_);
  ASSERT_TRUE(fleet.Submit(PyJob("j-evil", script)).status.ok());
  Observation o = WaitEnded(fleet, "j-evil");
  ASSERT_EQ(o.state, State::kSucceeded) << o.reason << ": " << o.message << "\n"
                                        << ReadFile(JobDir("j-evil") / "logs" / "runner.log");
  EXPECT_EQ(DriverLog("j-evil"), "probed\n");
  const auto r = nlohmann::json::parse(ReadFile(JobDir("j-evil") / "probe.json"));
  for (const char* attempt :
       {"store", "server_environ", "other_read", "other_write", "fleet_write"})
    EXPECT_NE(r.at(attempt), "ok") << attempt;
  EXPECT_FALSE(fs::exists(JobDir("j-other") / "planted"));
  EXPECT_EQ(ReadFile(JobDir("j-other") / "checkpoint.txt"), "someone else's");
  EXPECT_TRUE(fs::exists(JobDir("j-evil") / "fleet" / "launch.json"));
  EXPECT_NE(ReadFile(JobDir("j-evil") / "fleet" / "launch.json"), "{}");
  // The storage root shows the job's own directory only (no objects/, no other job).
  EXPECT_THAT(r.at("jobs"), ElementsAre("j-evil"));
  EXPECT_THAT(r.at("root"), ElementsAre("jobs"));
  // Nothing of the server's environment; the documented job variables are there.
  const nlohmann::json& env = r.at("env");
  for (const char* name : {"FORGE_K8S_TOKEN", "FORGE_S3_SECRET_KEY", "SERVER_ONLY_VARIABLE"})
    EXPECT_FALSE(env.contains(name)) << name;
  EXPECT_THAT(env.dump(), Not(HasSubstr("of-the-server")));
  EXPECT_EQ(env.at("FORGE_JOB_ID"), "j-evil");
  EXPECT_EQ(env.at("FORGE_STORAGE_ROOT"), root().string());
  // Its own PID namespace: the server's pid is not among the few it sees.
  EXPECT_THAT(r.at("pids").get<std::vector<int>>(), Not(Contains(::getpid())));
  EXPECT_LT(r.at("pids").size(), 10u);
  if (::geteuid() == 0) {
    EXPECT_EQ(r.at("uid"), 65534);  // root's jobs run as nobody
  }
}

TEST_F(LocalSandboxTest, ANormalJobRunsAndWritesItsJobDirectory) {
  LocalFleet fleet(SandboxedOptions(), *store_);
  ASSERT_TRUE(fleet
                  .Submit(PyJob("j-fine", R"(import os
print("hello from the sandbox")
with open(os.path.join(os.environ["FORGE_JOB_DIR"], "checkpoint.txt"), "w") as f:
    f.write("step 10\n")
with open("/tmp/scratch", "w") as f:
    f.write("private")
)"))
                  .status.ok());
  Observation o = WaitEnded(fleet, "j-fine");
  EXPECT_EQ(o.state, State::kSucceeded) << o.reason << ": " << o.message;
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(DriverLog("j-fine"), "hello from the sandbox\n");
  EXPECT_EQ(ReadFile(JobDir("j-fine") / "checkpoint.txt"), "step 10\n");
  const auto status = nlohmann::json::parse(ReadFile(JobDir("j-fine") / "status.json"));
  EXPECT_EQ(status.at("state"), "succeeded");
  EXPECT_FALSE(fs::exists("/tmp/scratch"));  // its /tmp was its own
  EXPECT_TRUE(fleet.Release("j-fine", "local:j-fine").ok());
  EXPECT_FALSE(fs::exists(JobDir("j-fine") / "capsule"));
}

// resumeFrom: the earlier job's directory is readable at its own path, read-only; a job it does
// not name stays out of reach (docs/security.md, "Resuming from an earlier job").
TEST_F(LocalSandboxTest, AJobReadsTheCheckpointsOfTheJobItResumesFromAndCannotWriteThem) {
  LocalFleet fleet(SandboxedOptions(), *store_);
  ASSERT_TRUE(fleet
                  .Submit(PyJob("j-first", R"(import os
with open(os.path.join(os.environ["FORGE_JOB_DIR"], "checkpoint.txt"), "w") as f:
    f.write("step 100\n")
)"))
                  .status.ok());
  Observation o = WaitEnded(fleet, "j-first");
  ASSERT_EQ(o.state, State::kSucceeded) << o.reason << ": " << o.message;
  testing::WriteFile(JobDir("j-other") / "checkpoint.txt", "someone else's");

  const std::string script = R"(import json, os
r = {"dirs": os.environ.get("FORGE_RESUME_DIRS", "")}
def attempt(name, fn):
    try:
        r[name] = fn()
    except Exception as e:
        r[name] = type(e).__name__
first = r["dirs"].split(":")[0]
attempt("read", lambda: open(os.path.join(first, "checkpoint.txt")).read())
attempt("overwrite", lambda: open(os.path.join(first, "checkpoint.txt"), "w").write("x"))
attempt("create", lambda: open(os.path.join(first, "planted"), "w").write("x"))
attempt("other", lambda: open(")" +
                             (JobDir("j-other") / "checkpoint.txt").string() +
                             R"(").read())
r["jobs"] = sorted(os.listdir(os.path.dirname(first)))
with open(os.path.join(os.environ["FORGE_JOB_DIR"], "probe.json"), "w") as f:
    json.dump(r, f)
)";
  ASSERT_TRUE(fleet.Submit(PyJob("j-second", script, "", "resumeFrom: [j-first]\n")).status.ok());
  o = WaitEnded(fleet, "j-second");
  ASSERT_EQ(o.state, State::kSucceeded) << o.reason << ": " << o.message << "\n"
                                        << ReadFile(JobDir("j-second") / "logs" / "runner.log");
  const auto r = nlohmann::json::parse(ReadFile(JobDir("j-second") / "probe.json"));
  EXPECT_EQ(r.at("dirs"), JobDir("j-first").string());
  EXPECT_EQ(r.at("read"), "step 100\n");
  EXPECT_EQ(r.at("overwrite"), "OSError");  // EROFS
  EXPECT_EQ(r.at("create"), "OSError");
  EXPECT_NE(r.at("other"), "someone else's");
  EXPECT_THAT(r.at("jobs"), ElementsAre("j-first", "j-second"));
  EXPECT_EQ(ReadFile(JobDir("j-first") / "checkpoint.txt"), "step 100\n");
  EXPECT_FALSE(fs::exists(JobDir("j-first") / "planted"));
}

// A server that lost its sandbox (a restart without bubblewrap) launches only admins' jobs: one
// admitted earlier for a non-admin fails instead of running with the server's rights.
TEST_F(LocalSandboxTest, WithoutASandboxOnlyAdminsJobsAreLaunched) {
  LocalFleetOptions o = Options();
  o.unsandboxed_admins_only = true;
  LocalFleet fleet(o, *store_);
  SubmitRequest user_job = PyJob("j-user", "print('ran')\n");
  const SubmitResult refused = fleet.Submit(user_job);
  EXPECT_FALSE(refused.status.ok());
  EXPECT_FALSE(refused.status.retryable());
  EXPECT_THAT(refused.status.message(), HasSubstr("not an admin"));
  EXPECT_FALSE(fs::exists(JobDir("j-user") / "fleet" / "launch.json"));
  SubmitRequest admin_job = PyJob("j-admin", "print('ran')\n");
  admin_job.owner_admin = true;
  ASSERT_TRUE(fleet.Submit(admin_job).status.ok());
  EXPECT_EQ(WaitEnded(fleet, "j-admin").state, State::kSucceeded);
}

TEST_F(LocalSandboxTest, CancelReachesTheJobAndSigkillEndsTheWholeSandbox) {
  ScopedEnv runner_grace("FORGE_RUNNER_GRACE_S", "60");
  LocalFleet fleet(SandboxedOptions(), *store_);
  ASSERT_TRUE(fleet
                  .Submit(PyJob("j-term", R"(import signal, sys, time
def stop(signum, frame):
    print("got SIGTERM", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    time.sleep(0.02)
)"))
                  .status.ok());
  ASSERT_TRUE(WaitForText(JobDir("j-term") / "logs" / "driver.log", "ready\n"));
  EXPECT_TRUE(fleet.Cancel("j-term", "local:j-term", 0).ok());
  Observation o = WaitEnded(fleet, "j-term");
  EXPECT_EQ(o.state, State::kCancelled) << o.reason << ": " << o.message;
  EXPECT_THAT(DriverLog("j-term"), HasSubstr("got SIGTERM\n"));

  ASSERT_TRUE(fleet
                  .Submit(PyJob("j-stubborn", R"(import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(0.02)
)"))
                  .status.ok());
  ASSERT_TRUE(WaitForText(JobDir("j-stubborn") / "logs" / "driver.log", "ready\n"));
  EXPECT_TRUE(fleet.Cancel("j-stubborn", "local:j-stubborn", 0).ok());
  ASSERT_TRUE(WaitForText(JobDir("j-stubborn") / "logs" / "driver.log", "received SIGTERM"));
  EXPECT_EQ(fleet.Observe("j-stubborn", "local:j-stubborn", {}).state, State::kRunning);
  EXPECT_TRUE(fleet.Cancel("j-stubborn", "local:j-stubborn", 500).ok());  // = cancel_grace_ms
  o = WaitEnded(fleet, "j-stubborn");
  EXPECT_EQ(o.state, State::kCancelled) << o.reason << ": " << o.message;
  std::vector<pid_t> left = JobProcesses("j-stubborn");
  for (int i = 0; i < 100 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    left = JobProcesses("j-stubborn");
  }
  EXPECT_THAT(left, ::testing::IsEmpty());
}

}  // namespace
}  // namespace starforge::fleet
