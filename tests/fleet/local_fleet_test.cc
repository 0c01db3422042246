// The local fleet with real capsules, real runners (python3) and real signals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <atomic>
#include <mutex>
#include <sstream>
#include <thread>

#include "fleet_test_support.h"

namespace starforge::fleet {
namespace {

namespace fs = std::filesystem;
using testing::FleetFixture;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::ScopedEnv;

constexpr const char* kHello = R"(import os
print("hello from the job")
print("job id " + os.environ["FORGE_JOB_ID"])
print("cuda=[" + os.environ.get("CUDA_VISIBLE_DEVICES", "unset") + "]")
with open(os.path.join(os.environ["FORGE_JOB_DIR"], "checkpoint.txt"), "w") as f:
    f.write("step 10\n")
)";

// Runs until the file named by $GATE exists.
constexpr const char* kGated = R"(import os, time
print("started cuda=[" + os.environ.get("CUDA_VISIBLE_DEVICES", "") + "]", flush=True)
while not os.path.exists(os.environ["GATE"]):
    time.sleep(0.02)
print("done")
)";

class LocalFleetTest : public FleetFixture {
 protected:
  std::string GateYaml(const std::string& name) {
    gates_[name] = tmp_.path() / ("gate-" + name);
    return "env: {GATE: " + gates_[name].string() + "}\n";
  }
  void Open(const std::string& name) { testing::WriteFile(gates_[name], "go"); }

  static int64_t LaunchPid(const fs::path& job_dir) {
    return nlohmann::json::parse(ReadFile(job_dir / "fleet" / "launch.json"))
        .at("pid")
        .get<int64_t>();
  }

  std::map<std::string, fs::path> gates_;
};

TEST_F(LocalFleetTest, RunsAJobToSuccessAndReleasesItsWorkDirs) {
  LocalFleet fleet(Options(), *store_);
  SubmitRequest r = PyJob("j-ok", kHello);
  SubmitResult s = fleet.Submit(r);
  ASSERT_TRUE(s.status.ok()) << s.status.message();
  EXPECT_EQ(s.handle, "local:j-ok");

  Observation o = WaitEnded(fleet, "j-ok");
  EXPECT_EQ(o.state, State::kSucceeded) << o.reason << ": " << o.message;
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(DriverLog("j-ok"), "hello from the job\njob id j-ok\ncuda=[]\n");
  const int64_t pid = LaunchPid(JobDir("j-ok"));
  ASSERT_FALSE(o.events.empty());
  EXPECT_EQ(o.events[0].type, "Normal");
  EXPECT_EQ(o.events[0].reason, "Started");
  EXPECT_THAT(o.events[0].message, HasSubstr("runner pid " + std::to_string(pid) + " started on "));
  EXPECT_EQ(o.events[0].source, "fleet:local");
  // The same answer (and events) every time.
  Observation again = fleet.Observe("j-ok", s.handle, {});
  EXPECT_EQ(again.state, State::kSucceeded);
  EXPECT_EQ(again.events.size(), o.events.size());
  // Submitting again starts nothing.
  EXPECT_EQ(fleet.Submit(r).handle, "local:j-ok");
  EXPECT_EQ(LaunchPid(JobDir("j-ok")), pid);

  EXPECT_TRUE(fleet.CollectLogs("j-ok", s.handle, JobDir("j-ok") / "logs").ok());
  EXPECT_TRUE(fs::is_directory(JobDir("j-ok") / "capsule"));
  EXPECT_TRUE(fleet.Release("j-ok", s.handle).ok());
  EXPECT_TRUE(fleet.Release("j-ok", s.handle).ok());  // idempotent
  EXPECT_FALSE(fs::exists(JobDir("j-ok") / "capsule"));
  EXPECT_FALSE(fs::exists(JobDir("j-ok") / "fleet" / "capsule.zip"));
  EXPECT_EQ(DriverLog("j-ok"), "hello from the job\njob id j-ok\ncuda=[]\n");
  EXPECT_EQ(ReadFile(JobDir("j-ok") / "checkpoint.txt"), "step 10\n");
  EXPECT_TRUE(fs::exists(JobDir("j-ok") / "status.json"));
  EXPECT_EQ(fleet.Observe("j-ok", s.handle, {}).state, State::kSucceeded);

  // The runner was never our child; the launcher's intermediate child was reaped.
  EXPECT_THAT(testing::OurZombies(), ::testing::IsEmpty());
}

TEST_F(LocalFleetTest, NonZeroExitIsAppFailedWithItsCode) {
  LocalFleet fleet(Options(), *store_);
  ASSERT_TRUE(
      fleet.Submit(PyJob("j-three", "import sys\nprint('bad')\nsys.exit(3)\n")).status.ok());
  Observation o = WaitEnded(fleet, "j-three");
  EXPECT_EQ(o.state, State::kFailed);
  EXPECT_EQ(o.reason, "AppFailed");
  EXPECT_EQ(o.exit_code, 3);
  EXPECT_EQ(o.message, "the entrypoint exited with code 3");
  ASSERT_EQ(o.events.size(), 2u);
  EXPECT_EQ(o.events[1].type, "Warning");
  EXPECT_EQ(o.events[1].reason, "AppFailed");
}

TEST_F(LocalFleetTest, MissingEntrypointIsNotRunnable) {
  LocalFleet fleet(Options(), *store_);
  ASSERT_TRUE(fleet
                  .Submit(Job("j-missing", {{"main.py", "print(1)\n"}},
                              testing::SpecYaml("./no-such-program --flag")))
                  .status.ok());
  Observation o = WaitEnded(fleet, "j-missing");
  EXPECT_EQ(o.state, State::kFailed);
  EXPECT_EQ(o.reason, "EntrypointNotRunnable");
  EXPECT_EQ(o.exit_code, 127);
  EXPECT_THAT(o.message, HasSubstr("no-such-program"));
}

TEST_F(LocalFleetTest, ACapsuleThatIsNotThereOrNotWhatWasAskedForFailsSubmission) {
  LocalFleet fleet(Options(), *store_);
  SubmitRequest r = PyJob("j-gone", "print(1)\n");
  r.capsule_key = "capsules/sha256-0000.zip";
  SubmitResult s = fleet.Submit(r);
  EXPECT_FALSE(s.status.ok());
  EXPECT_EQ(s.status.reason(), "SubmissionFailed");
  EXPECT_FALSE(s.status.retryable());
  EXPECT_THAT(s.status.message(), HasSubstr("capsules/sha256-0000.zip is not in the object store"));
  Observation o = fleet.Observe("j-gone", "local:j-gone", {});
  EXPECT_EQ(o.state, State::kFailed);
  EXPECT_EQ(o.reason, "SubmissionFailed");

  SubmitRequest bad = PyJob("j-bad-digest", "print(2)\n");
  bad.capsule_sha256 = std::string(64, 'a');
  s = fleet.Submit(bad);
  EXPECT_FALSE(s.status.ok());
  EXPECT_THAT(s.status.message(), HasSubstr("not " + std::string(64, 'a')));
  EXPECT_FALSE(fs::exists(JobDir("j-bad-digest") / "capsule"));
  EXPECT_EQ(fleet.Capacity()["cpusInUse"], 0);
}

TEST_F(LocalFleetTest, CancelDeliversSigtermToTheJob) {
  LocalFleet fleet(Options(), *store_);
  ASSERT_TRUE(fleet
                  .Submit(PyJob("j-term", R"(import signal, sys, time
def stop(signum, frame):
    print("got SIGTERM, saving", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    time.sleep(0.02)
)"))
                  .status.ok());
  ASSERT_TRUE(WaitForText(JobDir("j-term") / "logs" / "driver.log", "ready\n"));
  EXPECT_EQ(fleet.Observe("j-term", "local:j-term", {}).state, State::kRunning);
  EXPECT_TRUE(fleet.Cancel("j-term", "local:j-term", 0).ok());
  Observation o = WaitEnded(fleet, "j-term");
  EXPECT_EQ(o.state, State::kCancelled) << o.reason << ": " << o.message;
  EXPECT_EQ(o.message, "cancelled: the job exited with code 0 after SIGTERM");
  EXPECT_THAT(DriverLog("j-term"), HasSubstr("got SIGTERM, saving\n"));
  bool stopping = false;
  for (const FleetEvent& e : o.events)
    stopping = stopping || e.reason == "Stopping";
  EXPECT_TRUE(stopping);
  // A cancel after the end changes nothing.
  EXPECT_TRUE(fleet.Cancel("j-term", "local:j-term", 10'000).ok());
  EXPECT_EQ(fleet.Observe("j-term", "local:j-term", {}).state, State::kCancelled);
}

TEST_F(LocalFleetTest, CancelEscalatesToSigkillAfterTheGracePeriod) {
  // The runner's own grace is long: only the fleet's SIGKILL can end this job in time.
  ScopedEnv runner_grace("FORGE_RUNNER_GRACE_S", "60");
  LocalFleet fleet(Options(), *store_);
  ASSERT_TRUE(fleet
                  .Submit(PyJob("j-stubborn", R"(import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(0.02)
)"))
                  .status.ok());
  ASSERT_TRUE(WaitForText(JobDir("j-stubborn") / "logs" / "driver.log", "ready\n"));
  const auto status = nlohmann::json::parse(ReadFile(JobDir("j-stubborn") / "status.json"));
  const pid_t entrypoint = status.at("pid").get<pid_t>();
  const pid_t runner = static_cast<pid_t>(LaunchPid(JobDir("j-stubborn")));

  EXPECT_TRUE(fleet.Cancel("j-stubborn", "local:j-stubborn", 0).ok());
  ASSERT_TRUE(WaitForText(JobDir("j-stubborn") / "logs" / "driver.log", "received SIGTERM"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(fleet.Observe("j-stubborn", "local:j-stubborn", {}).state, State::kRunning);
  EXPECT_FALSE(testing::IsDead(entrypoint));

  EXPECT_TRUE(fleet.Cancel("j-stubborn", "local:j-stubborn", 500).ok());  // = cancel_grace_ms
  Observation o = WaitEnded(fleet, "j-stubborn");
  EXPECT_EQ(o.state, State::kCancelled);
  EXPECT_EQ(o.message, "cancelled: the runner was killed with SIGKILL after the grace period");
  bool killing = false;
  for (const FleetEvent& e : o.events)
    killing = killing || e.reason == "Killing";
  EXPECT_TRUE(killing);
  for (int i = 0; i < 100 && !(testing::IsDead(entrypoint) && testing::IsDead(runner)); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(testing::IsDead(entrypoint));
  EXPECT_TRUE(testing::IsDead(runner));
}

TEST_F(LocalFleetTest, CancelNeverSignalsARecycledPid) {
  // launch.json names a pid that now belongs to another process (different start time).
  const pid_t stranger = ::fork();
  ASSERT_GE(stranger, 0);
  if (stranger == 0) {
    ::setpgid(0, 0);
    ::execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(stranger, stranger);
  const fs::path fleet_dir = JobDir("j-recycled") / "fleet";
  fs::create_directories(fleet_dir);
  const int fd = ::open((fleet_dir / "run.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // "the runner" still holds its lock
  std::ifstream stat("/proc/" + std::to_string(stranger) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  for (int i = 0; i < 20; ++i)
    fields >> field;  // field 22
  const uint64_t start = std::stoull(field);
  auto write_launch = [&](uint64_t start_time) {
    testing::WriteFile(fleet_dir / "launch.json",
                       nlohmann::json{{"pid", stranger}, {"startTime", start_time}}.dump());
  };

  LocalFleet fleet(Options(), *store_);
  write_launch(start + 1);
  EXPECT_TRUE(fleet.Cancel("j-recycled", "local:j-recycled", 0).ok());
  EXPECT_TRUE(fleet.Cancel("j-recycled", "local:j-recycled", 60'000).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int status = 0;
  EXPECT_EQ(::waitpid(stranger, &status, WNOHANG), 0) << "a stranger was signalled";

  write_launch(start);  // now it is "our runner"
  EXPECT_TRUE(fleet.Cancel("j-recycled", "local:j-recycled", 0).ok());
  ASSERT_EQ(::waitpid(stranger, &status, 0), stranger);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  ::close(fd);
}

TEST_F(LocalFleetTest, JobsWaitInFifoOrderForCpus) {
  LocalFleet fleet(Options(/*cpus=*/1), *store_);
  std::mutex mu;
  std::vector<std::string> notified;
  fleet.SetNotify([&](const std::string& id) {
    std::lock_guard<std::mutex> lock(mu);
    notified.push_back(id);
  });
  // Submitted out of order: the queue follows queued_at.
  SubmitRequest first = PyJob("j-first", kGated, "", GateYaml("first"), 100);
  SubmitRequest second = PyJob("j-second", kHello, "", "", 200);
  SubmitRequest third = PyJob("j-third", kHello, "", "", 300);
  ASSERT_TRUE(fleet.Submit(first).status.ok());
  EXPECT_EQ(WaitFor(fleet, "j-first", {State::kRunning}).state, State::kRunning);
  SubmitResult s3 = fleet.Submit(third);
  ASSERT_TRUE(s3.status.ok());
  EXPECT_EQ(s3.handle, "local:j-third");
  ASSERT_TRUE(fleet.Submit(second).status.ok());

  Observation o2 = fleet.Observe("j-second", "local:j-second", {});
  EXPECT_EQ(o2.state, State::kPending);
  EXPECT_EQ(o2.reason, "WaitingForResources");
  EXPECT_EQ(o2.message, "waiting for 1 CPU: 1 of 1 in use by 1 job");
  Observation o3 = fleet.Observe("j-third", "local:j-third", {});
  EXPECT_EQ(o3.message, "waiting for 1 CPU: 1 of 1 in use by 1 job; 1 job ahead of it");
  EXPECT_FALSE(fs::exists(JobDir("j-second") / "capsule"));

  nlohmann::json cap = fleet.Capacity();
  EXPECT_EQ(cap["fleet"], "local");
  EXPECT_EQ(cap["cpus"], 1);
  EXPECT_EQ(cap["cpusInUse"], 1);
  EXPECT_EQ(cap["running"], 1);
  EXPECT_EQ(cap["waiting"], 2);
  EXPECT_EQ(cap["jobs"],
            nlohmann::json::parse(R"([{"id":"j-first","cpus":1,"gpus":0,"state":"running"},
              {"id":"j-second","cpus":1,"gpus":0,"state":"waiting"},
              {"id":"j-third","cpus":1,"gpus":0,"state":"waiting"}])"));

  Open("first");
  EXPECT_EQ(WaitEnded(fleet, "j-first").state, State::kSucceeded);
  // The end of the first job started the second (and said so), not the third.
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(notified, std::vector<std::string>{"j-second"});
  }
  EXPECT_EQ(WaitEnded(fleet, "j-second").state, State::kSucceeded);
  EXPECT_EQ(WaitEnded(fleet, "j-third").state, State::kSucceeded);
  EXPECT_EQ(DriverLog("j-third"), "hello from the job\njob id j-third\ncuda=[]\n");
  // The second ran before the third.
  const auto launched = [&](const std::string& id) {
    return nlohmann::json::parse(ReadFile(JobDir(id) / "fleet" / "launch.json"))["launchedAt"]
        .get<int64_t>();
  };
  EXPECT_LE(launched("j-second"), launched("j-third"));
  EXPECT_EQ(fleet.Capacity()["cpusInUse"], 0);
}

TEST_F(LocalFleetTest, GpusAreHandedOutByIndex) {
  LocalFleet fleet(Options(/*cpus=*/2, /*gpus=*/2), *store_);
  ASSERT_TRUE(
      fleet.Submit(PyJob("j-g0", kGated, ", gpuSeries: h200, gpusPerMachine: 1", GateYaml("g0"), 1))
          .status.ok());
  ASSERT_TRUE(
      fleet.Submit(PyJob("j-g1", kGated, ", gpuSeries: h200, gpusPerMachine: 1", GateYaml("g1"), 2))
          .status.ok());
  ASSERT_TRUE(WaitForText(JobDir("j-g0") / "logs" / "driver.log", "started cuda=[0]"));
  ASSERT_TRUE(WaitForText(JobDir("j-g1") / "logs" / "driver.log", "started cuda=[1]"));
  ASSERT_TRUE(fleet.Submit(PyJob("j-g2", kHello, ", gpuSeries: h200, gpusPerMachine: 1", "", 3))
                  .status.ok());
  EXPECT_EQ(fleet.Observe("j-g2", "local:j-g2", {}).message,
            "waiting for 1 CPU and 1 GPU: 2 of 2 CPUs and 2 of 2 GPUs in use by 2 jobs");
  EXPECT_EQ(fleet.Capacity()["gpusInUse"], 2);
  Open("g1");
  EXPECT_EQ(WaitEnded(fleet, "j-g2").state, State::kSucceeded);
  EXPECT_THAT(DriverLog("j-g2"), HasSubstr("cuda=[1]\n"));
  Open("g0");
  EXPECT_EQ(WaitEnded(fleet, "j-g0").state, State::kSucceeded);
}

// A local playground's model server holds its CPUs and GPUs as a running job does (LocalFleet::
// Hold): jobs are not started onto them, and get them once its lock is free.
TEST_F(LocalFleetTest, APlaygroundsShareKeepsJobsOffItsGpusUntilItsServerEnds) {
  LocalFleet fleet(Options(/*cpus=*/2, /*gpus=*/2), *store_);
  const fs::path lock = tmp_.path() / "server.lock";
  std::vector<int> ids;
  ASSERT_TRUE(fleet.Hold("playground:p-1", 1, 1, lock, &ids).ok());
  EXPECT_EQ(ids, std::vector<int>{0});
  EXPECT_TRUE(fleet.Hold("playground:p-1", 1, 1, lock, &ids).ok()) << "the same holder again";
  EXPECT_EQ(ids, std::vector<int>{0});
  std::vector<int> more;
  const Status refused = fleet.Hold("playground:p-2", 1, 2, tmp_.path() / "other.lock", &more);
  EXPECT_TRUE(refused.retryable());
  EXPECT_EQ(refused.reason(), "WaitingForResources");
  EXPECT_EQ(refused.message(),
            "waiting for 1 CPU and 2 GPUs: 1 of 2 CPUs and 1 of 2 GPUs in use by 1 playground");

  // A one-GPU job gets the other GPU.
  ASSERT_TRUE(fleet.Submit(PyJob("j-one", kHello, ", gpuSeries: h200, gpusPerMachine: 1", "", 1))
                  .status.ok());
  EXPECT_EQ(WaitEnded(fleet, "j-one").state, State::kSucceeded);
  EXPECT_THAT(DriverLog("j-one"), HasSubstr("cuda=[1]\n"));

  // Its server starts and holds its lock: a two-GPU job waits, and says for what.
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  fleet.HoldStarted("playground:p-1");
  ASSERT_TRUE(fleet.Submit(PyJob("j-two", kHello, ", gpuSeries: h200, gpusPerMachine: 2", "", 2))
                  .status.ok());
  EXPECT_EQ(fleet.Observe("j-two", "local:j-two", {}).message,
            "waiting for 1 CPU and 2 GPUs: 1 of 2 CPUs and 1 of 2 GPUs in use by 1 playground");
  const nlohmann::json cap = fleet.Capacity();
  EXPECT_EQ(cap["gpusInUse"], 1);
  EXPECT_EQ(cap["playgrounds"], 1);
  EXPECT_EQ(cap["jobs"].size(), 1u) << "listed: the waiting job, not the playground";
  // After a restart the server still runs: its share is held again before jobs start.
  {
    LocalFleet restarted(Options(/*cpus=*/2, /*gpus=*/2), *store_);
    restarted.Readopt("playground:p-1", 1, {0}, lock);
    EXPECT_EQ(restarted.Observe("j-two", "local:j-two", {}).state, State::kPending);
    EXPECT_EQ(restarted.Capacity()["gpusInUse"], 1);
  }
  EXPECT_EQ(fleet.Observe("j-two", "local:j-two", {}).state, State::kPending);

  // The server exits (its lock is free): the job gets both GPUs.
  ::close(fd);
  const Observation o = WaitEnded(fleet, "j-two");
  EXPECT_EQ(o.state, State::kSucceeded) << o.message;
  EXPECT_THAT(DriverLog("j-two"), HasSubstr("cuda=[0,1]\n"));
  EXPECT_EQ(fleet.Capacity()["playgrounds"], 0);
}

TEST_F(LocalFleetTest, UnholdGivesAShareBackAtOnce) {
  LocalFleet fleet(Options(/*cpus=*/1), *store_);
  std::vector<int> ids;
  ASSERT_TRUE(fleet.Hold("playground:p-1", 1, 0, tmp_.path() / "server.lock", &ids).ok());
  EXPECT_TRUE(ids.empty());
  ASSERT_TRUE(fleet.Submit(PyJob("j-1", kHello, "", "", 1)).status.ok());
  EXPECT_EQ(fleet.Observe("j-1", "local:j-1", {}).message,
            "waiting for 1 CPU: 1 of 1 in use by 1 playground")
      << "being started (no lock yet) still holds";
  fleet.Unhold("playground:p-1");  // its server could not be started
  EXPECT_EQ(WaitEnded(fleet, "j-1").state, State::kSucceeded);
}

TEST_F(LocalFleetTest, CancelOfAWaitingJobTakesItOutOfTheQueue) {
  LocalFleet fleet(Options(/*cpus=*/1), *store_);
  ASSERT_TRUE(fleet.Submit(PyJob("j-run", kGated, "", GateYaml("run"), 1)).status.ok());
  ASSERT_TRUE(fleet.Submit(PyJob("j-wait", kHello, "", "", 2)).status.ok());
  EXPECT_EQ(fleet.Observe("j-wait", "local:j-wait", {}).state, State::kPending);
  EXPECT_TRUE(fleet.Cancel("j-wait", "local:j-wait", 0).ok());
  Observation o = fleet.Observe("j-wait", "local:j-wait", {});
  EXPECT_EQ(o.state, State::kCancelled);
  EXPECT_EQ(o.message, "cancelled before it started");
  EXPECT_EQ(fleet.Capacity()["waiting"], 0);
  Open("run");
  EXPECT_EQ(WaitEnded(fleet, "j-run").state, State::kSucceeded);
  // A new fleet object does not bring it back either.
  LocalFleet after(Options(/*cpus=*/1), *store_);
  EXPECT_EQ(after.Observe("j-wait", "local:j-wait", {}).state, State::kCancelled);
  EXPECT_FALSE(fs::exists(JobDir("j-wait") / "status.json"));
}

TEST_F(LocalFleetTest, ANewFleetObjectReadoptsRunningAndWaitingJobs) {
  auto first = std::make_unique<LocalFleet>(Options(/*cpus=*/1), *store_);
  ASSERT_TRUE(first->Submit(PyJob("j-long", kGated, "", GateYaml("long"), 1)).status.ok());
  ASSERT_TRUE(first->Submit(PyJob("j-next", kHello, "", "", 2)).status.ok());
  ASSERT_TRUE(WaitForText(JobDir("j-long") / "logs" / "driver.log", "started"));
  first.reset();  // `forge serve` restarts

  LocalFleet second(Options(/*cpus=*/1), *store_);
  nlohmann::json cap = second.Capacity();
  EXPECT_EQ(cap["cpusInUse"], 1);
  EXPECT_EQ(cap["running"], 1);
  EXPECT_EQ(cap["waiting"], 1);
  Observation o = second.Observe("j-long", "local:j-long", {});
  EXPECT_EQ(o.state, State::kRunning) << o.message;
  EXPECT_EQ(second.Observe("j-next", "local:j-next", {}).message,
            "waiting for 1 CPU: 1 of 1 in use by 1 job");
  Open("long");
  o = WaitEnded(second, "j-long");
  EXPECT_EQ(o.state, State::kSucceeded);
  EXPECT_EQ(DriverLog("j-long"), "started cuda=[]\ndone\n");
  EXPECT_EQ(WaitEnded(second, "j-next").state, State::kSucceeded);
}

TEST_F(LocalFleetTest, TheRunnerOutlivesTheProcessThatLaunchedIt) {
  SubmitRequest r = PyJob("j-orphan", kGated, "", GateYaml("orphan"));
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t launcher = ::fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    // The "server", in a process group of its own: submits, says so, and waits to be killed.
    ::setpgid(0, 0);
    ::close(ready[0]);
    LocalFleet fleet(Options(), *store_);
    const char ok = fleet.Submit(r).status.ok() ? 'y' : 'n';
    if (::write(ready[1], &ok, 1) != 1) ::_exit(2);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ::close(ready[0]);
  EXPECT_EQ(ok, 'y');
  ASSERT_EQ(::kill(-launcher, SIGKILL), 0);  // the server's whole process group
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);

  const pid_t runner = static_cast<pid_t>(LaunchPid(JobDir("j-orphan")));
  EXPECT_NE(testing::ProcStateAndParent(runner).second, launcher);
  EXPECT_NE(testing::ProcStateAndParent(runner).second, ::getpid());
  EXPECT_NE(::getsid(runner), ::getsid(0));  // a session of its own
  EXPECT_EQ(::getpgid(runner), runner);      // and group
  LocalFleet fleet(Options(), *store_);
  EXPECT_EQ(fleet.Observe("j-orphan", "local:j-orphan", {}).state, State::kRunning);
  ASSERT_TRUE(WaitForText(JobDir("j-orphan") / "logs" / "driver.log", "started"));
  Open("orphan");
  Observation o = WaitEnded(fleet, "j-orphan");
  EXPECT_EQ(o.state, State::kSucceeded) << o.message;
  EXPECT_EQ(DriverLog("j-orphan"), "started cuda=[]\ndone\n");
}

TEST_F(LocalFleetTest, AHeldLockWithoutLaunchRecordIsNeverSpawnedAgain) {
  // What a crash between the spawn and launch.json leaves: a runner holding the lock.
  fs::create_directories(JobDir("j-held") / "fleet");
  const int fd =
      ::open((JobDir("j-held") / "fleet" / "run.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);

  LocalFleet fleet(Options(), *store_);
  SubmitRequest r = PyJob("j-held", kHello);
  SubmitResult s = fleet.Submit(r);
  ASSERT_TRUE(s.status.ok()) << s.status.message();
  EXPECT_EQ(s.handle, "local:j-held");
  EXPECT_EQ(fleet.Observe("j-held", s.handle, {}).state, State::kRunning);
  EXPECT_TRUE(fleet.Submit(r).status.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(fs::exists(JobDir("j-held") / "capsule"));
  EXPECT_FALSE(fs::exists(JobDir("j-held") / "logs" / "runner.log"));
  EXPECT_EQ(fleet.Capacity()["cpusInUse"], 1);
  LocalFleet adopted(Options(), *store_);  // after a restart too
  EXPECT_EQ(adopted.Capacity()["cpusInUse"], 1);
  EXPECT_EQ(adopted.Observe("j-held", s.handle, {}).state, State::kRunning);

  // That process lets go without having run anything: the job is started, once.
  ::close(fd);
  Observation o = WaitEnded(fleet, "j-held");
  EXPECT_EQ(o.state, State::kSucceeded) << o.message;
  EXPECT_EQ(DriverLog("j-held"), "hello from the job\njob id j-held\ncuda=[]\n");
}

TEST_F(LocalFleetTest, SecretsNeverReachTheJob) {
  ScopedEnv token("FORGE_TOKEN", "sf-token-must-not-leak");
  ScopedEnv s3("FORGE_S3_SECRET_KEY", "s3-secret-must-not-leak");
  ScopedEnv s3_access("FORGE_S3_ACCESS_KEY", "s3-access-must-not-leak");
  ScopedEnv k8s("FORGE_K8S_TOKEN", "k8s-token-must-not-leak");
  ScopedEnv harmless("FORGE_TEST_VISIBLE", "visible");
  LocalFleet fleet(Options(), *store_);
  SubmitRequest r = PyJob("j-env", R"(import os
for k in sorted(os.environ):
    print(k + "=" + os.environ[k])
)");
  ASSERT_TRUE(fleet.Submit(r).status.ok());
  EXPECT_EQ(WaitEnded(fleet, "j-env").state, State::kSucceeded);
  const std::string log = DriverLog("j-env");
  EXPECT_THAT(log, Not(HasSubstr("must-not-leak")));
  EXPECT_THAT(log, Not(HasSubstr("FORGE_TOKEN=")));
  EXPECT_THAT(log, Not(HasSubstr("FORGE_S3_")));
  EXPECT_THAT(log, Not(HasSubstr("FORGE_K8S_TOKEN=")));
  EXPECT_THAT(log, HasSubstr("FORGE_TEST_VISIBLE=visible\n"));
  EXPECT_THAT(log, HasSubstr("FORGE_JOB_ID=j-env\n"));
  EXPECT_THAT(log, HasSubstr("FORGE_CAPSULE_SHA256=" + r.capsule_sha256 + "\n"));
  EXPECT_THAT(log, HasSubstr("FORGE_STORAGE_ROOT=" + root().string() + "\n"));
  EXPECT_THAT(log, HasSubstr("\nCUDA_VISIBLE_DEVICES=\n"));
  EXPECT_THAT(ReadFile(JobDir("j-env") / "logs" / "runner.log"), Not(HasSubstr("must-not-leak")));
}

TEST_F(LocalFleetTest, ARunnerThatDiesIsRunnerLostWithItsLastWords) {
  ScopedEnv runner_grace("FORGE_RUNNER_GRACE_S", "60");
  LocalFleet fleet(Options(), *store_);
  ASSERT_TRUE(fleet.Submit(PyJob("j-lost", kGated, "", GateYaml("lost"))).status.ok());
  ASSERT_TRUE(WaitForText(JobDir("j-lost") / "logs" / "driver.log", "started"));
  const pid_t runner = static_cast<pid_t>(LaunchPid(JobDir("j-lost")));
  const auto status = nlohmann::json::parse(ReadFile(JobDir("j-lost") / "status.json"));
  const pid_t entrypoint = status.at("pid").get<pid_t>();
  ASSERT_EQ(::kill(runner, SIGKILL), 0);  // e.g. the OOM killer
  Observation o = WaitEnded(fleet, "j-lost");
  EXPECT_EQ(o.state, State::kFailed);
  EXPECT_EQ(o.reason, "RunnerLost");
  EXPECT_THAT(o.message, HasSubstr("the runner (pid " + std::to_string(runner) +
                                   ") ended without reporting how the job ended; "
                                   "logs/driver.log ends with: started cuda=[]"));
  // The orphaned entrypoint does not outlive Release.
  // (It once was found dead here under load, cause unknown: the logs say what it last did.)
  EXPECT_FALSE(testing::IsDead(entrypoint))
      << "entrypoint pid " << entrypoint << "\ndriver.log:\n"
      << ReadFile(JobDir("j-lost") / "logs" / "driver.log") << "\nrunner.log:\n"
      << ReadFile(JobDir("j-lost") / "logs" / "runner.log") << "\nstatus.json:\n"
      << ReadFile(JobDir("j-lost") / "status.json");
  EXPECT_TRUE(fleet.Release("j-lost", "local:j-lost").ok());
  for (int i = 0; i < 100 && !testing::IsDead(entrypoint); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(testing::IsDead(entrypoint));
}

TEST_F(LocalFleetTest, TwoWorkersDriveManyJobsEachExactlyOnce) {
  LocalFleet fleet(Options(/*cpus=*/2), *store_);
  std::vector<SubmitRequest> jobs;
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(PyJob("j-many" + std::to_string(i),
                         "import os, time\ntime.sleep(0.1)\nprint('once ' + "
                         "os.environ['FORGE_JOB_ID'])\n",
                         "", "", i));
  }
  std::atomic<int> max_in_use{0};
  // Like the controller's workers: both submit and observe every job until all have ended.
  auto worker = [&] {
    std::set<std::string> ended;
    while (ended.size() < jobs.size()) {
      for (const SubmitRequest& r : jobs) {
        if (ended.count(r.job_id)) continue;
        EXPECT_TRUE(fleet.Submit(r).status.ok());
        const State st = fleet.Observe(r.job_id, "local:" + r.job_id, {}).state;
        EXPECT_NE(st, State::kFailed);
        if (st == State::kSucceeded) ended.insert(r.job_id);
        const int in_use = fleet.Capacity()["cpusInUse"].get<int>();
        int seen = max_in_use.load();
        while (in_use > seen && !max_in_use.compare_exchange_weak(seen, in_use)) {
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  std::thread a(worker), b(worker);
  a.join();
  b.join();
  EXPECT_LE(max_in_use.load(), 2);
  for (const SubmitRequest& r : jobs)
    EXPECT_EQ(DriverLog(r.job_id), "once " + r.job_id + "\n");
  EXPECT_THAT(testing::OurZombies(), ::testing::IsEmpty());
}

TEST_F(LocalFleetTest, UnknownJobsAreUnknownAndHarmless) {
  LocalFleet fleet(Options(), *store_);
  EXPECT_EQ(fleet.Observe("j-nobody", "local:j-nobody", {}).state, State::kUnknown);
  EXPECT_TRUE(fleet.Cancel("j-nobody", "local:j-nobody", 0).ok());
  EXPECT_TRUE(fleet.Release("j-nobody", "local:j-nobody").ok());
  EXPECT_EQ(fleet.Observe("../etc", "local:../etc", {}).state, State::kUnknown);
}

}  // namespace
}  // namespace starforge::fleet
