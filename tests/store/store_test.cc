// The store against real SQLite files: schema, jobs, transitions, events, tokens, concurrency
// and durability across SIGKILL.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "starforge/store/store.h"
#include "support/files.h"
#include "support/temp_dir.h"

namespace starforge::store {
namespace {

namespace fs = std::filesystem;
using support::ReadFile;
using support::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// Runs SQL on the file directly (not through Store); every row's columns ("NULL" for a null), and
// sqlite's error in *error ("" when none).
std::vector<std::vector<std::string>> RawQuery(const fs::path& file, const std::string& sql,
                                               std::string* error = nullptr) {
  sqlite3* db = nullptr;
  sqlite3_open(file.c_str(), &db);
  std::vector<std::vector<std::string>> rows;
  char* err = nullptr;
  sqlite3_exec(
      db, sql.c_str(),
      [](void* o, int n, char** values, char**) {
        auto& row = static_cast<std::vector<std::vector<std::string>>*>(o)->emplace_back();
        for (int i = 0; i < n; ++i)
          row.emplace_back(values[i] != nullptr ? values[i] : "NULL");
        return 0;
      },
      &rows, &err);
  if (error != nullptr) *error = err != nullptr ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  return rows;
}

// The first column of the first row, or "" (no row, or a null).
std::string RawSql(const fs::path& file, const std::string& sql, std::string* error = nullptr) {
  const auto rows = RawQuery(file, sql, error);
  if (rows.empty() || rows[0].empty() || rows[0][0] == "NULL") return "";
  return rows[0][0];
}

// Every row `sql` returns, its columns joined by '|', one row per line.
std::string RawRows(const fs::path& file, const std::string& sql) {
  std::string out;
  for (const auto& row : RawQuery(file, sql)) {
    for (size_t i = 0; i < row.size(); ++i)
      out += (i > 0 ? "|" : "") + row[i];
    out += "\n";
  }
  return out;
}

Job NewJob(const std::string& owner = "alice", const std::string& name = "train",
           const std::string& fleet = "local") {
  Job j;
  j.id = NewJobId();
  j.owner = owner;
  j.name = name;
  j.fleet = fleet;
  j.spec_json = R"({"name":")" + name + R"("})";
  j.upload_path = "/tmp/upload.zip";
  return j;
}

PhaseChange To(Phase phase, std::string reason = "", std::string message = "") {
  return PhaseChange{phase, std::move(reason), std::move(message), "controller"};
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = Store::Open(file_);
    store_->SetClockForTesting([this] { return clock_.load(); });
  }
  // Moves `id` to `phase` through every phase between (as the controller would).
  void Advance(const std::string& id, Phase phase) {
    for (int p = static_cast<int>(store_->GetJob(id)->phase) + 1; p <= static_cast<int>(phase);
         ++p) {
      if (p > static_cast<int>(Phase::kRunning) && p != static_cast<int>(phase)) continue;
      ASSERT_TRUE(store_->UpdateJob(id, nullptr, To(static_cast<Phase>(p))));
    }
  }
  TempDir tmp_;
  fs::path file_ = tmp_ / "state/starforge.db";
  std::atomic<int64_t> clock_{1'000'000};
  std::unique_ptr<Store> store_;
};

TEST_F(StoreTest, FreshFileIsMigratedAndReopens) {
  EXPECT_TRUE(fs::exists(file_));  // the parent directory was created too
  EXPECT_EQ(store_->SchemaVersion(), 5);
  EXPECT_EQ(RawSql(file_, "PRAGMA journal_mode"), "wal");
  const Job job = store_->CreateJob(NewJob(), "api");
  store_.reset();

  store_ = Store::Open(file_);  // an already-migrated file: nothing to do, nothing lost
  EXPECT_EQ(store_->SchemaVersion(), 5);
  auto again = store_->GetJob(job.id);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->spec_json, job.spec_json);
  EXPECT_EQ(RawSql(file_, "SELECT count(*) FROM sqlite_master WHERE name = 'tokens'"), "1");
}

TEST_F(StoreTest, RefusesASchemaNewerThanTheBinary) {
  store_.reset();
  RawSql(file_, "PRAGMA user_version = 7");
  try {
    Store::Open(file_);
    FAIL() << "opened a newer schema";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr(file_.string()));
    EXPECT_THAT(e.what(), HasSubstr("schema version 7"));
    EXPECT_THAT(e.what(), HasSubstr("newer"));
  }
  EXPECT_EQ(RawSql(file_, "PRAGMA user_version"), "7");  // left as it was
}

TEST_F(StoreTest, RefusesAFileThatIsNotADatabase) {
  const fs::path bogus = tmp_ / "notes.txt";
  std::ofstream(bogus) << std::string(4096, 'x');
  try {
    Store::Open(bogus);
    FAIL() << "opened a text file";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr(bogus.string()));
    EXPECT_THAT(e.what(), HasSubstr("not a database"));
  }
  EXPECT_EQ(ReadFile(bogus), std::string(4096, 'x'));
}

TEST_F(StoreTest, CreateJobStoresItQueuedWithItsFirstTransition) {
  Job in = NewJob("bob", "tiny-train", "kuberay");
  in.capsule_sha256 = "c0ffee";  // a capsule the client built or named comes with the submission
  in.fleet_handle = "ignored";   // only the submission's fields are taken
  in.phase = Phase::kRunning;
  const Job job = store_->CreateJob(in, "user:bob");
  EXPECT_GT(job.seq, 0);
  EXPECT_EQ(job.phase, Phase::kQueued);
  EXPECT_EQ(job.version, 1);
  EXPECT_EQ(job.created_at, 1'000'000);
  EXPECT_EQ(job.capsule_sha256, "c0ffee");
  EXPECT_EQ(job.fleet_handle, "");

  auto got = store_->GetJob(job.id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->owner, "bob");
  EXPECT_EQ(got->name, "tiny-train");
  EXPECT_EQ(got->fleet, "kuberay");
  EXPECT_EQ(got->upload_path, "/tmp/upload.zip");
  EXPECT_EQ(got->capsule_sha256, "c0ffee");
  EXPECT_EQ(got->phase, Phase::kQueued);
  EXPECT_FALSE(got->exit_code);
  EXPECT_EQ(got->seq, job.seq);

  auto transitions = store_->ListTransitions(job.id);
  ASSERT_EQ(transitions.size(), 1u);
  EXPECT_FALSE(transitions[0].from);
  EXPECT_EQ(transitions[0].to, Phase::kQueued);
  EXPECT_EQ(transitions[0].cause, "user:bob");
  EXPECT_EQ(transitions[0].at, 1'000'000);

  EXPECT_FALSE(store_->GetJob("j-doesnotexi"));
  EXPECT_THROW(store_->CreateJob(in, "api"), StoreError);  // the same id twice
}

TEST_F(StoreTest, ListFiltersNewestFirstAndPagesByCursor) {
  std::vector<Job> made;
  for (int i = 0; i < 7; ++i) {
    made.push_back(store_->CreateJob(
        NewJob(i % 2 ? "bob" : "alice", i < 3 ? "a" : "b", i == 6 ? "kuberay" : "local"), "api"));
  }
  Advance(made[1].id, Phase::kRunning);

  auto ids = [](const std::vector<Job>& jobs) {
    std::vector<std::string> out;
    for (const auto& j : jobs)
      out.push_back(j.id);
    return out;
  };
  auto all = store_->ListJobs({});
  ASSERT_EQ(all.size(), 7u);
  for (size_t i = 0; i < 7; ++i)
    EXPECT_EQ(all[i].id, made[6 - i].id);  // newest first

  JobFilter bob;
  bob.owner = "bob";
  EXPECT_EQ(ids(store_->ListJobs(bob)),
            (std::vector<std::string>{made[5].id, made[3].id, made[1].id}));
  JobFilter running;
  running.phase = Phase::kRunning;
  EXPECT_EQ(ids(store_->ListJobs(running)), std::vector<std::string>{made[1].id});
  JobFilter kuberay;
  kuberay.fleet = "kuberay";
  EXPECT_EQ(ids(store_->ListJobs(kuberay)), std::vector<std::string>{made[6].id});
  JobFilter alice_a;
  alice_a.owner = "alice";
  alice_a.name = "a";
  EXPECT_EQ(ids(store_->ListJobs(alice_a)), (std::vector<std::string>{made[2].id, made[0].id}));

  // Paging: each page continues below the last seq of the previous one, with no overlap.
  std::vector<std::string> paged;
  JobFilter page;
  page.limit = 3;
  for (int n = 0; n < 5; ++n) {
    auto got = store_->ListJobs(page);
    if (got.empty()) break;
    EXPECT_LE(got.size(), 3u);
    for (const auto& j : got)
      paged.push_back(j.id);
    page.before_seq = got.back().seq;
  }
  EXPECT_EQ(paged, ids(all));
}

TEST_F(StoreTest, NameContainsFindsSubstringsIgnoringCaseAndPages) {
  std::vector<Job> made;
  for (const char* name : {"llm-eval-7b", "train-7b", "eval", "pretrain", "xeval2", "ev"})
    made.push_back(store_->CreateJob(NewJob(made.size() % 2 ? "bob" : "alice", name), "api"));
  auto names = [this](const JobFilter& f) {
    std::vector<std::string> out;
    for (const auto& j : store_->ListJobs(f))
      out.push_back(j.name);
    return out;
  };
  auto contains = [](std::string s) {
    JobFilter f;
    f.name_contains = std::move(s);
    return f;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names(contains("eval")), (V{"xeval2", "eval", "llm-eval-7b"}));  // newest first
  EXPECT_EQ(names(contains("EVal")), (V{"xeval2", "eval", "llm-eval-7b"}));
  EXPECT_EQ(names(contains("rain")), (V{"pretrain", "train-7b"}));
  EXPECT_EQ(names(contains("7b")), (V{"train-7b", "llm-eval-7b"}));  // 2 characters: no trigram
  EXPECT_EQ(names(contains("ev")), (V{"ev", "xeval2", "eval", "llm-eval-7b"}));
  EXPECT_EQ(names(contains("e")).size(), 5u);
  EXPECT_EQ(names(contains("llm-eval-7b")), V{"llm-eval-7b"});
  EXPECT_TRUE(names(contains("evals")).empty());
  EXPECT_TRUE(names(contains("tra1n")).empty());
  // What FTS5 would read as query syntax is taken literally.
  for (const char* odd : {"\"", "e\"v", "ev*", "a OR b", "NEAR(a b)", "%", "_", "eval\"\""})
    EXPECT_TRUE(names(contains(odd)).empty()) << odd;

  JobFilter alice_eval = contains("eval");
  alice_eval.owner = "bob";
  EXPECT_TRUE(names(alice_eval).empty());  // every eval is alice's
  alice_eval.owner = "alice";
  alice_eval.name = "eval";
  EXPECT_EQ(names(alice_eval), V{"eval"});
  JobFilter page = contains("eval");
  page.limit = 2;
  auto first = store_->ListJobs(page);
  ASSERT_EQ(first.size(), 2u);
  page.before_seq = first.back().seq;
  EXPECT_EQ(names(page), V{"llm-eval-7b"});

  // A name that changes is found by its new name only (UpdateJob writes whatever mutate set).
  ASSERT_TRUE(store_->UpdateJob(made[1].id, [](Job& j) { j.name = "finetune"; }));
  EXPECT_EQ(names(contains("train")), V{"pretrain"});
  EXPECT_EQ(names(contains("tune")), V{"finetune"});
  ASSERT_TRUE(store_->UpdateJob(made[3].id, [](Job& j) { j.message = "same name"; }));
  EXPECT_EQ(names(contains("train")), V{"pretrain"});
}

// A database made by the previous schema (version 4, without the name index) is indexed when
// opened: its jobs are found by substring at once.
TEST_F(StoreTest, TheNameIndexIsBuiltForJobsOfAnOlderDatabase) {
  const Job old = store_->CreateJob(NewJob("alice", "old-eval-run"), "api");
  store_.reset();
  std::string error;
  RawSql(file_,
         "DROP TRIGGER jobs_name_fts_insert; DROP TRIGGER jobs_name_fts_delete; "
         "DROP TRIGGER jobs_name_fts_update; DROP TABLE jobs_name_fts; PRAGMA user_version = 4",
         &error);
  ASSERT_EQ(error, "");
  ASSERT_EQ(RawSql(file_, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'jobs_name_fts%'"),
            "0");

  store_ = Store::Open(file_);
  EXPECT_EQ(store_->SchemaVersion(), 5);
  JobFilter f;
  f.name_contains = "eval";
  auto found = store_->ListJobs(f);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].id, old.id);
  store_->CreateJob(NewJob("alice", "new-eval"), "api");
  EXPECT_EQ(store_->ListJobs(f).size(), 2u);
}

TEST_F(StoreTest, OnlyUnfinishedIncludesTerminalJobsWithCleanupLeft) {
  const Job queued = store_->CreateJob(NewJob(), "api");
  const Job running = store_->CreateJob(NewJob(), "api");
  Advance(running.id, Phase::kRunning);
  const Job no_logs = store_->CreateJob(NewJob(), "api");
  Advance(no_logs.id, Phase::kSucceeded);
  const Job not_released = store_->CreateJob(NewJob(), "api");
  Advance(not_released.id, Phase::kFailed);
  store_->UpdateJob(not_released.id, [](Job& j) { j.logs_archived = true; });
  const Job done = store_->CreateJob(NewJob(), "api");
  ASSERT_TRUE(store_->UpdateJob(done.id, nullptr, To(Phase::kCancelled)));
  store_->UpdateJob(done.id, [](Job& j) { j.logs_archived = j.released = true; });

  JobFilter f;
  f.only_unfinished = true;
  std::vector<std::string> got;
  for (const auto& j : store_->ListJobs(f))
    got.push_back(j.id);
  EXPECT_EQ(got, (std::vector<std::string>{not_released.id, no_logs.id, running.id, queued.id}));
}

TEST_F(StoreTest, PhaseChangesSetTimesAndAppendTransitionsInOrder) {
  const Job job = store_->CreateJob(NewJob(), "api");
  clock_ = 2'000'000;
  auto j = store_->UpdateJob(job.id, nullptr, To(Phase::kPackaging));
  ASSERT_TRUE(j);
  EXPECT_EQ(j->version, 2);
  EXPECT_EQ(j->updated_at, 2'000'000);
  ASSERT_TRUE(store_->UpdateJob(
      job.id, [](Job& x) { x.capsule_sha256 = "abc"; }, To(Phase::kSubmitting)));
  ASSERT_TRUE(store_->UpdateJob(
      job.id, [](Job& x) { x.fleet_handle = "h-1"; },
      To(Phase::kPending, "WaitingForResources", "2 jobs ahead")));
  // The same phase again: reason/message of `change` are ignored, no transition, mutate applies.
  j = store_->UpdateJob(
      job.id, [](Job& x) { x.message = "1 job ahead"; }, To(Phase::kPending, "Other", "other"));
  ASSERT_TRUE(j);
  EXPECT_EQ(j->reason, "WaitingForResources");
  EXPECT_EQ(j->message, "1 job ahead");
  EXPECT_EQ(j->started_at, 0);

  clock_ = 3'000'000;
  j = store_->UpdateJob(job.id, nullptr, To(Phase::kRunning));
  ASSERT_TRUE(j);
  EXPECT_EQ(j->started_at, 3'000'000);
  EXPECT_EQ(j->finished_at, 0);
  EXPECT_EQ(j->reason, "");

  clock_ = 4'000'000;
  j = store_->UpdateJob(
      job.id, [](Job& x) { x.exit_code = 3; }, To(Phase::kFailed, "AppFailed", "exit code 3"));
  ASSERT_TRUE(j);
  EXPECT_EQ(j->finished_at, 4'000'000);
  EXPECT_EQ(j->started_at, 3'000'000);
  EXPECT_EQ(j->exit_code, 3);
  EXPECT_EQ(j->capsule_sha256, "abc");
  EXPECT_EQ(j->fleet_handle, "h-1");
  EXPECT_EQ(j->version, 7);

  auto t = store_->ListTransitions(job.id);
  ASSERT_EQ(t.size(), 6u);
  const std::vector<Phase> to = {Phase::kQueued,  Phase::kPackaging, Phase::kSubmitting,
                                 Phase::kPending, Phase::kRunning,   Phase::kFailed};
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].to, to[i]) << i;
    if (i > 0) {
      EXPECT_EQ(t[i].from, to[i - 1]) << i;
      EXPECT_GT(t[i].seq, t[i - 1].seq);
      EXPECT_EQ(t[i].cause, "controller");
    }
  }
  EXPECT_EQ(t[3].reason, "WaitingForResources");
  EXPECT_EQ(t[3].message, "2 jobs ahead");
  EXPECT_EQ(t[5].reason, "AppFailed");
  EXPECT_EQ(t[5].at, 4'000'000);
  EXPECT_EQ(store_->CountTransitions(), 6);
}

TEST_F(StoreTest, ATerminalPhaseIsFinalAndJobsNeverGoBack) {
  const Job job = store_->CreateJob(NewJob(), "api");
  Advance(job.id, Phase::kRunning);
  EXPECT_FALSE(store_->UpdateJob(job.id, nullptr, To(Phase::kPending)));  // back: refused
  ASSERT_TRUE(store_->UpdateJob(job.id, nullptr, To(Phase::kSucceeded, "Completed")));
  const Job before = *store_->GetJob(job.id);

  for (Phase p : {Phase::kFailed, Phase::kCancelled, Phase::kRunning, Phase::kQueued}) {
    EXPECT_FALSE(store_->UpdateJob(
        job.id, [](Job& x) { x.message = "must not be written"; }, To(p)))
        << ToString(p);
  }
  const Job after = *store_->GetJob(job.id);
  EXPECT_EQ(after.phase, Phase::kSucceeded);
  EXPECT_EQ(after.version, before.version);
  EXPECT_EQ(after.message, before.message);
  EXPECT_EQ(store_->ListTransitions(job.id).size(), 6u);

  // Cleanup still updates a terminal job (no phase change).
  auto cleaned = store_->UpdateJob(job.id, [](Job& x) { x.logs_archived = true; });
  ASSERT_TRUE(cleaned);
  EXPECT_TRUE(cleaned->logs_archived);
  EXPECT_EQ(cleaned->version, before.version + 1);

  EXPECT_FALSE(store_->UpdateJob("j-nosuchjob0", [](Job& x) { x.released = true; }));
  // The phase moves only with a PhaseChange (which records the transition).
  EXPECT_THROW(store_->UpdateJob(job.id, [](Job& x) { x.phase = Phase::kFailed; }),
               std::logic_error);
  // Identity and store-owned times cannot be rewritten by mutate.
  auto same = store_->UpdateJob(job.id, [](Job& x) {
    x.id = "j-other00000";
    x.created_at = 5;
    x.finished_at = 6;
  });
  ASSERT_TRUE(same);
  EXPECT_EQ(same->id, job.id);
  EXPECT_EQ(same->created_at, before.created_at);
  EXPECT_EQ(same->finished_at, before.finished_at);
}

TEST_F(StoreTest, TheTransitionLogIsAppendOnlyInTheDatabaseItself) {
  const Job job = store_->CreateJob(NewJob(), "api");
  std::string error;
  RawSql(file_, "UPDATE transitions SET cause = 'forged'", &error);
  EXPECT_THAT(error, HasSubstr("append-only"));
  RawSql(file_, "DELETE FROM transitions", &error);
  EXPECT_THAT(error, HasSubstr("append-only"));
  EXPECT_EQ(store_->ListTransitions(job.id).at(0).cause, "api");
}

TEST_F(StoreTest, CountByPhaseListsEveryPhase) {
  store_->CreateJob(NewJob(), "api");
  const Job b = store_->CreateJob(NewJob(), "api");
  Advance(b.id, Phase::kRunning);
  auto counts = store_->CountByPhase();
  ASSERT_EQ(counts.size(), 8u);
  for (const auto& [phase, n] : counts) {
    EXPECT_EQ(n, phase == Phase::kQueued || phase == Phase::kRunning ? 1 : 0) << ToString(phase);
  }
}

TEST_F(StoreTest, EventsAreDedupedIntoCounts) {
  const Job job = store_->CreateJob(NewJob(), "api");
  const Job other = store_->CreateJob(NewJob(), "api");
  clock_ = 10;
  store_->RecordEvent(job.id, "Warning", "WaitingForResources", "needs 4 GPUs", "fleet:local");
  clock_ = 20;
  store_->RecordEvent(job.id, "Normal", "Submitted", "handle h", "controller");
  clock_ = 30;
  store_->RecordEvent(job.id, "Warning", "WaitingForResources", "needs 4 GPUs", "fleet:local");
  store_->RecordEvent(job.id, "Warning", "WaitingForResources", "needs 4 GPUs", "kuberay:x");
  store_->RecordEvent(job.id, "Warning", "WaitingForResources", "needs 2 GPUs", "fleet:local");
  store_->RecordEvent(other.id, "Warning", "WaitingForResources", "needs 4 GPUs", "fleet:local");

  auto events = store_->ListEvents(job.id);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].reason, "WaitingForResources");
  EXPECT_EQ(events[0].count, 2);
  EXPECT_EQ(events[0].first_at, 10);
  EXPECT_EQ(events[0].last_at, 30);
  EXPECT_EQ(events[1].reason, "Submitted");
  EXPECT_EQ(events[1].count, 1);
  EXPECT_EQ(events[2].source, "kuberay:x");
  EXPECT_EQ(events[3].message, "needs 2 GPUs");
  EXPECT_EQ(store_->ListEvents(other.id).size(), 1u);
  // The newest occurrence of one reason from one source, whatever the type or message.
  EXPECT_EQ(store_->LastEventAt(job.id, "WaitingForResources", "fleet:local"), 30);
  EXPECT_EQ(store_->LastEventAt(job.id, "Submitted", "controller"), 20);
  EXPECT_EQ(store_->LastEventAt(job.id, "Submitted", "fleet:local"), 0);
  EXPECT_EQ(store_->LastEventAt(job.id, "Admitted", "controller"), 0);
  EXPECT_EQ(store_->LastEventAt("j-nosuchjob0", "Submitted", "controller"), 0);
  // Read in order from an index: no sort (and no sort buffer) per read.
  const std::string plan =
      RawRows(file_, "EXPLAIN QUERY PLAN SELECT seq FROM events WHERE job_id = 'x' ORDER BY seq");
  EXPECT_THAT(plan, HasSubstr("events_by_job"));
  EXPECT_THAT(plan, Not(HasSubstr("TEMP B-TREE")));
  // An event must belong to a job (foreign key).
  EXPECT_THROW(store_->RecordEvent("j-nosuchjob0", "Normal", "X", "y", "z"), StoreError);
}

// The change journal the API's watches read: every committed write names its job, in order;
// a failed write names nothing; what was dropped from the bounded journal is reported, not skipped.
TEST_F(StoreTest, TheChangeJournalNamesEveryWriteInOrderAndSaysWhenItLostTrack) {
  EXPECT_EQ(store_->LastChange(), 0);
  ASSERT_TRUE(store_->ChangesSince(0));
  EXPECT_TRUE(store_->ChangesSince(0)->empty());
  const Job a = store_->CreateJob(NewJob(), "api");
  const Job b = store_->CreateJob(NewJob(), "api");
  store_->UpdateJob(a.id, [](Job& j) { j.cancel_requested = true; });
  store_->RecordEvent(b.id, "Normal", "Submitted", "h", "controller");
  EXPECT_THROW(store_->RecordEvent("j-nosuchjob0", "Normal", "X", "y", "z"), StoreError);
  EXPECT_FALSE(store_->UpdateJob("j-nosuchjob0", [](Job&) {}));
  ASSERT_EQ(store_->LastChange(), 4);
  auto all = store_->ChangesSince(0);
  ASSERT_TRUE(all);
  std::vector<std::string> ids;
  for (const Change& c : *all)
    ids.push_back(std::to_string(c.number) + ":" + c.job_id);
  EXPECT_EQ(ids, (std::vector<std::string>{"1:" + a.id, "2:" + b.id, "3:" + a.id, "4:" + b.id}));
  ASSERT_TRUE(store_->ChangesSince(3));
  EXPECT_EQ(store_->ChangesSince(3)->size(), 1u);
  EXPECT_TRUE(store_->ChangesSince(4)->empty());
  EXPECT_FALSE(store_->ChangesSince(5)) << "a position ahead of this process (another run's)";
  // Past the journal's size, the oldest positions are no longer answered.
  constexpr size_t kKept = 8;
  store_->SetJournalSizeForTesting(kKept);
  for (size_t i = 0; i < kKept; ++i)
    store_->RecordEvent(a.id, "Normal", "Tick", "t", "test");
  EXPECT_FALSE(store_->ChangesSince(3));
  const int64_t last = store_->LastChange();
  EXPECT_EQ(last, 4 + static_cast<int64_t>(kKept));
  EXPECT_FALSE(store_->ChangesSince(last - static_cast<int64_t>(kKept) - 1));
  auto recent = store_->ChangesSince(last - static_cast<int64_t>(kKept));
  ASSERT_TRUE(recent);
  EXPECT_EQ(recent->size(), kKept);
  EXPECT_EQ(recent->back().number, last);
}

TEST_F(StoreTest, UsersAndTokensAreStoredOnlyAsHashes) {
  EXPECT_EQ(store_->CountUsers(), 0);
  const User admin = store_->EnsureUser("admin", true);
  EXPECT_TRUE(admin.admin);
  EXPECT_TRUE(store_->EnsureUser("admin", false).admin);  // admin only grows
  EXPECT_FALSE(store_->EnsureUser("bob", false).admin);
  EXPECT_TRUE(store_->EnsureUser("bob", true).admin);
  EXPECT_EQ(store_->CountUsers(), 2);
  EXPECT_FALSE(store_->GetUser("carol"));
  EXPECT_THROW(store_->EnsureUser("Bad Name", false), std::invalid_argument);
  EXPECT_THROW(store_->EnsureUser("-dash", false), std::invalid_argument);
  EXPECT_THROW(store_->CreateToken("carol", "x"), StoreError);

  const std::string token = store_->CreateToken("admin", "first start");
  EXPECT_TRUE(std::regex_match(token, std::regex("sf_[a-z0-9]{40}"))) << token;
  const std::string token2 = store_->CreateToken("admin", "second");
  EXPECT_NE(token, token2);
  auto who = store_->Authenticate(token);
  ASSERT_TRUE(who);
  EXPECT_EQ(who->name, "admin");
  EXPECT_TRUE(who->admin);
  EXPECT_TRUE(store_->Authenticate(token2));

  std::string wrong = token;
  wrong.back() = wrong.back() == 'a' ? 'b' : 'a';
  EXPECT_FALSE(store_->Authenticate(wrong));
  EXPECT_FALSE(store_->Authenticate(""));
  EXPECT_FALSE(store_->Authenticate(token.substr(3)));
  EXPECT_FALSE(store_->Authenticate(token + "x"));

  // The clear token is nowhere in the database files; its hash is (so we read the right bytes).
  std::string bytes;
  for (const auto& entry : fs::directory_iterator(file_.parent_path())) {
    bytes += ReadFile(entry.path());
  }
  EXPECT_EQ(bytes.find(token), std::string::npos);
  EXPECT_EQ(bytes.find(token.substr(3)), std::string::npos);
  EXPECT_EQ(bytes.find(token2), std::string::npos);
  EXPECT_EQ(RawSql(file_, "SELECT count(*) FROM tokens"), "2");
  const std::string stored =
      RawSql(file_, "SELECT sha256 FROM tokens WHERE description = 'second'");
  EXPECT_TRUE(std::regex_match(stored, std::regex("[0-9a-f]{64}"))) << stored;
  EXPECT_NE(bytes.find(stored), std::string::npos);
}

TEST(NewJobIdTest, ShapeAndUniqueness) {
  std::set<std::string> seen;
  const std::regex shape("j-[a-z0-9]{10}");
  for (int i = 0; i < 2000; ++i) {
    const std::string id = NewJobId();
    ASSERT_TRUE(std::regex_match(id, shape)) << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 2000u);
}

TEST_F(StoreTest, ConcurrentUpdatesFromThreadsAndConnectionsLoseNothing) {
  const Job job = store_->CreateJob(NewJob(), "api");
  // Two connections to one file (as `forge token create` beside the server), four threads.
  std::unique_ptr<Store> second = Store::Open(file_);
  constexpr int kThreads = 4, kEach = 40;
  std::vector<std::thread> threads;
  std::atomic<int> created{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Store& s = t % 2 ? *second : *store_;
      for (int i = 0; i < kEach; ++i) {
        s.UpdateJob(job.id,
                    [](Job& j) { j.message = std::to_string(std::stoi("0" + j.message) + 1); });
        s.CreateJob(NewJob("t" + std::to_string(t)), "api");
        s.RecordEvent(job.id, "Normal", "Tick", "tick", "test");
        ++created;
      }
    });
  }
  for (auto& th : threads)
    th.join();
  const Job after = *store_->GetJob(job.id);
  EXPECT_EQ(after.message, std::to_string(kThreads * kEach));
  EXPECT_EQ(after.version, 1 + kThreads * kEach);
  auto all = store_->ListJobs({});
  EXPECT_EQ(all.size(), 1u + kThreads * kEach);
  std::set<int64_t> seqs;
  for (const auto& j : all)
    seqs.insert(j.seq);
  EXPECT_EQ(seqs.size(), all.size());
  EXPECT_EQ(store_->ListEvents(job.id).at(0).count, kThreads * kEach);
}

// Reads go through their own connection: a read made while a write holds the writer (here from
// inside UpdateJob's mutate, which runs under the writer's lock) is served at once and sees the
// last committed state, not the write in progress. With one connection for both, this deadlocks.
TEST_F(StoreTest, ReadsDoNotWaitForAWriteInProgress) {
  const Job job = store_->CreateJob(NewJob(), "api");
  std::optional<Job> seen;
  std::optional<User> who;
  const std::string token = [&] {
    store_->EnsureUser("alice", false);
    return store_->CreateToken("alice", "");
  }();
  ASSERT_TRUE(store_->UpdateJob(job.id, [&](Job& j) {
    j.message = "being written";
    seen = store_->GetJob(job.id);
    who = store_->Authenticate(token);
  }));
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->message, "");  // the committed row, not the write in progress
  EXPECT_EQ(seen->version, 1);
  ASSERT_TRUE(who);
  EXPECT_EQ(who->name, "alice");
  // Once the write returned, every read sees it (the reader starts a fresh read transaction).
  EXPECT_EQ(store_->GetJob(job.id)->message, "being written");
  EXPECT_EQ(store_->ListJobs({}).front().message, "being written");
}

// A child process writes jobs and reports each one after its write returned; it is SIGKILLed
// mid-stream. Every reported job must be in the file afterwards, whole.
TEST(StoreDurabilityTest, EveryCommittedRowSurvivesSigkill) {
  TempDir tmp;
  const fs::path file = tmp / "starforge.db";
  Store::Open(file).reset();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    auto store = Store::Open(file);
    for (;;) {
      Job j = store->CreateJob(NewJob(), "api");
      store->UpdateJob(
          j.id, [](Job& x) { x.fleet_handle = "handle-" + x.id; },
          PhaseChange{Phase::kPackaging, "", "", "controller"});
      store->RecordEvent(j.id, "Normal", "Packaging", "building", "controller");
      const std::string line = j.id + "\n";
      if (::write(fds[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        ::_exit(3);
      }
    }
  }
  ::close(fds[1]);
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reaper{pid};

  std::vector<std::string> ids;
  std::string buf;
  char chunk[4096];
  auto drain = [&](size_t want) {
    while (ids.size() < want) {
      const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
      if (n <= 0) return;
      buf.append(chunk, static_cast<size_t>(n));
      for (size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
        ids.push_back(buf.substr(0, nl));
        buf.erase(0, nl + 1);
      }
    }
  };
  drain(60);
  ASSERT_GE(ids.size(), 60u) << "the writer died early";
  ::kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  drain(SIZE_MAX);  // what it reported before dying
  ::close(fds[0]);

  auto store = Store::Open(file);
  for (const auto& id : ids) {
    auto job = store->GetJob(id);
    ASSERT_TRUE(job) << id << " was reported committed but is missing";
    EXPECT_EQ(job->phase, Phase::kPackaging);
    EXPECT_EQ(job->fleet_handle, "handle-" + id);
    EXPECT_EQ(store->ListTransitions(id).size(), 2u);
    EXPECT_EQ(store->ListEvents(id).size(), 1u);
  }
  // Every job in the file is whole: a transaction is never half there.
  for (const auto& job : store->ListJobs({})) {
    EXPECT_EQ(store->ListTransitions(job.id).size(), job.phase == Phase::kPackaging ? 2u : 1u);
  }
}

}  // namespace
}  // namespace starforge::store
