// The control plane's database: SQLite in WAL mode, one file. Writes go through one connection
// guarded by a mutex (one writer); reads through a second connection, so that a request that only
// reads (authenticating a token, listing jobs) never waits behind a write. The schema and its
// numbered migrations live only in store.cc. Every method is one transaction: when a write
// returns, the change is durable — its commit is in the WAL and the WAL is on disk — so the caller
// may act on it (state is written before the action that depends on it). The WAL's fsync happens
// after the writer's lock is released and is shared by every commit made meanwhile (a group
// commit): concurrent writers wait for one fsync together instead of one after another.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "starforge/store/job.h"
#include "starforge/store/playground.h"

struct sqlite3;

namespace starforge::store {

// A failure of the database itself (I/O, corruption, a newer schema): not a user error, and
// nothing a caller can do about but report it (the controller retries the reconcile, the API
// answers 500).
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct JobFilter {
  std::optional<std::string> owner;  // only this user's jobs
  std::optional<Phase> phase;
  std::optional<std::string> fleet;
  std::optional<std::string> name;
  // Names containing this, ignoring ASCII case (indexed: fast on 100k jobs from 3 characters).
  std::optional<std::string> name_contains;
  bool only_unfinished = false;  // not terminal, or terminal with cleanup left to do
  int64_t before_seq = 0;        // > 0: only seq < before_seq (cursor paging)
  int limit = 0;                 // 0 = no limit
};

// A write to a job — its row (and with it a transition) or one of its events — numbered in the
// order this process made it, from 1. What the API's watches (GET …?watch=1) follow.
struct Change {
  int64_t number = 0;
  std::string job_id;
};

// The fields a phase change touches; applied together with the Transition row.
struct PhaseChange {
  Phase to = Phase::kQueued;
  std::string reason;
  std::string message;
  std::string cause;
};

class Store {
 public:
  // Opens (creating the file and its parent directory if needed) and migrates to the newest
  // schema. Throws StoreError naming the file when it cannot, or when the file's schema is
  // newer than this binary knows.
  static std::unique_ptr<Store> Open(const std::filesystem::path& file);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  int SchemaVersion();  // the applied migration number

  // Inserts `job` (id, owner, name, fleet, spec_json, upload_path, capsule_sha256 — set when the
  // client built or named the capsule; phase Queued) and its first
  // Transition (from nullopt) in one transaction; fills seq/created_at/updated_at/version.
  Job CreateJob(Job job, const std::string& cause);
  std::optional<Job> GetJob(const std::string& id);
  // Newest first (seq descending).
  std::vector<Job> ListJobs(const JobFilter& filter);
  // Count of jobs per phase (for /metrics).
  std::vector<std::pair<Phase, int64_t>> CountByPhase();

  // Runs `mutate` on the current row and writes the result if the version still matches, in
  // one transaction. If `change` is set and differs from the current phase, also sets phase,
  // reason, message, started_at/finished_at and appends the Transition. Refuses (returns
  // nullopt, writes nothing) a change out of a terminal phase. Returns the stored job.
  // Also nullopt for a missing job or a change back to an earlier phase. `mutate` runs under
  // the writer's lock (it may read the store, not write it); the store keeps seq, id, created_at,
  // updated_at, started_at, finished_at and version itself, and a phase set by `mutate` throws
  // std::logic_error (phases change only with `change`, which records the Transition).
  std::optional<Job> UpdateJob(const std::string& id, const std::function<void(Job&)>& mutate,
                               const std::optional<PhaseChange>& change = std::nullopt);

  std::vector<Transition> ListTransitions(const std::string& job_id);
  // Total number of transitions recorded (for /metrics).
  int64_t CountTransitions();

  // Appends an event, or bumps count/last_at of the job's event with the same type, reason,
  // message and source.
  void RecordEvent(const std::string& job_id, const std::string& type, const std::string& reason,
                   const std::string& message, const std::string& source);
  std::vector<Event> ListEvents(const std::string& job_id);  // oldest first
  // When the job's newest event of this reason from this source last happened (Unix ms; 0 when
  // it has none): what a clock needs without reading every event back.
  int64_t LastEventAt(const std::string& job_id, const std::string& reason,
                      const std::string& source);

  // The change journal: the newest kJournalSize changes made through this Store (not by other
  // processes), kept in memory so that a watch learns what changed without scanning the jobs.
  static constexpr size_t kJournalSize = 10'000;
  int64_t LastChange();  // the newest change's number; 0 before the first
  // The changes numbered above `after` (oldest first; a job may appear more than once), or
  // nullopt when some of them are no longer kept (more than kJournalSize since `after`, or
  // `after` is ahead of this process): the caller lists again.
  std::optional<std::vector<Change>> ChangesSince(int64_t after);

  // Users and API tokens. Tokens are stored as SHA-256 hex only; the clear token is returned
  // once by CreateToken and never again.
  std::optional<User> GetUser(const std::string& name);
  // Creates or returns; admin only grows. A bad name throws std::invalid_argument saying why.
  User EnsureUser(const std::string& name, bool admin);
  int64_t CountUsers();
  // A new random token "sf_" + 40 [a-z0-9] for `user` (which must exist); returns it in clear.
  // `expires_at`: Unix ms after which it is refused (0: never).
  std::string CreateToken(const std::string& user, const std::string& description,
                          int64_t expires_at = 0);
  // The user owning `token` if it is neither revoked nor expired, or nullopt (constant-time
  // compare of hashes).
  std::optional<User> Authenticate(const std::string& token);
  // Tokens (of `user`, or all for ""), oldest first; never the token itself.
  std::vector<TokenInfo> ListTokens(const std::string& user = "");
  // Revokes the token named `id` ("tok-" + 12 hex) at once; what it was, or nullopt if unknown.
  // Revoking twice keeps the first time.
  std::optional<TokenInfo> RevokeToken(const std::string& id);
  // Grants or takes away admin rights; false when there is no such user.
  bool SetAdmin(const std::string& name, bool admin);

  // How many changes the journal keeps (kJournalSize); tests make it small.
  void SetJournalSizeForTesting(size_t n);

  // Playgrounds (store/playground.h). CreatePlayground fills id (when empty), seq, created_at,
  // updated_at and version; the state is Starting.
  Playground CreatePlayground(Playground playground);
  std::optional<Playground> GetPlayground(const std::string& id);
  // Newest first; `owner` "" = everyone's; `only_unfinished`: not terminal or not released.
  std::vector<Playground> ListPlaygrounds(const std::string& owner, bool only_unfinished);
  // Like UpdateJob: `mutate` on the current row under the lock; the store keeps identity, times
  // and version, sets ready_at/finished_at when the state enters Ready/a terminal state, and
  // refuses (nullopt, nothing written) a state change out of a terminal state or backwards.
  std::optional<Playground> UpdatePlayground(const std::string& id,
                                             const std::function<void(Playground&)>& mutate);

  // Current time in Unix ms; tests may replace it.
  void SetClockForTesting(std::function<int64_t()> now);

 private:
  Store(sqlite3* db, sqlite3* reader, std::filesystem::path wal);
  int64_t Now();
  void Journal(const std::string& job_id);  // after a commit
  // Under mu_, right after a COMMIT: the commit's number, for Sync.
  int64_t Committed() { return ++commits_; }
  // Returns once commit `ticket` (and every one before it) is on disk: one fdatasync of the WAL
  // for every caller waiting meanwhile. Throws StoreError if the disk refuses (and from then on:
  // after a failed fsync the kernel may have dropped the pages, so no later one proves anything).
  void Sync(int64_t ticket);
  // After a write's COMMIT, under `lock` (of mu_): releases the writer and waits for Sync.
  void Durable(std::unique_lock<std::mutex>& lock) {
    const int64_t ticket = Committed();
    lock.unlock();
    Sync(ticket);
  }
  std::mutex mu_;       // the writer connection db_
  std::mutex read_mu_;  // the reader connection reader_
  std::mutex sync_mu_;
  std::condition_variable sync_cv_;
  bool syncing_ = false;
  int64_t synced_ = 0;
  std::string sync_error_;
  std::atomic<int64_t> commits_{0};
  std::filesystem::path wal_;
  int wal_fd_ = -1;
  sqlite3* reader_;
  std::mutex journal_mu_;  // not mu_: a watch must not wait behind a transaction's fsync
  std::deque<Change> journal_;
  size_t journal_size_ = kJournalSize;
  int64_t last_change_ = 0;
  sqlite3* db_;
  std::function<int64_t()> now_;
};

// A fresh job id: "j-" + 10 random [a-z0-9] (from a CSPRNG).
std::string NewJobId();
// A fresh playground id: "p-" + 10 random [a-z0-9].
std::string NewPlaygroundId();

}  // namespace starforge::store
