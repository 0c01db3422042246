// The controller with the real store (a SQLite file), the real filesystem object store, real
// capsules and a scripted fleet: every phase path, retries, deadlines, idempotence, restarts and
// SIGKILL at each failpoint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "starforge/capsule/capsule.h"
#include "starforge/capsule/extract.h"
#include "starforge/common/disk_budget.h"
#include "starforge/controller/controller.h"
#include "starforge/jobspec/parse.h"
#include "starforge/objstore/fs_store.h"
#include "support/files.h"
#include "support/temp_dir.h"

namespace starforge::controller {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using store::Job;
using store::Phase;
using support::ReadFile;
using support::TempDir;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A zip of `files` (path → contents), as `forge submit --code` uploads it.
void WriteZip(const fs::path& path, const std::map<std::string, std::string>& files) {
  fs::create_directories(path.parent_path());
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  ASSERT_NE(z, nullptr);
  for (const auto& [name, data] : files) {
    zip_source_t* src = zip_source_buffer(z, data.data(), data.size(), 0);
    ASSERT_GE(zip_file_add(z, name.c_str(), src, ZIP_FL_ENC_UTF_8), 0);
  }
  if (files.empty()) {
    // libzip writes no file for an empty archive: write the 22-byte end record ourselves.
    zip_discard(z);
    std::ofstream(path, std::ios::binary) << std::string("PK\x05\x06", 4) << std::string(18, '\0');
    return;
  }
  ASSERT_EQ(zip_close(z), 0);
}

jobspec::JobSpec Spec(const std::string& extra = "") {
  jobspec::ParseResult r = jobspec::Parse(
      "name: tiny\nimage: python:3.11\nentrypoint: python train.py\npools: [{name: main}]\n" +
          extra,
      jobspec::Defaults{});
  if (!r.ok()) std::abort();
  return *r.spec;
}

// A fleet whose answers the test scripts. Thread-safe (workers call it). With `log` set, every
// mutating call is appended to that file, so calls are counted across processes.
class FakeFleet : public fleet::Fleet {
 public:
  explicit FakeFleet(std::string kind = "local", fs::path log = {})
      : kind_(std::move(kind)), log_(std::move(log)) {}

  std::string Kind() const override { return kind_; }
  bool NotifiesChanges() const override { return notifies; }

  fleet::Admission Admit(const jobspec::JobSpec&) override {
    std::lock_guard lock(mu_);
    return admission;
  }

  fleet::SubmitResult Submit(const fleet::SubmitRequest& request) override {
    std::lock_guard lock(mu_);
    Log("submit " + request.job_id);
    submits.push_back(request);
    if (!submit_script.empty()) {
      fleet::SubmitResult r = submit_script.front();
      submit_script.pop_front();
      if (!r.status.ok()) return r;
    }
    auto [it, fresh] = state.try_emplace(request.job_id, fleet::State::kPending);
    (void)it;
    (void)fresh;
    return fleet::SubmitResult{Status::Ok(), "h-" + request.job_id};
  }

  fleet::Observation Observe(const std::string& job_id, const std::string& handle,
                             const jobspec::JobSpec&) override {
    std::unique_lock lock(mu_);
    if (!blocked_job.empty() && job_id == blocked_job) {
      blocked = true;
      block_cv.wait(lock, [&] { return blocked_job != job_id; });
      blocked = false;
    }
    ++observes;
    if (!handle.empty()) handles_seen.insert(handle);
    if (observe_errors > 0) {
      --observe_errors;
      fleet::Observation o;
      o.retryable_error = true;
      o.message = "fleet unreachable";
      return o;
    }
    fleet::Observation o = observation;
    auto it = state.find(job_id);
    o.state = it == state.end() ? fleet::State::kUnknown : it->second;
    if (auto_run && it != state.end()) {
      // Pending → Running → Succeeded, one step per observation.
      if (it->second == fleet::State::kPending)
        it->second = fleet::State::kRunning;
      else if (it->second == fleet::State::kRunning)
        it->second = fleet::State::kSucceeded;
      o.state = it->second;
      if (o.state == fleet::State::kSucceeded) o.exit_code = 0;
    }
    return o;
  }

  Status Cancel(const std::string& job_id, const std::string&, int64_t since_ms) override {
    std::lock_guard lock(mu_);
    Log("cancel " + job_id);
    cancels.push_back(since_ms);
    if (cancels_until_stopped > 0 && --cancels_until_stopped > 0) return Status::Ok();
    auto it = state.find(job_id);
    if (it != state.end()) it->second = fleet::State::kCancelled;
    return Status::Ok();
  }

  Status CollectLogs(const std::string& job_id, const std::string&,
                     const fs::path& logs_dir) override {
    std::lock_guard lock(mu_);
    Log("collect " + job_id);
    calls.push_back("collect");
    if (collect_errors > 0) {
      --collect_errors;
      return Status::Retryable("LogCollectionFailed", "log store unavailable");
    }
    std::ofstream(logs_dir / "driver.log") << "loss 0.1\n";
    return Status::Ok();
  }

  Status Release(const std::string& job_id, const std::string&) override {
    std::lock_guard lock(mu_);
    Log("release " + job_id);
    calls.push_back("release");
    if (release_errors > 0) {
      --release_errors;
      return Status::Retryable("ReleaseFailed", "cannot delete");
    }
    if (release_waits > 0) {
      --release_waits;
      return Status::InProgress(reasons::kReleasing, "waiting for its finalizers");
    }
    return Status::Ok();
  }

  nlohmann::json Capacity() override { return {{"fleet", kind_}}; }

  void Set(const std::string& job_id, fleet::State s, std::optional<int> exit_code = {}) {
    std::lock_guard lock(mu_);
    state[job_id] = s;
    observation.exit_code = exit_code;
  }
  void PokeController(const std::string& job_id) { Notify(job_id); }
  void PokeEnded(const std::string& job_id) { NotifyEnded(job_id); }
  // Observe of `job` waits until `unblock` (a live job's observe that keeps a worker busy).
  void BlockObserveOf(const std::string& job) {
    std::lock_guard lock(mu_);
    blocked_job = job;
    blocked = false;
  }
  void Unblock() {
    {
      std::lock_guard lock(mu_);
      blocked_job.clear();
    }
    block_cv.notify_all();
  }
  bool Blocked() {
    std::lock_guard lock(mu_);
    return blocked;
  }

  size_t SubmitCount() {
    std::lock_guard lock(mu_);
    return submits.size();
  }

  // Scripted behaviour and what was called (guard with the fleet's lock when workers run).
  std::mutex mu_;
  fleet::Admission admission;
  std::deque<fleet::SubmitResult> submit_script;
  std::map<std::string, fleet::State> state;
  fleet::Observation observation;  // reason/message/events/exit code for every Observe
  bool auto_run = false;
  bool notifies = false;  // NotifiesChanges: the controller then relies on PokeController
  int observe_errors = 0;
  int cancels_until_stopped = 0;  // > 0: Cancel stops the job only at that call
  int collect_errors = 0;
  int release_errors = 0;
  int release_waits = 0;  // Release answers InProgress this many times
  std::vector<fleet::SubmitRequest> submits;
  std::set<std::string> handles_seen;
  std::vector<int64_t> cancels;
  std::vector<std::string> calls;
  std::string blocked_job;  // BlockObserveOf
  bool blocked = false;     // an Observe of blocked_job is waiting
  std::condition_variable block_cv;
  int observes = 0;

 private:
  void Log(const std::string& line) {
    if (log_.empty()) return;
    std::ofstream(log_, std::ios::app) << line << "\n";
  }
  std::string kind_;
  fs::path log_;
};

// An object store that fails the first PutFile calls as scripted, then is the real one.
class FlakyObjects : public objstore::ObjectStore {
 public:
  explicit FlakyObjects(objstore::ObjectStore& real) : real_(real) {}
  StatusOr<objstore::PutOutcome> PutFile(const std::string& key, const std::string& path,
                                         const objstore::Progress& p) override {
    ++puts;
    if (!failures.empty()) {
      Status e = objstore::Failure(failures.front(), "scripted failure");
      failures.pop_front();
      return e;
    }
    return real_.PutFile(key, path, p);
  }
  StatusOr<objstore::PutOutcome> PutBytes(const std::string& key, std::string_view b,
                                          const objstore::Progress& p) override {
    return real_.PutBytes(key, b, p);
  }
  StatusOr<std::optional<objstore::ObjectInfo>> Head(const std::string& key) override {
    return real_.Head(key);
  }
  StatusOr<int64_t> GetFile(const std::string& key, const std::string& path,
                            const objstore::Progress& p) override {
    return real_.GetFile(key, path, p);
  }
  StatusOr<std::string> GetBytes(const std::string& key) override { return real_.GetBytes(key); }
  StatusOr<std::string> PresignGet(const std::string& key, int64_t s, std::time_t now) override {
    return real_.PresignGet(key, s, now);
  }
  std::string Describe() const override { return "flaky " + real_.Describe(); }

  std::deque<objstore::ErrorKind> failures;
  int puts = 0;

 private:
  objstore::ObjectStore& real_;
};

Options FastOptions(const fs::path& root) {
  Options o;
  o.storage_root = root;
  o.state_dir = root / "control";
  o.workers = 2;
  o.resync = 20ms;
  o.backoff_base = 5ms;
  o.backoff_max = 40ms;
  return o;
}

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_->SetClockForTesting([this] { return WallMs() + clock_offset_.load(); });
  }

  // A job as the API creates it: canonical spec, uploaded code under control/uploads/.
  Job Submit(const jobspec::JobSpec& spec = Spec(), const std::string& fleet = "local",
             std::map<std::string, std::string> code = {{"train.py", "print('hi')\n"}}) {
    Job j;
    j.id = store::NewJobId();
    j.owner = "alice";
    j.name = spec.name;
    j.fleet = fleet;
    j.spec_json = jobspec::ToCanonicalText(spec);
    j.upload_path = (root() / "control/uploads" / (j.id + ".zip")).string();
    WriteZip(j.upload_path, code);
    return store_->CreateJob(j, "user:alice");
  }

  Job Get(const std::string& id) { return *store_->GetJob(id); }
  std::string LastEventMessage(const std::string& id) {
    const auto events = store_->ListEvents(id);
    return events.empty() ? "" : events.back().message;
  }

  // Reconciles (synchronously, ignoring delays) until `until` holds or the job is done.
  Job Drive(const std::string& id, const std::function<bool(const Job&)>& until = nullptr,
            int max_steps = 40) {
    for (int i = 0; i < max_steps; ++i) {
      if (until && until(Get(id))) break;
      if (!controller_->Reconcile(id)) break;
    }
    return Get(id);
  }
  Job DriveTo(const std::string& id, Phase phase) {
    return Drive(id, [phase](const Job& j) { return j.phase == phase; });
  }

  std::vector<Phase> Path(const std::string& id) {
    std::vector<Phase> out;
    for (const auto& t : store_->ListTransitions(id))
      out.push_back(t.to);
    return out;
  }

  fs::path root() const { return tmp_.path(); }

  // Replaces the controller with one using `o`. The old one goes first: its destructor unsets
  // the fleet's notification hooks, which would otherwise undo the new controller's.
  void Restart(const Options& o) {
    controller_.reset();
    controller_ = std::make_unique<Controller>(
        *store_, std::map<std::string, fleet::Fleet*>{{"local", &fleet_}}, objects_, o);
  }

  TempDir tmp_;
  std::atomic<int64_t> clock_offset_{0};
  std::unique_ptr<store::Store> store_ = store::Store::Open(tmp_.path() / "state.db");
  std::unique_ptr<objstore::ObjectStore> fs_objects_ =
      objstore::OpenFilesystem(tmp_.path() / "objects");
  FlakyObjects objects_{*fs_objects_};
  FakeFleet fleet_;
  std::unique_ptr<Controller> controller_ = std::make_unique<Controller>(
      *store_, std::map<std::string, fleet::Fleet*>{{"local", &fleet_}}, objects_,
      FastOptions(tmp_.path()));
};

// A live job's spec is parsed once and kept; other text (never a job's own: the stored spec does
// not change) is parsed anew, an invalid one is not kept, and Forget lets go.
TEST(ParsedSpecs, ParsesOnceAndServesOnlyTheStoredText) {
  ParsedSpecs specs;
  Job job;
  job.id = "j-spec000001";
  job.spec_json = jobspec::ToCanonicalText(Spec());
  const auto first = specs.Get(job);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ((*first)->name, Spec().name);
  EXPECT_EQ(specs.Get(job).value(), *first);  // the same object: not parsed again

  Job other = job;
  other.spec_json = jobspec::ToCanonicalText(Spec("env: {A: b}\n"));
  const auto second = specs.Get(other);
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_NE(*second, *first);
  EXPECT_EQ((*second)->env.at("A"), "b");

  Job broken = job;
  broken.spec_json = "{\"name\": 7}";
  const auto refused = specs.Get(broken);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("name"));

  specs.Forget(job.id);
  const auto again = specs.Get(job);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_NE(*again, *second);
}

TEST_F(ControllerTest, ASuccessfulJobGoesThroughEveryPhaseAndIsCleanedUp) {
  const Job created = Submit();
  Job job = DriveTo(created.id, Phase::kPending);
  ASSERT_EQ(job.phase, Phase::kPending) << job.reason << ": " << job.message;
  ASSERT_EQ(fleet_.submits.size(), 1u);
  const fleet::SubmitRequest& req = fleet_.submits[0];
  EXPECT_EQ(req.job_id, created.id);
  EXPECT_EQ(req.capsule_sha256, job.capsule_sha256);
  EXPECT_EQ(req.capsule_key, capsule::ObjectKey(job.capsule_sha256));
  EXPECT_EQ(req.queued_at, created.created_at);
  EXPECT_EQ(req.spec, Spec());
  EXPECT_EQ(job.fleet_handle, "h-" + created.id);
  // The upload and the packaging scratch are gone once the capsule is stored.
  EXPECT_EQ(job.upload_path, "");
  EXPECT_FALSE(fs::exists(created.upload_path));
  EXPECT_FALSE(fs::exists(root() / "control/work" / created.id));

  // The stored capsule holds the user's code and exactly the stored JobSpec.
  const fs::path unpacked = root() / "unpacked";
  const fs::path capsule = root() / "objects" / capsule::ObjectKey(job.capsule_sha256);
  ASSERT_TRUE(fs::exists(capsule));
  ASSERT_TRUE(capsule::ExtractZip(capsule, unpacked).ok());
  EXPECT_EQ(ReadFile(unpacked / capsule::kJobSpecPath), job.spec_json);
  EXPECT_EQ(ReadFile(unpacked / "train.py"), "print('hi')\n");

  fleet_.Set(created.id, fleet::State::kRunning);
  job = DriveTo(created.id, Phase::kRunning);
  EXPECT_EQ(job.phase, Phase::kRunning);
  EXPECT_GT(job.started_at, 0);

  fleet_.Set(created.id, fleet::State::kSucceeded, 0);
  job = Drive(created.id);
  EXPECT_EQ(job.phase, Phase::kSucceeded);
  EXPECT_EQ(job.reason, store::reasons::kCompleted);
  EXPECT_EQ(job.exit_code, 0);
  EXPECT_TRUE(job.logs_archived);
  EXPECT_TRUE(job.released);
  EXPECT_GT(job.finished_at, 0);
  EXPECT_THAT(fleet_.calls, ElementsAre("collect", "release"));
  EXPECT_TRUE(fs::exists(root() / "jobs" / created.id / "logs/driver.log"));
  EXPECT_THAT(Path(created.id), ElementsAre(Phase::kQueued, Phase::kPackaging, Phase::kSubmitting,
                                            Phase::kPending, Phase::kRunning, Phase::kSucceeded));
  // Done: further reconciles touch nothing.
  EXPECT_FALSE(controller_->Reconcile(created.id));
  EXPECT_EQ(fleet_.calls.size(), 2u);
  EXPECT_EQ(fleet_.submits.size(), 1u);

  // One Normal event per phase change.
  std::vector<std::string> reasons;
  for (const auto& e : store_->ListEvents(created.id)) {
    EXPECT_EQ(e.count, 1) << e.reason;
    reasons.push_back(e.reason);
  }
  EXPECT_THAT(reasons, ElementsAre("Packaging", "Submitting", "Pending", "Running", "Completed"));

  const Metrics& m = controller_->metrics();
  EXPECT_GT(m.reconciles, 5);
  EXPECT_EQ(m.reconcile_errors, 0);
  EXPECT_EQ(m.latency_count, m.reconciles);
  EXPECT_EQ(m.latency_buckets[std::size(Metrics::kBuckets) - 1], m.reconciles);  // all ≤ 5 s
  EXPECT_GT(m.latency_sum_us, 0);
}

TEST_F(ControllerTest, ANonZeroExitIsAppFailedWithItsExitCode) {
  const Job created = Submit();
  DriveTo(created.id, Phase::kPending);
  fleet_.Set(created.id, fleet::State::kFailed, 3);
  const Job job = Drive(created.id);
  EXPECT_EQ(job.phase, Phase::kFailed);
  EXPECT_EQ(job.reason, store::reasons::kAppFailed);
  EXPECT_EQ(job.exit_code, 3);
  EXPECT_THAT(job.message, HasSubstr("exited with code 3"));
  EXPECT_TRUE(job.logs_archived && job.released);
  EXPECT_EQ(store_->ListEvents(job.id).back().type, "Warning");
  // It started and ended between two observations, yet it ran: Running is on its path, and it
  // has a start (the console's "Took", the CLI's Started).
  EXPECT_THAT(Path(job.id), ElementsAre(Phase::kQueued, Phase::kPackaging, Phase::kSubmitting,
                                        Phase::kPending, Phase::kRunning, Phase::kFailed));
  EXPECT_GT(job.started_at, 0);
  EXPECT_GE(job.finished_at, job.started_at);
}

TEST_F(ControllerTest, AJobThatSucceededBetweenTwoObservationsStillRan) {
  const Job created = Submit();
  DriveTo(created.id, Phase::kPending);
  fleet_.Set(created.id, fleet::State::kSucceeded, 0);
  const Job job = Drive(created.id);
  EXPECT_EQ(job.phase, Phase::kSucceeded);
  EXPECT_GT(job.started_at, 0);
  EXPECT_THAT(Path(job.id), ElementsAre(Phase::kQueued, Phase::kPackaging, Phase::kSubmitting,
                                        Phase::kPending, Phase::kRunning, Phase::kSucceeded));
}

TEST_F(ControllerTest, TheFleetsFailureReasonIsKept) {
  const Job created = Submit();
  DriveTo(created.id, Phase::kPending);
  fleet_.observation.reason = "ImagePullFailed";
  fleet_.observation.message = "image python:3.11 cannot be pulled";
  fleet_.Set(created.id, fleet::State::kFailed);
  fleet_.observation.reason = "ImagePullFailed";
  const Job job = Drive(created.id);
  EXPECT_EQ(job.reason, "ImagePullFailed");
  EXPECT_EQ(job.message, "image python:3.11 cannot be pulled");
  EXPECT_FALSE(job.exit_code);
  // Its code never ran: no start, and Running is not on its path.
  EXPECT_EQ(job.started_at, 0);
  EXPECT_THAT(Path(job.id), Not(Contains(Phase::kRunning)));
}

// Cancel before the fleet has the job: Cancelled at once, the fleet is never asked to cancel.
class CancelBeforeSubmitTest : public ControllerTest,
                               public ::testing::WithParamInterface<Phase> {};

TEST_P(CancelBeforeSubmitTest, IsCancelledWithoutTheFleet) {
  const Job created = Submit();
  if (GetParam() != Phase::kQueued) DriveTo(created.id, GetParam());
  ASSERT_EQ(Get(created.id).phase, GetParam());
  store_->UpdateJob(created.id, [](Job& j) {
    j.cancel_requested = true;
    j.cancel_requested_at = WallMs();
  });
  const Job job = Drive(created.id);
  EXPECT_EQ(job.phase, Phase::kCancelled);
  EXPECT_EQ(job.reason, store::reasons::kCancelledByUser);
  EXPECT_TRUE(fleet_.submits.empty());
  EXPECT_TRUE(fleet_.cancels.empty());
  EXPECT_TRUE(job.logs_archived && job.released);
  EXPECT_FALSE(fs::exists(created.upload_path));  // the upload is not left behind
  EXPECT_FALSE(fs::exists(root() / "control/work" / created.id));
}

INSTANTIATE_TEST_SUITE_P(Phases, CancelBeforeSubmitTest,
                         ::testing::Values(Phase::kQueued, Phase::kPackaging, Phase::kSubmitting),
                         [](const auto& p) { return std::string(store::ToString(p.param)); });

class CancelOnFleetTest : public ControllerTest, public ::testing::WithParamInterface<Phase> {};

TEST_P(CancelOnFleetTest, CancelsOnTheFleetUntilItStops) {
  const Job created = Submit();
  DriveTo(created.id, Phase::kPending);
  if (GetParam() == Phase::kRunning) {
    fleet_.Set(created.id, fleet::State::kRunning);
    DriveTo(created.id, Phase::kRunning);
  }
  ASSERT_EQ(Get(created.id).phase, GetParam());
  fleet_.cancels_until_stopped = 3;  // SIGTERM is ignored twice; the third call stops it
  store_->UpdateJob(created.id, [](Job& j) {
    j.cancel_requested = true;
    j.cancel_requested_at = WallMs() - 5000;
  });
  const Job job = Drive(created.id);
  EXPECT_EQ(job.phase, Phase::kCancelled);
  EXPECT_EQ(job.reason, store::reasons::kCancelledByUser);
  ASSERT_EQ(fleet_.cancels.size(), 3u);
  EXPECT_GE(fleet_.cancels[0], 5000);  // the fleet escalates from how long ago it was asked
  EXPECT_LE(fleet_.cancels[0], fleet_.cancels[2]);
  EXPECT_THAT(fleet_.calls, ElementsAre("collect", "release"));
  EXPECT_EQ(fleet_.submits.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Phases, CancelOnFleetTest,
                         ::testing::Values(Phase::kPending, Phase::kRunning),
                         [](const auto& p) { return std::string(store::ToString(p.param)); });

TEST_F(ControllerTest, AJobTheFleetCanNeverRunIsRejected) {
  fleet_.admission = {false, "needs 9 GPUs; this machine has 0: use the kuberay fleet",
                      "pools[0].gpusPerMachine"};
  const Job job = Drive(Submit().id);
  EXPECT_EQ(job.phase, Phase::kFailed);
  EXPECT_EQ(job.reason, store::reasons::kRejected);
  EXPECT_THAT(job.message, HasSubstr("pools[0].gpusPerMachine"));
  EXPECT_THAT(job.message, HasSubstr("use the kuberay fleet"));
  EXPECT_TRUE(fleet_.submits.empty());
  EXPECT_THAT(Path(job.id), ElementsAre(Phase::kQueued, Phase::kFailed));
}

TEST_F(ControllerTest, AJobForAFleetThisServerLacksIsRejected) {
  const Job job = Drive(Submit(Spec(), "kuberay").id);
  EXPECT_EQ(job.phase, Phase::kFailed);
  EXPECT_EQ(job.reason, store::reasons::kRejected);
  EXPECT_THAT(job.message, HasSubstr("kuberay"));
  EXPECT_TRUE(job.logs_archived && job.released);  // nothing to clean on a fleet that is absent
  EXPECT_TRUE(fleet_.calls.empty());
}

TEST_F(ControllerTest, AFinalSubmitRefusalFailsTheJobWithItsReason) {
  fleet_.submit_script.push_back({Status::Permanent("Rejected", "no node has 8 GPUs"), ""});
  const Job job = Drive(Submit().id);
  EXPECT_EQ(job.phase, Phase::kFailed);
  EXPECT_EQ(job.reason, "Rejected");
  EXPECT_EQ(job.message, "no node has 8 GPUs");
  EXPECT_EQ(controller_->metrics().fleet_errors, 1);
}

TEST_F(ControllerTest, ATransientSubmitFailureIsRetriedWithBackoff) {
  for (int i = 0; i < 2; ++i) {
    fleet_.submit_script.push_back(
        {Status::Retryable("SubmissionFailed", "API server timeout"), ""});
  }
  const Job created = Submit();
  DriveTo(created.id, Phase::kSubmitting);
  auto first = controller_->Reconcile(created.id);
  auto second = controller_->Reconcile(created.id);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(*first, 5ms);  // backoff_base, then doubled
  EXPECT_EQ(*second, 10ms);
  EXPECT_EQ(Get(created.id).phase, Phase::kSubmitting);
  const Job job = DriveTo(created.id, Phase::kPending);
  EXPECT_EQ(job.phase, Phase::kPending);
  EXPECT_EQ(fleet_.submits.size(), 3u);
  EXPECT_EQ(controller_->metrics().fleet_errors, 2);
  EXPECT_EQ(controller_->metrics().reconcile_errors, 2);
  // The warning is one event seen twice.
  int warnings = 0;
  for (const auto& e : store_->ListEvents(created.id)) {
    if (e.type == "Warning") {
      ++warnings;
      EXPECT_EQ(e.count, 2);
      EXPECT_EQ(e.message, "API server timeout");
    }
  }
  EXPECT_EQ(warnings, 1);
}

// FORGE_SUBMIT_DEADLINE_S: transient errors before the fleet holds the job are retried, but not
// forever; the job then fails saying what kept failing.
TEST_F(ControllerTest, TransientSubmitFailuresStopAtTheSubmitDeadline) {
  Options o = FastOptions(root());
  o.submit_deadline = std::chrono::seconds(30);
  Restart(o);
  for (int i = 0; i < 3; ++i)
    fleet_.submit_script.push_back({Status::Retryable("SubmissionFailed", "API server 503"), ""});
  clock_offset_ = -60'000;  // packaging began a minute ago
  const Job created = Submit();
  DriveTo(created.id, Phase::kSubmitting);
  clock_offset_ = 0;
  const Job job = Drive(created.id);
  EXPECT_EQ(job.phase, Phase::kFailed);
  EXPECT_EQ(job.reason, store::reasons::kSubmitDeadlineExceeded);
  EXPECT_THAT(job.message, HasSubstr("submitting kept failing"));
  EXPECT_THAT(job.message, HasSubstr("FORGE_SUBMIT_DEADLINE_S"));
  EXPECT_THAT(job.message, HasSubstr("API server 503"));
  EXPECT_EQ(fleet_.submits.size(), 1u) << "a failure past the deadline is the last try";

  // The object store: the same for Packaging.
  objects_.failures = {objstore::ErrorKind::kUnreachable};
  clock_offset_ = -60'000;
  const Job packaging = Submit();
  DriveTo(packaging.id, Phase::kPackaging);
  clock_offset_ = 0;
  const Job failed = Drive(packaging.id);
  EXPECT_EQ(failed.reason, store::reasons::kSubmitDeadlineExceeded);
  EXPECT_THAT(failed.message, HasSubstr("packaging kept failing"));
}

TEST_F(ControllerTest, TransientSubmitFailuresWithinTheDeadlineAreRetried) {
  fleet_.submit_script.push_back({Status::Retryable("SubmissionFailed", "API server 503"), ""});
  clock_offset_ = -60'000;  // well within the default 1800 s
  const Job created = Submit();
  DriveTo(created.id, Phase::kSubmitting);
  clock_offset_ = 0;
  EXPECT_EQ(DriveTo(created.id, Phase::kPending).phase, Phase::kPending);
}

TEST_F(ControllerTest, ABadUploadFailsPackagingWithTheReason) {
  Job created = Submit();
  std::ofstream(created.upload_path, std::ios::trunc) << "this is not a zip";
  Job job = Drive(created.id);
  EXPECT_EQ(job.phase, Phase::kFailed);
  EXPECT_EQ(job.reason, store::reasons::kPackagingFailed);
  EXPECT_THAT(job.message, HasSubstr("cannot be unpacked"));
  EXPECT_TRUE(fleet_.submits.empty());

  // An archive without files: the builder's own message.
  job = Drive(Submit(Spec(), "local", {}).id);
  EXPECT_EQ(job.phase, Phase::kFailed);
  EXPECT_EQ(job.reason, store::reasons::kPackagingFailed);
  EXPECT_THAT(job.message, HasSubstr("no files"));
  EXPECT_FALSE(fs::exists(root() / "control/work" / job.id));
}

TEST_F(ControllerTest, ObjectStoreFaultsAreRetriedOrFailTheJob) {
  objects_.failures = {objstore::ErrorKind::kUnreachable, objstore::ErrorKind::kServer};
  const Job ok = Submit();
  auto delay = controller_->Reconcile(ok.id);  // Queued → Packaging
  delay = controller_->Reconcile(ok.id);       // upload fails: backoff
  ASSERT_TRUE(delay);
  EXPECT_EQ(*delay, 5ms);
  EXPECT_EQ(Get(ok.id).phase, Phase::kPackaging);
  EXPECT_EQ(DriveTo(ok.id, Phase::kSubmitting).phase, Phase::kSubmitting);
  EXPECT_EQ(objects_.puts, 3);
  EXPECT_FALSE(Get(ok.id).capsule_sha256.empty());

  objects_.failures = {objstore::ErrorKind::kAccessDenied};
  const Job job = Drive(Submit().id);
  EXPECT_EQ(job.phase, Phase::kFailed);
  EXPECT_EQ(job.reason, store::reasons::kStorageFailed);
  EXPECT_THAT(job.message, HasSubstr("scripted failure"));
}

// Two packagings (or a packaging and an upload) must not both pass a free-space check and then
// fill the disk together: a packaging holds its bytes in the budget the uploads use, and waits
// while others hold them.
TEST_F(ControllerTest, APackagingHoldsDiskSpaceInTheUploadsBudgetAndWaitsForIt) {
  DiskBudget budget([] { return int64_t{100'000}; }, 0);
  Options o = FastOptions(root());
  o.disk_budget = &budget;
  Restart(o);
  // 30,000 bytes of code: its packaging holds 60,000 (the code and the capsule built from it).
  const Job created = Submit(Spec(), "local", {{"train.py", std::string(30'000, 'x')}});
  DriveTo(created.id, Phase::kPackaging);

  // Another packaging (or upload) in progress holds 50,000: 60,000 more do not fit.
  DiskBudget::Reservation other;
  ASSERT_EQ(budget.Reserve(other, 50'000), DiskBudget::Refusal::kNone);
  ASSERT_TRUE(controller_->Reconcile(created.id));  // retried later
  Job job = Get(created.id);
  EXPECT_EQ(job.phase, Phase::kPackaging);
  EXPECT_THAT(LastEventMessage(created.id), HasSubstr("waiting for disk space"));
  EXPECT_TRUE(fleet_.submits.empty());
  EXPECT_FALSE(fs::exists(root() / "control/work" / created.id / "code"));
  EXPECT_EQ(budget.reserved(), 50'000);

  // Once the other one is done, the packaging goes on and gives its space back after.
  other = DiskBudget::Reservation();
  job = DriveTo(created.id, Phase::kSubmitting);
  EXPECT_EQ(job.phase, Phase::kSubmitting);
  EXPECT_EQ(budget.reserved(), 0);

  // More than the disk has even alone: retried too (the operator may free space), saying so.
  const Job big = Submit(Spec(), "local", {{"train.py", std::string(60'000, 'y')}});
  DriveTo(big.id, Phase::kPackaging);
  ASSERT_TRUE(controller_->Reconcile(big.id));
  EXPECT_EQ(Get(big.id).phase, Phase::kPackaging);
  EXPECT_THAT(LastEventMessage(big.id), HasSubstr("free some space"));
}

TEST_F(ControllerTest, LeftoversOfAnInterruptedPackagingAreReplaced) {
  const Job created = Submit();
  DriveTo(created.id, Phase::kPackaging);
  const fs::path stale = root() / "control/work" / created.id / "code/stale.py";
  fs::create_directories(stale.parent_path());
  std::ofstream(stale) << "left by a crash";
  const Job job = DriveTo(created.id, Phase::kSubmitting);
  const fs::path unpacked = root() / "unpacked";
  ASSERT_TRUE(
      capsule::ExtractZip(root() / "objects" / capsule::ObjectKey(job.capsule_sha256), unpacked)
          .ok());
  EXPECT_FALSE(fs::exists(unpacked / "stale.py"));
  EXPECT_TRUE(fs::exists(unpacked / "train.py"));
}

TEST_F(ControllerTest, ThePreRunningDeadlineFailsAJobStuckInPending) {
  clock_offset_ = -10'000;  // the job entered Pending 10 s ago
  const Job created = Submit(Spec("deadlines: {preRunningSeconds: 2}\n"));
  DriveTo(created.id, Phase::kPending);
  clock_offset_ = 0;
  fleet_.observation.reason = "Unschedulable";
  fleet_.observation.message = "0/3 nodes have 4 free GPUs";
  const Job job = Drive(created.id);
  EXPECT_EQ(job.phase, Phase::kFailed);
  EXPECT_EQ(job.reason, store::reasons::kPreRunningDeadlineExceeded);
  EXPECT_THAT(job.message, HasSubstr("0/3 nodes have 4 free GPUs"));
  EXPECT_THAT(job.message, HasSubstr("preRunningSeconds"));
  EXPECT_EQ(fleet_.cancels.size(), 1u);
  EXPECT_THAT(fleet_.calls, ElementsAre("collect", "release"));
}

// Kueue: time in the fleet's queue is a turn, not a failure to start. A job queued for longer
// than its pre-running deadline is not failed; once admitted, the deadline counts from there.
TEST_F(ControllerTest, TimeInTheFleetsQueueDoesNotCountTowardThePreRunningDeadline) {
  clock_offset_ = -10'000;  // it entered Pending 10 s ago and was queued at once
  const Job created = Submit(Spec("deadlines: {preRunningSeconds: 2}\n"));
  DriveTo(created.id, Phase::kPending);
  fleet_.observation.queued = true;
  fleet_.observation.reason = store::reasons::kQueuedByKueue;
  fleet_.observation.message = "queued by Kueue in LocalQueue team-a";
  controller_->Reconcile(created.id);
  clock_offset_ = 0;
  controller_->Reconcile(created.id);
  Job job = Get(created.id);
  EXPECT_EQ(job.phase, Phase::kPending) << "10 s in the queue > 2 s pre-running: still waiting";
  EXPECT_EQ(job.reason, store::reasons::kQueuedByKueue);
  EXPECT_TRUE(fleet_.cancels.empty());

  // Admitted: the clock starts now, so the job is not failed at once …
  fleet_.observation = {};
  fleet_.observation.reason = "WaitingForCluster";
  controller_->Reconcile(created.id);
  EXPECT_EQ(Get(created.id).phase, Phase::kPending);
  std::vector<std::string> reasons;
  for (const auto& e : store_->ListEvents(created.id))
    reasons.push_back(e.reason);
  EXPECT_THAT(reasons, ::testing::IsSupersetOf({"Queued", "Admitted"}));

  // … and it runs.
  fleet_.Set(created.id, fleet::State::kRunning);
  EXPECT_EQ(DriveTo(created.id, Phase::kRunning).phase, Phase::kRunning);
}

// deadlines.queueSeconds bounds one wait in the queue: counted from the Queued event (the store's
// clock; the controller reads the wall clock), it fails the job and cancels it on the fleet,
// saying what the queue last said.
TEST_F(ControllerTest, TheQueueDeadlineFailsAJobTheQueueNeverAdmits) {
  const auto queued_for = [&](int64_t ms) {
    clock_offset_ = -ms;
    const Job created =
        Submit(Spec("queue: team-a\ndeadlines: {queueSeconds: 20, preRunningSeconds: 3600}\n"));
    DriveTo(created.id, Phase::kPending);
    fleet_.observation.queued = true;
    fleet_.observation.reason = store::reasons::kQueuedByKueue;
    fleet_.observation.message = "queued by Kueue in LocalQueue team-a";
    controller_->Reconcile(created.id);  // the Queued event, ms ago
    clock_offset_ = 0;
    return Drive(created.id);
  };
  const Job waiting = queued_for(10'000);  // 10 s < 20 s
  EXPECT_EQ(waiting.phase, Phase::kPending) << waiting.message;
  EXPECT_EQ(waiting.reason, store::reasons::kQueuedByKueue);
  EXPECT_TRUE(fleet_.cancels.empty());

  const Job job = queued_for(30'000);  // 30 s > 20 s
  EXPECT_EQ(job.phase, Phase::kFailed);
  EXPECT_EQ(job.reason, store::reasons::kQueueDeadlineExceeded);
  EXPECT_THAT(job.message, HasSubstr("deadlines.queueSeconds"));
  EXPECT_THAT(job.message, HasSubstr("LocalQueue team-a"));
  EXPECT_EQ(fleet_.cancels.size(), 1u);
}

TEST_F(ControllerTest, ThePreRunningDeadlineCountsFromAdmission) {
  clock_offset_ = -60'000;
  const Job created = Submit(Spec("deadlines: {preRunningSeconds: 5}\n"));
  DriveTo(created.id, Phase::kPending);
  fleet_.observation.queued = true;
  controller_->Reconcile(created.id);  // queued 60 s ago
  clock_offset_ = -10'000;
  fleet_.observation = {};
  fleet_.observation.reason = "Unschedulable";
  fleet_.observation.message = "0/3 nodes have 8 free GPUs";
  controller_->Reconcile(created.id);  // admitted 10 s ago
  clock_offset_ = 0;
  const Job job = Drive(created.id);
  EXPECT_EQ(job.phase, Phase::kFailed);
  EXPECT_EQ(job.reason, store::reasons::kPreRunningDeadlineExceeded);
  EXPECT_THAT(job.message, HasSubstr("admitted from the queue"));
  EXPECT_THAT(job.message, HasSubstr("0/3 nodes have 8 free GPUs"));
}

TEST_F(ControllerTest, APendingJobWithinItsDeadlineShowsTheFleetsReason) {
  const Job created = Submit(Spec("deadlines: {preRunningSeconds: 600}\n"));
  DriveTo(created.id, Phase::kPending);
  fleet_.observation.reason = store::reasons::kWaitingForResources;
  fleet_.observation.message = "2 jobs ahead";
  controller_->Reconcile(created.id);
  Job job = Get(created.id);
  EXPECT_EQ(job.phase, Phase::kPending);
  EXPECT_EQ(job.reason, store::reasons::kWaitingForResources);
  EXPECT_EQ(job.message, "2 jobs ahead");
  const int64_t version = job.version;
  controller_->Reconcile(created.id);  // nothing new: nothing written
  EXPECT_EQ(Get(created.id).version, version);
  EXPECT_TRUE(fleet_.cancels.empty());
}

TEST_F(ControllerTest, TheRunningDeadlineStopsAJobThatRunsTooLong) {
  const Job created = Submit(Spec("deadlines: {runningSeconds: 3}\n"));
  DriveTo(created.id, Phase::kPending);
  fleet_.Set(created.id, fleet::State::kRunning);
  clock_offset_ = -10'000;  // it started running 10 s ago
  DriveTo(created.id, Phase::kRunning);
  clock_offset_ = 0;
  const Job job = Drive(created.id);
  EXPECT_EQ(job.phase, Phase::kFailed);
  EXPECT_EQ(job.reason, store::reasons::kDeadlineExceeded);
  EXPECT_THAT(job.message, HasSubstr("runningSeconds"));
  EXPECT_EQ(fleet_.cancels.size(), 1u);
}

TEST_F(ControllerTest, RepeatedReconcilesSubmitOnceAndDedupEvents) {
  const Job created = Submit();
  DriveTo(created.id, Phase::kPending);
  fleet_.observation.events = {
      {"Warning", "FailedScheduling", "0/1 nodes available", "kuberay:pod-a"},
      {"Warning", "FailedScheduling", "0/1 nodes available", "kuberay:pod-a"},
      {"Normal", "Pulled", "image pulled", ""},
  };
  for (int i = 0; i < 15; ++i)
    controller_->Reconcile(created.id);
  // A list that grows records what is new, once; one that goes back to an earlier list (a
  // look that did not find an event again) records nothing: the looks skip reading the store
  // only for the very list they last recorded.
  const std::vector<fleet::FleetEvent> before = fleet_.observation.events;
  fleet_.observation.events.push_back({"Normal", "Pulling", "pulling image", ""});
  for (int i = 0; i < 3; ++i)
    controller_->Reconcile(created.id);
  fleet_.observation.events = before;
  controller_->Reconcile(created.id);
  fleet_.observation.events.push_back({"Normal", "Pulling", "pulling image", ""});
  controller_->Reconcile(created.id);
  fleet_.Set(created.id, fleet::State::kRunning);
  for (int i = 0; i < 15; ++i)
    controller_->Reconcile(created.id);
  EXPECT_EQ(fleet_.submits.size(), 1u);
  EXPECT_EQ(fleet_.handles_seen, std::set<std::string>{"h-" + created.id});
  std::map<std::string, int> counts;
  for (const auto& e : store_->ListEvents(created.id))
    counts[e.reason + "/" + e.source] += e.count;
  EXPECT_EQ(counts["FailedScheduling/kuberay:pod-a"], 2);  // as often as the fleet saw it
  EXPECT_EQ(counts["Pulled/fleet:local"], 1);
  EXPECT_EQ(counts["Pulling/fleet:local"], 1);
  EXPECT_EQ(counts["Running/controller"], 1);
  EXPECT_EQ(Path(created.id).size(), 5u);
}

TEST_F(ControllerTest, APendingJobTheFleetForgotIsSubmittedAgainARunningOneIsLost) {
  const Job created = Submit();
  DriveTo(created.id, Phase::kPending);
  fleet_.state.clear();  // e.g. the fleet's queue was in memory
  controller_->Reconcile(created.id);
  EXPECT_EQ(fleet_.submits.size(), 2u);
  EXPECT_EQ(fleet_.submits[1].job_id, created.id);
  EXPECT_EQ(fleet_.submits[1].queued_at, created.created_at);  // keeps its place in line
  EXPECT_EQ(Get(created.id).phase, Phase::kPending);

  fleet_.Set(created.id, fleet::State::kRunning);
  DriveTo(created.id, Phase::kRunning);
  fleet_.state.clear();
  const Job job = Drive(created.id);
  EXPECT_EQ(job.phase, Phase::kFailed);
  EXPECT_EQ(job.reason, store::reasons::kRunnerLost);
  EXPECT_EQ(fleet_.submits.size(), 2u);
}

TEST_F(ControllerTest, TransientObserveErrorsAreRetried) {
  const Job created = Submit();
  DriveTo(created.id, Phase::kPending);
  fleet_.observe_errors = 2;
  fleet_.Set(created.id, fleet::State::kRunning);
  EXPECT_TRUE(controller_->Reconcile(created.id));
  EXPECT_EQ(Get(created.id).phase, Phase::kPending);
  EXPECT_EQ(DriveTo(created.id, Phase::kRunning).phase, Phase::kRunning);
  EXPECT_EQ(controller_->metrics().fleet_errors, 2);
}

TEST_F(ControllerTest, CleanupArchivesLogsBeforeReleasingAndRetriesEach) {
  const Job created = Submit();
  DriveTo(created.id, Phase::kPending);
  fleet_.Set(created.id, fleet::State::kSucceeded, 0);
  fleet_.collect_errors = 2;
  fleet_.release_errors = 1;
  DriveTo(created.id, Phase::kSucceeded);
  Job job = Get(created.id);
  EXPECT_FALSE(job.logs_archived);
  ASSERT_TRUE(controller_->Reconcile(created.id));  // collect fails
  job = Get(created.id);
  EXPECT_FALSE(job.logs_archived);
  EXPECT_THAT(fleet_.calls, ElementsAre("collect"));  // no release before the logs are safe
  job = Drive(created.id);
  EXPECT_TRUE(job.logs_archived && job.released);
  EXPECT_THAT(fleet_.calls, ElementsAre("collect", "collect", "collect", "release", "release"));
}

// A release that goes on by itself (the kuberay fleet's RayJob waiting for its finalizers) is no
// fault: no retry with backoff, no Warning, one event however often the job is looked at; a
// notifying fleet's notification (the RayJob gone) brings it back, the sync period otherwise.
TEST_F(ControllerTest, AReleaseInProgressWaitsForTheFleetWithoutRetrying) {
  Options o = FastOptions(root());
  o.sync_period = 3600s;
  Restart(o);
  fleet_.notifies = true;
  const Job created = Submit();
  DriveTo(created.id, Phase::kPending);
  fleet_.Set(created.id, fleet::State::kSucceeded, 0);
  fleet_.release_waits = 3;
  DriveTo(created.id, Phase::kSucceeded);
  for (int i = 0; i < 3; ++i) {
    const auto next = controller_->Reconcile(created.id);
    ASSERT_TRUE(next.has_value());
    EXPECT_GE(*next, 3240s) << "the sync period: the fleet's notification comes first";
    EXPECT_FALSE(Get(created.id).released);
  }
  EXPECT_FALSE(controller_->Reconcile(created.id).has_value()) << "released: nothing more to do";
  EXPECT_TRUE(Get(created.id).released);
  EXPECT_EQ(controller_->metrics().reconcile_errors, 0);
  EXPECT_EQ(controller_->metrics().fleet_errors, 0);
  int releasing = 0;
  for (const auto& e : store_->ListEvents(created.id)) {
    EXPECT_NE(e.reason, reasons::kReleaseFailed);
    if (e.reason == reasons::kReleasing) {
      ++releasing;
      EXPECT_EQ(e.type, "Normal");
      EXPECT_EQ(e.count, 3);
    }
  }
  EXPECT_EQ(releasing, 1);
}

TEST_F(ControllerTest, WorkersDriveJobsOldestFirstAndFleetNotificationsWakeThem) {
  Options one = FastOptions(root());
  one.workers = 1;
  one.resync = 10s;  // only notifications move the jobs along
  Restart(one);
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(Submit().id);
  controller_->Start();
  auto wait_for = [&](const std::function<bool()>& ok) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!ok() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
    return ok();
  };
  ASSERT_TRUE(wait_for([&] {
    for (const auto& id : ids) {
      if (Get(id).phase != Phase::kPending) return false;
    }
    return true;
  }));
  {
    std::lock_guard lock(fleet_.mu_);
    ASSERT_EQ(fleet_.submits.size(), 3u);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(fleet_.submits[i].job_id, ids[i]);
  }
  for (const auto& id : ids) {
    fleet_.Set(id, fleet::State::kSucceeded, 0);
    fleet_.PokeController(id);
  }
  EXPECT_TRUE(wait_for([&] {
    for (const auto& id : ids) {
      if (!Get(id).released) return false;
    }
    return true;
  }));
  controller_->Stop();
  for (const auto& id : ids)
    EXPECT_EQ(Get(id).phase, Phase::kSucceeded);
}

// A fleet that notifies every change (the kuberay fleet's watches) is not polled: a live job is
// looked at again after the sync period, or when its next deadline passes if that is sooner.
TEST_F(ControllerTest, ALiveJobOfANotifyingFleetWaitsForTheSyncPeriodOrItsDeadline) {
  Options o = FastOptions(root());
  o.sync_period = 3600s;
  Restart(o);
  fleet_.notifies = true;
  const Job slow = Submit(Spec("deadlines: {preRunningSeconds: 7200}\n"));
  DriveTo(slow.id, Phase::kPending);
  auto next = controller_->Reconcile(slow.id);
  ASSERT_TRUE(next.has_value());
  EXPECT_GE(*next, 3240s) << "the sync period less 10 %, not the resync";
  EXPECT_LE(*next, 3960s);

  const Job soon = Submit(Spec("deadlines: {preRunningSeconds: 5}\n"));
  DriveTo(soon.id, Phase::kPending);
  next = controller_->Reconcile(soon.id);
  ASSERT_TRUE(next.has_value());
  EXPECT_LE(*next, 5001ms) << "back when the pre-running deadline passes";

  fleet_.Set(soon.id, fleet::State::kRunning);
  DriveTo(soon.id, Phase::kRunning);
  next = controller_->Reconcile(soon.id);
  ASSERT_TRUE(next.has_value());
  EXPECT_GE(*next, 3240s) << "no running deadline";

  // A polled fleet keeps the resync.
  fleet_.notifies = false;
  next = controller_->Reconcile(slow.id);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(*next, o.resync);
}

// A job the fleet saw end is served by the cleanup workers: not behind live jobs' work, even
// when every other worker is busy.
TEST_F(ControllerTest, AJobTheFleetSawEndIsNotQueuedBehindLiveJobs) {
  Options o = FastOptions(root());
  o.workers = 1;
  o.cleanup_workers = 1;
  o.resync = 10s;
  o.sync_period = 3600s;
  Restart(o);
  fleet_.notifies = true;
  const Job busy = Submit();
  const Job ends = Submit();
  for (const Job& j : {busy, ends}) {
    DriveTo(j.id, Phase::kPending);
    fleet_.Set(j.id, fleet::State::kRunning);
    DriveTo(j.id, Phase::kRunning);
  }
  fleet_.BlockObserveOf(busy.id);
  controller_->Start();
  fleet_.PokeController(busy.id);
  auto wait_for = [&](const std::function<bool()>& ok) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!ok() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
    return ok();
  };
  ASSERT_TRUE(wait_for([&] { return fleet_.Blocked(); })) << "the only live worker is busy";
  fleet_.Set(ends.id, fleet::State::kSucceeded, 0);
  fleet_.PokeEnded(ends.id);
  EXPECT_TRUE(wait_for([&] { return Get(ends.id).released; }));
  EXPECT_EQ(Get(ends.id).phase, Phase::kSucceeded);
  EXPECT_TRUE(fleet_.Blocked()) << "served while the live worker was still busy";
  fleet_.Unblock();
  controller_->Stop();
}

TEST_F(ControllerTest, ANewControllerFinishesAnInFlightJobOnce) {
  const Job created = Submit();
  fleet_.Set(created.id, fleet::State::kPending);
  DriveTo(created.id, Phase::kPending);
  fleet_.Set(created.id, fleet::State::kRunning);
  DriveTo(created.id, Phase::kRunning);
  controller_.reset();  // the server stops

  fleet_.Set(created.id, fleet::State::kSucceeded, 0);
  Controller again(*store_, {{"local", &fleet_}}, objects_, FastOptions(root()));
  again.Start();
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!Get(created.id).released && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  again.Stop();
  const Job job = Get(created.id);
  EXPECT_EQ(job.phase, Phase::kSucceeded);
  EXPECT_TRUE(job.logs_archived && job.released);
  std::lock_guard lock(fleet_.mu_);
  EXPECT_EQ(fleet_.submits.size(), 1u);
  EXPECT_THAT(fleet_.calls, ElementsAre("collect", "release"));
  EXPECT_THAT(Path(created.id), ElementsAre(Phase::kQueued, Phase::kPackaging, Phase::kSubmitting,
                                            Phase::kPending, Phase::kRunning, Phase::kSucceeded));
}

// A controller process is SIGKILLed at a failpoint; a new one over the same database, object
// store and fleet finishes the job exactly once.
class FailpointTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FailpointTest, ARestartAfterSigkillFinishesTheJobOnce) {
  TempDir tmp;
  const fs::path db = tmp.path() / "state.db";
  const fs::path fleet_log = tmp.path() / "fleet.log";
  std::string job_id;
  std::string upload;
  {
    auto store = store::Store::Open(db);
    Job j;
    j.id = store::NewJobId();
    j.owner = "alice";
    j.name = "tiny";
    j.fleet = "local";
    j.spec_json = jobspec::ToCanonicalText(Spec());
    j.upload_path = upload = (tmp.path() / "control/uploads" / (j.id + ".zip")).string();
    WriteZip(upload, {{"train.py", "print('hi')\n"}});
    job_id = store->CreateJob(j, "api").id;
  }

  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("STARFORGE_FAILPOINT", GetParam(), 1);
    auto store = store::Store::Open(db);
    auto objects = objstore::OpenFilesystem(tmp.path() / "objects");
    FakeFleet fleet("local", fleet_log);
    fleet.auto_run = true;
    Controller c(*store, {{"local", &fleet}}, *objects, FastOptions(tmp.path()));
    for (int i = 0; i < 50 && c.Reconcile(job_id); ++i) {
    }
    ::_exit(0);  // the failpoint was never reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the controller did not die at " << GetParam();

  auto store = store::Store::Open(db);
  auto objects = objstore::OpenFilesystem(tmp.path() / "objects");
  FakeFleet fleet("local", fleet_log);
  fleet.auto_run = true;
  // The fleet outlives the server: what the dead controller submitted is still there.
  if (ReadFile(fleet_log).find("submit") != std::string::npos) {
    fleet.state[job_id] = fleet::State::kPending;
  }
  Controller c(*store, {{"local", &fleet}}, *objects, FastOptions(tmp.path()));
  for (int i = 0; i < 50 && c.Reconcile(job_id); ++i) {
  }

  const Job job = *store->GetJob(job_id);
  EXPECT_EQ(job.phase, Phase::kSucceeded) << job.reason << ": " << job.message;
  EXPECT_TRUE(job.logs_archived);
  EXPECT_TRUE(job.released);
  EXPECT_EQ(job.upload_path, "");
  EXPECT_FALSE(fs::exists(upload));
  EXPECT_FALSE(fs::exists(tmp.path() / "control/work" / job_id));
  EXPECT_TRUE(fs::exists(tmp.path() / "objects" / capsule::ObjectKey(job.capsule_sha256)));
  // Every phase once, in order: nothing was done twice or skipped.
  std::vector<Phase> path;
  for (const auto& t : store->ListTransitions(job_id))
    path.push_back(t.to);
  EXPECT_THAT(path, ElementsAre(Phase::kQueued, Phase::kPackaging, Phase::kSubmitting,
                                Phase::kPending, Phase::kRunning, Phase::kSucceeded));
  // Across both processes: the logs collected once and the job released once (a Submit may be
  // repeated after "submitted": the fleet answers it with the same handle).
  const std::string log = ReadFile(fleet_log);
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("collect"), 1u) << log;
  EXPECT_EQ(count("release"), 1u) << log;
  EXPECT_EQ(count("submit"), std::string(GetParam()) == "submitted" ? 2u : 1u) << log;
  EXPECT_EQ(job.fleet_handle, "h-" + job_id);
}

INSTANTIATE_TEST_SUITE_P(Points, FailpointTest,
                         ::testing::Values("packaging-built", "capsule-stored", "submitted",
                                           "running-observed", "terminal-recorded",
                                           "logs-archived"),
                         [](const auto& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// A capsule the client built (the API checked it) is stored as it is, not unpacked and packed
// again; one named by digest goes on only if the object store still has it.
TEST_F(ControllerTest, AClientBuiltCapsuleIsStoredAsItIsAndANamedOneMustExist) {
  support::WriteFile(root() / "code/train.py", "print('hi')\n");
  const capsule::CollectResult files = capsule::Collect(root() / "code");
  fs::create_directories(root() / "control/uploads");
  capsule::BuildOptions opts;
  opts.output = root() / "control/uploads/built.zip";
  const capsule::BuildResult built = capsule::Build(files.files, Spec(), opts);
  ASSERT_TRUE(built.ok());
  const std::string bytes = ReadFile(opts.output);
  auto create = [&](const std::string& upload, const std::string& sha) {
    Job j;
    j.id = store::NewJobId();
    j.owner = "alice";
    j.name = Spec().name;
    j.fleet = "local";
    j.spec_json = jobspec::ToCanonicalText(Spec());
    j.upload_path = upload;
    j.capsule_sha256 = sha;
    return store_->CreateJob(j, "user:alice").id;
  };

  Job job = DriveTo(create(opts.output.string(), built.sha256), Phase::kPending);
  ASSERT_EQ(job.phase, Phase::kPending) << job.reason << ": " << job.message;
  EXPECT_EQ(job.capsule_sha256, built.sha256);
  EXPECT_EQ(ReadFile(root() / "objects" / capsule::ObjectKey(built.sha256)), bytes);
  EXPECT_FALSE(fs::exists(opts.output));  // the upload is gone once stored
  EXPECT_FALSE(fs::exists(root() / "control/work" / job.id)) << "nothing was unpacked";

  job = DriveTo(create("", built.sha256), Phase::kPending);
  EXPECT_EQ(job.phase, Phase::kPending) << job.reason << ": " << job.message;
  EXPECT_EQ(fleet_.submits.back().capsule_sha256, built.sha256);

  job = Drive(create("", std::string(64, 'a')));
  EXPECT_EQ(job.phase, Phase::kFailed);
  EXPECT_EQ(job.reason, store::reasons::kPackagingFailed);
  EXPECT_THAT(job.message, HasSubstr("is no longer in"));
  EXPECT_THAT(job.message, HasSubstr("submit again"));
}

}  // namespace
}  // namespace starforge::controller
