#include "starforge/store/store.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>
#include <system_error>
#include <tuple>

#include "starforge/common/format.h"
#include "starforge/common/sha256.h"

namespace starforge::store {

namespace {

namespace fs = std::filesystem;

// The schema, as numbered migrations: migration N takes a database from version N-1 to N and is
// applied in one transaction together with `PRAGMA user_version = N`, so a crash leaves either
// the old or the new schema. A released migration is never edited: append a new one.
struct Migration {
  int version;
  const char* sql;
};

constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- AUTOINCREMENT: a seq is never reused (cursors)
  id TEXT NOT NULL UNIQUE,
  owner TEXT NOT NULL,  -- no foreign key: a job's history outlives its user
  name TEXT NOT NULL,
  fleet TEXT NOT NULL,
  spec_json TEXT NOT NULL,
  phase TEXT NOT NULL CHECK (phase IN ('Queued', 'Packaging', 'Submitting', 'Pending', 'Running',
                                       'Succeeded', 'Failed', 'Cancelled')),
  reason TEXT NOT NULL DEFAULT '',
  message TEXT NOT NULL DEFAULT '',
  upload_path TEXT NOT NULL DEFAULT '',
  capsule_sha256 TEXT NOT NULL DEFAULT '',
  fleet_handle TEXT NOT NULL DEFAULT '',
  exit_code INTEGER,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  cancel_requested_at INTEGER NOT NULL DEFAULT 0,
  logs_archived INTEGER NOT NULL DEFAULT 0,
  released INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  started_at INTEGER NOT NULL DEFAULT 0,
  finished_at INTEGER NOT NULL DEFAULT 0,
  version INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX jobs_by_owner ON jobs (owner, seq);
CREATE INDEX jobs_by_phase ON jobs (phase, seq);
-- The controller's restart scan: jobs not terminal, or terminal with cleanup left to do.
CREATE INDEX jobs_unfinished ON jobs (seq)
  WHERE phase NOT IN ('Succeeded', 'Failed', 'Cancelled') OR logs_archived = 0 OR released = 0;

CREATE TABLE transitions (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id TEXT NOT NULL REFERENCES jobs (id),
  from_phase TEXT,
  to_phase TEXT NOT NULL,
  reason TEXT NOT NULL,
  message TEXT NOT NULL,
  cause TEXT NOT NULL,
  at INTEGER NOT NULL
);
CREATE INDEX transitions_by_job ON transitions (job_id, seq);
-- The audit log is append-only: the database itself refuses edits.
CREATE TRIGGER transitions_no_update BEFORE UPDATE ON transitions
  BEGIN SELECT RAISE(ABORT, 'transitions are append-only'); END;
CREATE TRIGGER transitions_no_delete BEFORE DELETE ON transitions
  BEGIN SELECT RAISE(ABORT, 'transitions are append-only'); END;

CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id TEXT NOT NULL REFERENCES jobs (id),
  type TEXT NOT NULL,
  reason TEXT NOT NULL,
  message TEXT NOT NULL,
  source TEXT NOT NULL,
  count INTEGER NOT NULL DEFAULT 1,
  first_at INTEGER NOT NULL,
  last_at INTEGER NOT NULL,
  UNIQUE (job_id, type, reason, message, source)
);

CREATE TABLE users (
  name TEXT PRIMARY KEY,
  admin INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
);

-- API tokens, by the SHA-256 (hex) of the clear token only.
CREATE TABLE tokens (
  sha256 TEXT PRIMARY KEY CHECK (length(sha256) = 64),
  user TEXT NOT NULL REFERENCES users (name),
  description TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL
);
)sql"},
    // Tokens that can be revoked and that expire; `id` names a token in lists and revocations
    // (a prefix of its hash: it cannot be turned back into the token).
    {2, R"sql(
ALTER TABLE tokens ADD COLUMN expires_at INTEGER NOT NULL DEFAULT 0;  -- 0: never
ALTER TABLE tokens ADD COLUMN revoked_at INTEGER NOT NULL DEFAULT 0;  -- 0: not revoked
)sql"},
    // Playgrounds (store/playground.h): one vLLM server per row, reclaimed at expires_at.
    {3, R"sql(
CREATE TABLE playgrounds (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  owner TEXT NOT NULL,
  fleet TEXT NOT NULL,
  spec_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('Starting', 'Pending', 'Ready', 'Stopped', 'Expired',
                                       'Failed')),
  reason TEXT NOT NULL DEFAULT '',
  message TEXT NOT NULL DEFAULT '',
  handle TEXT NOT NULL DEFAULT '',
  expires_at INTEGER NOT NULL,
  stop_requested INTEGER NOT NULL DEFAULT 0,
  released INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  ready_at INTEGER NOT NULL DEFAULT 0,
  finished_at INTEGER NOT NULL DEFAULT 0,
  version INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX playgrounds_by_owner ON playgrounds (owner, seq);
)sql"},
    // A job's events in the order they were recorded, read without a sort: the controller reads
    // them on its looks at live jobs, and the sort's buffer was a large allocation each time
    // (glibc consolidates its free lists at every one; seen in profiles of
    // bench/kuberay_fleet_scale.sh).
    {4, R"sql(
CREATE INDEX events_by_job ON events (job_id, seq);
)sql"},
    // Substring search on job names (JobFilter::name_contains): an FTS5 index of the names'
    // trigrams over the jobs table itself (external content: the names are stored once), kept
    // current by triggers and filled from the jobs already there.
    {5, R"sql(
CREATE VIRTUAL TABLE jobs_name_fts USING fts5 (name, content = 'jobs', content_rowid = 'seq',
                                               tokenize = 'trigram');
CREATE TRIGGER jobs_name_fts_insert AFTER INSERT ON jobs
  BEGIN INSERT INTO jobs_name_fts (rowid, name) VALUES (new.seq, new.name); END;
CREATE TRIGGER jobs_name_fts_delete AFTER DELETE ON jobs
  BEGIN
    INSERT INTO jobs_name_fts (jobs_name_fts, rowid, name) VALUES ('delete', old.seq, old.name);
  END;
-- UpdateJob writes every column: only a name that differs touches the index.
CREATE TRIGGER jobs_name_fts_update AFTER UPDATE OF name ON jobs WHEN old.name IS NOT new.name
  BEGIN
    INSERT INTO jobs_name_fts (jobs_name_fts, rowid, name) VALUES ('delete', old.seq, old.name);
    INSERT INTO jobs_name_fts (rowid, name) VALUES (new.seq, new.name);
  END;
INSERT INTO jobs_name_fts (jobs_name_fts) VALUES ('rebuild');
)sql"},
};

constexpr int kSchemaVersion = std::size(kMigrations);

constexpr std::string_view kTokenPrefix = "sf_";
constexpr std::string_view kTokenIdPrefix = "tok-";
constexpr size_t kTokenRandomChars = 40;
constexpr size_t kJobIdRandomChars = 10;

std::string DbFile(sqlite3* db) {
  const char* name = sqlite3_db_filename(db, "main");
  return name != nullptr && *name != '\0' ? name : "(database)";
}

[[noreturn]] void Fail(sqlite3* db, std::string_view what) {
  throw StoreError(fmt::format("{}: {}: {}", DbFile(db), what, sqlite3_errmsg(db)));
}

void Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string message = err != nullptr ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    throw StoreError(fmt::format("{}: {}", DbFile(db), message));
  }
}

// Prepared statements kept for reuse, per connection and SQL text: preparing was most of a small
// query's cost (perf of a submit burst: sqlite3_prepare_v2 about 12 % of the server's CPU, more
// than running the statements). A statement is taken out while in use, so two threads on one
// connection never share one; Forget finalizes a connection's before it is closed.
class StmtCache {
 public:
  static StmtCache& Get() {
    static StmtCache* cache = new StmtCache();  // never destroyed: used until the last Store
    return *cache;
  }
  sqlite3_stmt* Take(sqlite3* db, std::string_view sql) {
    std::lock_guard lock(mu_);
    auto it = free_.find(Key{db, std::string(sql)});
    if (it == free_.end()) return nullptr;
    sqlite3_stmt* stmt = it->second;
    free_.erase(it);
    --count_[db];
    return stmt;
  }
  void Give(sqlite3* db, std::string_view sql, sqlite3_stmt* stmt) {
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    {
      std::lock_guard lock(mu_);
      // Bounded: the statements are a fixed set, but a list's SQL varies with its filters.
      if (count_[db] < kMaxPerConnection) {
        ++count_[db];
        free_.emplace(Key{db, std::string(sql)}, stmt);
        return;
      }
    }
    sqlite3_finalize(stmt);
  }
  void Forget(sqlite3* db) {
    std::lock_guard lock(mu_);
    for (auto it = free_.lower_bound(Key{db, ""}); it != free_.end() && it->first.db == db;) {
      sqlite3_finalize(it->second);
      it = free_.erase(it);
    }
    count_.erase(db);
  }

 private:
  static constexpr int kMaxPerConnection = 128;
  struct Key {
    sqlite3* db;
    std::string sql;
    bool operator<(const Key& o) const {
      return std::tie(db, sql) < std::tie(o.db, o.sql);  // one connection's keys are adjacent
    }
  };
  std::mutex mu_;
  std::multimap<Key, sqlite3_stmt*> free_;
  std::map<sqlite3*, int> count_;
};

// A prepared statement (StmtCache's, or prepared now), given back or finalized on every path out.
class Stmt {
 public:
  Stmt(sqlite3* db, std::string_view sql) : db_(db), sql_(sql) {
    stmt_ = StmtCache::Get().Take(db, sql);
    if (stmt_ != nullptr) return;
    if (sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                           &stmt_, nullptr) != SQLITE_OK) {
      sqlite3_finalize(stmt_);
      stmt_ = nullptr;
      Fail(db, "cannot prepare a statement");
    }
  }
  ~Stmt() {
    if (stmt_ != nullptr) StmtCache::Get().Give(db_, sql_, stmt_);
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& Bind(int i, int64_t v) {
    Check(sqlite3_bind_int64(stmt_, i, v));
    return *this;
  }
  Stmt& Bind(int i, const std::string& v) {
    Check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& Bind(int i, std::string_view v) { return Bind(i, std::string(v)); }
  Stmt& Bind(int i, const char* v) { return Bind(i, std::string(v)); }
  Stmt& Bind(int i, bool v) { return Bind(i, static_cast<int64_t>(v ? 1 : 0)); }
  Stmt& Bind(int i, const std::optional<int>& v) {
    Check(v ? sqlite3_bind_int64(stmt_, i, *v) : sqlite3_bind_null(stmt_, i));
    return *this;
  }
  Stmt& BindNull(int i) {
    Check(sqlite3_bind_null(stmt_, i));
    return *this;
  }

  // true: a row is available; false: done.
  bool Step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    Fail(db_, "query failed");
  }
  void Run() {
    while (Step()) {
    }
  }

  bool IsNull(int col) { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  std::string Text(int col) {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p == nullptr ? std::string()
                        : std::string(reinterpret_cast<const char*>(p),
                                      static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
  }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK) Fail(db_, "cannot bind a parameter");
  }
  sqlite3* db_;
  std::string sql_;
  sqlite3_stmt* stmt_ = nullptr;
};

// A write transaction. IMMEDIATE takes the write lock at BEGIN, so a read-modify-write inside
// cannot interleave with another connection's (another process on the same file).
class Tx {
 public:
  explicit Tx(sqlite3* db) : db_(db) { Exec(db, "BEGIN IMMEDIATE"); }
  // Only while the transaction is ours: once committed, the writer's lock may be released
  // before this is destroyed, and another thread's transaction must not be rolled back.
  ~Tx() {
    if (!committed_ && sqlite3_get_autocommit(db_) == 0)
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Tx(const Tx&) = delete;
  Tx& operator=(const Tx&) = delete;
  void Commit() {
    Exec(db_, "COMMIT");
    committed_ = true;
  }

 private:
  sqlite3* db_;
  bool committed_ = false;
};

int UserVersion(sqlite3* db) {
  Stmt s(db, "PRAGMA user_version");
  return s.Step() ? static_cast<int>(s.Int(0)) : 0;
}

[[noreturn]] void RefuseNewer(sqlite3* db, int version) {
  throw StoreError(fmt::format(
      "{}: the database has schema version {}, but this forge knows versions up to {}: it was "
      "written by a newer StarForge. Run that newer forge, or use another FORGE_STORAGE_ROOT",
      DbFile(db), version, kSchemaVersion));
}

constexpr const char* kJobColumns =
    "seq, id, owner, name, fleet, spec_json, phase, reason, message, upload_path, "
    "capsule_sha256, fleet_handle, exit_code, cancel_requested, cancel_requested_at, "
    "logs_archived, released, created_at, updated_at, started_at, finished_at, version";

Job ReadJob(Stmt& s) {
  Job j;
  j.seq = s.Int(0);
  j.id = s.Text(1);
  j.owner = s.Text(2);
  j.name = s.Text(3);
  j.fleet = s.Text(4);
  j.spec_json = s.Text(5);
  j.phase = ParsePhase(s.Text(6)).value_or(Phase::kQueued);  // CHECK constraint: always valid
  j.reason = s.Text(7);
  j.message = s.Text(8);
  j.upload_path = s.Text(9);
  j.capsule_sha256 = s.Text(10);
  j.fleet_handle = s.Text(11);
  if (!s.IsNull(12)) j.exit_code = static_cast<int>(s.Int(12));
  j.cancel_requested = s.Int(13) != 0;
  j.cancel_requested_at = s.Int(14);
  j.logs_archived = s.Int(15) != 0;
  j.released = s.Int(16) != 0;
  j.created_at = s.Int(17);
  j.updated_at = s.Int(18);
  j.started_at = s.Int(19);
  j.finished_at = s.Int(20);
  j.version = s.Int(21);
  return j;
}

std::optional<Job> SelectJob(sqlite3* db, const std::string& id) {
  Stmt s(db, fmt::format("SELECT {} FROM jobs WHERE id = ?", kJobColumns));
  s.Bind(1, id);
  if (!s.Step()) return std::nullopt;
  return ReadJob(s);
}

void InsertTransition(sqlite3* db, const std::string& job_id, std::optional<Phase> from,
                      const PhaseChange& change, int64_t at) {
  Stmt s(db,
         "INSERT INTO transitions (job_id, from_phase, to_phase, reason, message, cause, at) "
         "VALUES (?, ?, ?, ?, ?, ?, ?)");
  s.Bind(1, job_id);
  if (from) {
    s.Bind(2, ToString(*from));
  } else {
    s.BindNull(2);
  }
  s.Bind(3, ToString(change.to)).Bind(4, change.reason).Bind(5, change.message);
  s.Bind(6, change.cause).Bind(7, at).Run();
}

User ReadUser(Stmt& s, int first) {
  return User{s.Text(first), s.Int(first + 1) != 0, s.Int(first + 2)};
}

// `n` characters of [a-z0-9] from OpenSSL's CSPRNG, without modulo bias (bytes ≥ 252 are
// redrawn: 252 = 7 × 36).
std::string RandomChars(size_t n) {
  static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  out.reserve(n);
  std::array<unsigned char, 64> buf;
  while (out.size() < n) {
    if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1) {
      throw StoreError("the system's random number generator failed (OpenSSL RAND_bytes)");
    }
    for (unsigned char b : buf) {
      if (b >= 252) continue;
      out += kAlphabet[b % kAlphabet.size()];
      if (out.size() == n) break;
    }
  }
  return out;
}

bool LooksLikeToken(std::string_view token) {
  if (token.size() != kTokenPrefix.size() + kTokenRandomChars) return false;
  if (token.substr(0, kTokenPrefix.size()) != kTokenPrefix) return false;
  for (char c : token.substr(kTokenPrefix.size())) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

bool ValidUserName(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && !(i > 0 && c == '-')) return false;
  }
  return true;
}

}  // namespace

std::string NewJobId() {
  return "j-" + RandomChars(kJobIdRandomChars);
}

std::string NewPlaygroundId() {
  return "p-" + RandomChars(kJobIdRandomChars);
}

Store::Store(sqlite3* db, sqlite3* reader, std::filesystem::path wal)
    : wal_(std::move(wal)), reader_(reader), db_(db) {}

Store::~Store() {
  if (wal_fd_ >= 0) ::close(wal_fd_);
  StmtCache::Get().Forget(reader_);
  StmtCache::Get().Forget(db_);
  sqlite3_close_v2(reader_);
  sqlite3_close_v2(db_);
}

void Store::Sync(int64_t ticket) {
  std::unique_lock lock(sync_mu_);
  while (synced_ < ticket) {
    if (!sync_error_.empty()) throw StoreError(sync_error_);
    if (syncing_) {
      sync_cv_.wait(lock);
      continue;
    }
    // The leader: every commit made before this fsync starts is covered by it.
    syncing_ = true;
    const int64_t target = commits_.load();
    lock.unlock();
    std::string error;
    struct stat st {};
    // The WAL is the same file for the life of this connection; reopened only if something
    // removed it (then SQLite has a new one, and the old one's pages no longer matter).
    if (wal_fd_ < 0 || ::fstat(wal_fd_, &st) != 0 || st.st_nlink == 0) {
      if (wal_fd_ >= 0) ::close(wal_fd_);
      wal_fd_ = ::open(wal_.c_str(), O_RDONLY | O_CLOEXEC);
    }
    if (wal_fd_ < 0) {
      error = fmt::format("{}: cannot open it to make commits durable: {}", wal_.string(),
                          std::strerror(errno));
    } else if (::fdatasync(wal_fd_) != 0) {
      error = fmt::format(
          "{}: fdatasync failed: {} (the last changes may not be on disk; "
          "restart forge serve once the disk is healthy)",
          wal_.string(), std::strerror(errno));
    }
    lock.lock();
    syncing_ = false;
    if (error.empty()) {
      synced_ = std::max(synced_, target);
    } else {
      sync_error_ = error;
    }
    sync_cv_.notify_all();
  }
}

std::unique_ptr<Store> Store::Open(const fs::path& file) {
  std::error_code ec;
  if (file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
  if (ec) {
    throw StoreError(fmt::format("{}: cannot create its directory {}: {}", file.string(),
                                 file.parent_path().string(), ec.message()));
  }
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(file.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string why = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    throw StoreError(fmt::format("{}: cannot open the database: {}", file.string(), why));
  }
  std::unique_ptr<Store> store(new Store(db, nullptr, {}));
  sqlite3_extended_result_codes(db, 1);
  // Another process (`forge token create` beside a running server) may hold the write lock for
  // a moment: wait for it rather than fail.
  sqlite3_busy_timeout(db, 10'000);

  // Before anything writes to the file: a newer schema is left exactly as it is.
  int version = 0;
  try {
    version = UserVersion(db);
  } catch (const StoreError& e) {
    throw StoreError(fmt::format("{} (is it a StarForge database?)", e.what()));
  }
  if (version > kSchemaVersion) RefuseNewer(db, version);

  {
    Stmt wal(db, "PRAGMA journal_mode = WAL");
    if (!wal.Step() || wal.Text(0) != "wal") {
      throw StoreError(
          fmt::format("{}: cannot switch the database to WAL mode (is it on a network filesystem?)",
                      file.string()));
    }
  }
  // NORMAL: a COMMIT does not fsync the WAL itself; every write method calls Sync, which does,
  // for all the commits made meanwhile, before it returns (store.h). A checkpoint still syncs
  // the WAL before it copies pages into the database, and the database after.
  Exec(db, "PRAGMA synchronous = NORMAL");
  Exec(db, "PRAGMA foreign_keys = ON");

  for (const Migration& m : kMigrations) {
    if (m.version <= version) continue;
    Tx tx(db);
    // Another process may have migrated between our read and our lock.
    const int now_version = UserVersion(db);
    if (now_version > kSchemaVersion) RefuseNewer(db, now_version);
    if (now_version < m.version) {
      Exec(db, m.sql);
      Exec(db, fmt::format("PRAGMA user_version = {}", m.version).c_str());
    }
    tx.Commit();
    version = m.version;
  }
  // The WAL exists from here on (WAL mode, and every connection keeps it while open).
  store->wal_ = file.string() + "-wal";
  store->wal_fd_ = ::open(store->wal_.c_str(), O_RDONLY | O_CLOEXEC);
  if (store->wal_fd_ < 0) {
    throw StoreError(fmt::format("{}: cannot open the database's WAL: {}", store->wal_.string(),
                                 std::strerror(errno)));
  }
  const int rrc = sqlite3_open_v2(file.c_str(), &store->reader_,
                                  SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rrc != SQLITE_OK) {
    throw StoreError(fmt::format("{}: cannot open a second connection for reading: {}",
                                 file.string(), sqlite3_errmsg(store->reader_)));
  }
  sqlite3_extended_result_codes(store->reader_, 1);
  sqlite3_busy_timeout(store->reader_, 10'000);
  Exec(store->reader_, "PRAGMA query_only = ON");
  store->Sync(store->Committed());  // the migrations, if any
  return store;
}

int Store::SchemaVersion() {
  std::lock_guard lock(read_mu_);
  return UserVersion(reader_);
}

int64_t Store::Now() {
  if (now_) return now_();
  return NowMs();
}

void Store::SetClockForTesting(std::function<int64_t()> now) {
  std::scoped_lock lock(mu_, read_mu_);
  now_ = std::move(now);
}

Job Store::CreateJob(Job job, const std::string& cause) {
  std::unique_lock lock(mu_);
  Job row;
  row.id = job.id.empty() ? NewJobId() : job.id;
  row.owner = std::move(job.owner);
  row.name = std::move(job.name);
  row.fleet = std::move(job.fleet);
  row.spec_json = std::move(job.spec_json);
  row.upload_path = std::move(job.upload_path);
  row.capsule_sha256 = std::move(job.capsule_sha256);  // a capsule the client built or named
  row.phase = Phase::kQueued;
  row.created_at = row.updated_at = Now();
  row.version = 1;

  Tx tx(db_);
  Stmt s(db_,
         "INSERT INTO jobs (id, owner, name, fleet, spec_json, phase, upload_path, created_at, "
         "updated_at, version, capsule_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.Bind(1, row.id).Bind(2, row.owner).Bind(3, row.name).Bind(4, row.fleet);
  s.Bind(5, row.spec_json).Bind(6, ToString(row.phase)).Bind(7, row.upload_path);
  s.Bind(8, row.created_at).Bind(9, row.updated_at).Bind(10, row.version);
  s.Bind(11, row.capsule_sha256).Run();
  row.seq = sqlite3_last_insert_rowid(db_);
  InsertTransition(db_, row.id, std::nullopt, PhaseChange{Phase::kQueued, "", "", cause},
                   row.created_at);
  tx.Commit();
  Durable(lock);
  Journal(row.id);
  return row;
}

std::optional<Job> Store::GetJob(const std::string& id) {
  std::lock_guard lock(read_mu_);
  return SelectJob(reader_, id);
}

std::vector<Job> Store::ListJobs(const JobFilter& filter) {
  std::lock_guard lock(read_mu_);
  // A part of the name, ignoring case. From three characters: the trigram index, as a phrase
  // (quoted: every character literal) and read newest first by rowid, joined to the rows, so a
  // page of a common part stops after the page and a rare one reads only its matches. Fewer
  // characters have no trigram: instr() on the rows, newest first, until the page is full.
  std::string contains;
  bool indexed = false;
  if (filter.name_contains) {
    for (char ch : *filter.name_contains)
      contains += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    indexed = contains.size() >= 3;
    if (indexed) {
      std::string phrase = "\"";
      for (char ch : contains)
        phrase += ch == '"' ? std::string("\"\"") : std::string(1, ch);
      contains = phrase + "\"";
    }
  }
  std::string sql;
  if (indexed) {
    static const std::string kQualified = [] {  // jobs.seq, jobs.id, …: `name` is in both tables
      std::string out = "jobs.";
      for (char ch : std::string_view(kJobColumns))
        out += ch == ' ' ? std::string(" jobs.") : std::string(1, ch);
      return out;
    }();
    sql = fmt::format(
        "SELECT {} FROM jobs_name_fts CROSS JOIN jobs ON jobs.seq = jobs_name_fts.rowid WHERE "
        "jobs_name_fts MATCH :contains",
        kQualified);
  } else {
    sql = fmt::format("SELECT {} FROM jobs WHERE 1", kJobColumns);
  }
  if (filter.owner) sql += " AND owner = :owner";
  if (filter.phase) sql += " AND phase = :phase";
  if (filter.fleet) sql += " AND fleet = :fleet";
  if (filter.name) sql += " AND jobs.name = :name";
  if (filter.name_contains && !indexed) sql += " AND instr(lower(name), :contains) > 0";
  if (filter.only_unfinished) {
    // Same expression as the partial index jobs_unfinished, so SQLite can use it.
    sql +=
        " AND (phase NOT IN ('Succeeded', 'Failed', 'Cancelled') OR logs_archived = 0 OR "
        "released = 0)";
  }
  const char* seq = indexed ? "jobs_name_fts.rowid" : "seq";
  if (filter.before_seq > 0) sql += fmt::format(" AND {} < :before", seq);
  sql += fmt::format(" ORDER BY {} DESC", seq);
  if (filter.limit > 0) sql += " LIMIT :limit";
  Stmt s(reader_, sql);
  int i = 0;
  if (indexed) s.Bind(++i, contains);
  if (filter.owner) s.Bind(++i, *filter.owner);
  if (filter.phase) s.Bind(++i, ToString(*filter.phase));
  if (filter.fleet) s.Bind(++i, *filter.fleet);
  if (filter.name) s.Bind(++i, *filter.name);
  if (filter.name_contains && !indexed) s.Bind(++i, contains);
  if (filter.before_seq > 0) s.Bind(++i, filter.before_seq);
  if (filter.limit > 0) s.Bind(++i, static_cast<int64_t>(filter.limit));
  std::vector<Job> jobs;
  while (s.Step())
    jobs.push_back(ReadJob(s));
  return jobs;
}

std::vector<std::pair<Phase, int64_t>> Store::CountByPhase() {
  std::lock_guard lock(read_mu_);
  // Every phase, zeros included: /metrics reports all of them.
  std::vector<std::pair<Phase, int64_t>> counts;
  for (int p = 0; p <= static_cast<int>(Phase::kCancelled); ++p) {
    counts.emplace_back(static_cast<Phase>(p), 0);
  }
  Stmt s(reader_, "SELECT phase, count(*) FROM jobs GROUP BY phase");
  while (s.Step()) {
    if (auto phase = ParsePhase(s.Text(0))) counts[static_cast<size_t>(*phase)].second = s.Int(1);
  }
  return counts;
}

std::optional<Job> Store::UpdateJob(const std::string& id, const std::function<void(Job&)>& mutate,
                                    const std::optional<PhaseChange>& change) {
  std::unique_lock lock(mu_);
  Tx tx(db_);
  std::optional<Job> current = SelectJob(db_, id);
  if (!current) return std::nullopt;
  const bool phase_changes = change && change->to != current->phase;
  // A terminal phase is final, and a job never goes back (job.h).
  if (phase_changes && (IsTerminal(current->phase) || change->to < current->phase)) {
    return std::nullopt;
  }

  Job next = *current;
  if (mutate) mutate(next);
  if (next.phase != current->phase) {
    throw std::logic_error("Store::UpdateJob: change the phase with a PhaseChange, not in mutate");
  }
  // The store owns identity, timestamps and the version: whatever mutate did to them is undone.
  next.seq = current->seq;
  next.id = current->id;
  next.created_at = current->created_at;
  next.started_at = current->started_at;
  next.finished_at = current->finished_at;
  next.updated_at = Now();
  next.version = current->version + 1;
  if (phase_changes) {
    next.phase = change->to;
    next.reason = change->reason;
    next.message = change->message;
    if (next.phase == Phase::kRunning && next.started_at == 0) next.started_at = next.updated_at;
    if (IsTerminal(next.phase)) next.finished_at = next.updated_at;
  }

  Stmt s(db_,
         "UPDATE jobs SET owner = ?, name = ?, fleet = ?, spec_json = ?, phase = ?, reason = ?, "
         "message = ?, upload_path = ?, capsule_sha256 = ?, fleet_handle = ?, exit_code = ?, "
         "cancel_requested = ?, cancel_requested_at = ?, logs_archived = ?, released = ?, "
         "updated_at = ?, started_at = ?, finished_at = ?, version = ? "
         "WHERE id = ? AND version = ?");
  s.Bind(1, next.owner).Bind(2, next.name).Bind(3, next.fleet).Bind(4, next.spec_json);
  s.Bind(5, ToString(next.phase)).Bind(6, next.reason).Bind(7, next.message);
  s.Bind(8, next.upload_path).Bind(9, next.capsule_sha256).Bind(10, next.fleet_handle);
  s.Bind(11, next.exit_code).Bind(12, next.cancel_requested).Bind(13, next.cancel_requested_at);
  s.Bind(14, next.logs_archived).Bind(15, next.released).Bind(16, next.updated_at);
  s.Bind(17, next.started_at).Bind(18, next.finished_at).Bind(19, next.version);
  s.Bind(20, next.id).Bind(21, current->version).Run();
  // The row was read in this IMMEDIATE transaction: another version would be a broken store.
  if (sqlite3_changes(db_) != 1) {
    throw StoreError(
        fmt::format("job {} was updated concurrently (version {} is gone)", id, current->version));
  }
  if (phase_changes) InsertTransition(db_, id, current->phase, *change, next.updated_at);
  tx.Commit();
  Durable(lock);
  Journal(id);
  return next;
}

std::vector<Transition> Store::ListTransitions(const std::string& job_id) {
  std::lock_guard lock(read_mu_);
  Stmt s(reader_,
         "SELECT seq, job_id, from_phase, to_phase, reason, message, cause, at FROM transitions "
         "WHERE job_id = ? ORDER BY seq");
  s.Bind(1, job_id);
  std::vector<Transition> out;
  while (s.Step()) {
    Transition t;
    t.seq = s.Int(0);
    t.job_id = s.Text(1);
    if (!s.IsNull(2)) t.from = ParsePhase(s.Text(2));
    t.to = ParsePhase(s.Text(3)).value_or(Phase::kQueued);
    t.reason = s.Text(4);
    t.message = s.Text(5);
    t.cause = s.Text(6);
    t.at = s.Int(7);
    out.push_back(std::move(t));
  }
  return out;
}

int64_t Store::CountTransitions() {
  std::lock_guard lock(read_mu_);
  Stmt s(reader_, "SELECT count(*) FROM transitions");
  return s.Step() ? s.Int(0) : 0;
}

void Store::RecordEvent(const std::string& job_id, const std::string& type,
                        const std::string& reason, const std::string& message,
                        const std::string& source) {
  std::unique_lock lock(mu_);
  const int64_t now = Now();
  Stmt s(db_,
         "INSERT INTO events (job_id, type, reason, message, source, count, first_at, last_at) "
         "VALUES (?, ?, ?, ?, ?, 1, ?, ?) "
         "ON CONFLICT (job_id, type, reason, message, source) "
         "DO UPDATE SET count = count + 1, last_at = excluded.last_at");
  s.Bind(1, job_id).Bind(2, type).Bind(3, reason).Bind(4, message).Bind(5, source);
  s.Bind(6, now).Bind(7, now).Run();
  Durable(lock);
  Journal(job_id);
}

void Store::Journal(const std::string& job_id) {
  std::lock_guard lock(journal_mu_);
  journal_.push_back({++last_change_, job_id});
  while (journal_.size() > journal_size_)
    journal_.pop_front();
}

void Store::SetJournalSizeForTesting(size_t n) {
  std::lock_guard lock(journal_mu_);
  journal_size_ = n;
  while (journal_.size() > journal_size_)
    journal_.pop_front();
}

int64_t Store::LastChange() {
  std::lock_guard lock(journal_mu_);
  return last_change_;
}

std::optional<std::vector<Change>> Store::ChangesSince(int64_t after) {
  std::lock_guard lock(journal_mu_);
  if (after > last_change_ || after < 0) return std::nullopt;
  std::vector<Change> out;
  if (after == last_change_) return out;
  // journal_ holds last_change_ - journal_.size() + 1 … last_change_.
  const int64_t oldest = last_change_ - static_cast<int64_t>(journal_.size()) + 1;
  if (after + 1 < oldest) return std::nullopt;
  for (auto it = journal_.begin() + (after + 1 - oldest); it != journal_.end(); ++it)
    out.push_back(*it);
  return out;
}

std::vector<Event> Store::ListEvents(const std::string& job_id) {
  std::lock_guard lock(read_mu_);
  Stmt s(reader_,
         "SELECT seq, job_id, type, reason, message, source, count, first_at, last_at FROM events "
         "WHERE job_id = ? ORDER BY seq");
  s.Bind(1, job_id);
  std::vector<Event> out;
  while (s.Step()) {
    Event e;
    e.seq = s.Int(0);
    e.job_id = s.Text(1);
    e.type = s.Text(2);
    e.reason = s.Text(3);
    e.message = s.Text(4);
    e.source = s.Text(5);
    e.count = static_cast<int>(s.Int(6));
    e.first_at = s.Int(7);
    e.last_at = s.Int(8);
    out.push_back(std::move(e));
  }
  return out;
}

int64_t Store::LastEventAt(const std::string& job_id, const std::string& reason,
                           const std::string& source) {
  std::lock_guard lock(read_mu_);
  // An index on job_id leads (events_by_job, or the unique one); one row back, no sort.
  Stmt s(reader_, "SELECT max(last_at) FROM events WHERE job_id = ? AND reason = ? AND source = ?");
  s.Bind(1, job_id).Bind(2, reason).Bind(3, source);
  return s.Step() ? s.Int(0) : 0;
}

std::optional<User> Store::GetUser(const std::string& name) {
  std::lock_guard lock(read_mu_);
  Stmt s(reader_, "SELECT name, admin, created_at FROM users WHERE name = ?");
  s.Bind(1, name);
  if (!s.Step()) return std::nullopt;
  return ReadUser(s, 0);
}

User Store::EnsureUser(const std::string& name, bool admin) {
  if (!ValidUserName(name)) {
    throw std::invalid_argument(fmt::format(
        "invalid user name \"{}\": use 1 to 63 characters of a-z, 0-9 and '-', starting with a "
        "letter or digit",
        name));
  }
  std::unique_lock lock(mu_);
  Tx tx(db_);
  Stmt(db_,
       "INSERT INTO users (name, admin, created_at) VALUES (?, ?, ?) "
       "ON CONFLICT (name) DO UPDATE SET admin = max(admin, excluded.admin)")
      .Bind(1, name)
      .Bind(2, admin)
      .Bind(3, Now())
      .Run();
  Stmt s(db_, "SELECT name, admin, created_at FROM users WHERE name = ?");
  s.Bind(1, name);
  if (!s.Step()) Fail(db_, "the user just written is missing");
  User user = ReadUser(s, 0);
  tx.Commit();
  Durable(lock);
  return user;
}

int64_t Store::CountUsers() {
  std::lock_guard lock(read_mu_);
  Stmt s(reader_, "SELECT count(*) FROM users");
  return s.Step() ? s.Int(0) : 0;
}

std::string Store::CreateToken(const std::string& user, const std::string& description,
                               int64_t expires_at) {
  std::unique_lock lock(mu_);
  Tx tx(db_);
  {
    Stmt s(db_, "SELECT 1 FROM users WHERE name = ?");
    s.Bind(1, user);
    if (!s.Step()) {
      throw StoreError(fmt::format("no user \"{}\": create the user before its token", user));
    }
  }
  std::string token = std::string(kTokenPrefix) + RandomChars(kTokenRandomChars);
  Stmt(db_,
       "INSERT INTO tokens (sha256, user, description, created_at, expires_at) "
       "VALUES (?, ?, ?, ?, ?)")
      .Bind(1, Sha256Hex(token))
      .Bind(2, user)
      .Bind(3, description)
      .Bind(4, Now())
      .Bind(5, expires_at)
      .Run();
  tx.Commit();
  Durable(lock);
  return token;
}

std::optional<User> Store::Authenticate(const std::string& token) {
  // The token's shape is public (docs/api.md): checking it first leaks nothing.
  if (!LooksLikeToken(token)) return std::nullopt;
  const std::string hash = Sha256Hex(token);
  std::lock_guard lock(read_mu_);
  // Looking up by the hash leaks, at most, timing about a SHA-256 of the guess, which an
  // attacker cannot steer toward a stored hash; the final comparison is constant-time anyway.
  Stmt s(reader_,
         "SELECT t.sha256, u.name, u.admin, u.created_at FROM tokens t "
         "JOIN users u ON u.name = t.user WHERE t.sha256 = ? AND t.revoked_at = 0 "
         "AND (t.expires_at = 0 OR t.expires_at > ?)");
  s.Bind(1, hash);
  s.Bind(2, Now());
  if (!s.Step()) return std::nullopt;
  const std::string stored = s.Text(0);
  if (stored.size() != hash.size() || CRYPTO_memcmp(stored.data(), hash.data(), hash.size()) != 0) {
    return std::nullopt;
  }
  return ReadUser(s, 1);
}

std::vector<TokenInfo> Store::ListTokens(const std::string& user) {
  std::lock_guard lock(read_mu_);
  Stmt s(reader_,
         "SELECT substr(sha256, 1, 12), user, description, created_at, expires_at, revoked_at "
         "FROM tokens WHERE ? = '' OR user = ? ORDER BY created_at, sha256");
  s.Bind(1, user);
  s.Bind(2, user);
  std::vector<TokenInfo> out;
  while (s.Step()) {
    out.push_back({std::string(kTokenIdPrefix) + s.Text(0), s.Text(1), s.Text(2), s.Int(3),
                   s.Int(4), s.Int(5)});
  }
  return out;
}

std::optional<TokenInfo> Store::RevokeToken(const std::string& id) {
  if (id.size() != kTokenIdPrefix.size() + 12 || id.rfind(kTokenIdPrefix, 0) != 0)
    return std::nullopt;
  const std::string prefix = id.substr(kTokenIdPrefix.size());
  if (!std::all_of(prefix.begin(), prefix.end(),
                   [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
    return std::nullopt;
  std::unique_lock lock(mu_);
  Tx tx(db_);
  Stmt(db_, "UPDATE tokens SET revoked_at = ? WHERE substr(sha256, 1, 12) = ? AND revoked_at = 0")
      .Bind(1, Now())
      .Bind(2, prefix)
      .Run();
  Stmt s(db_,
         "SELECT substr(sha256, 1, 12), user, description, created_at, expires_at, revoked_at "
         "FROM tokens WHERE substr(sha256, 1, 12) = ?");
  s.Bind(1, prefix);
  std::optional<TokenInfo> info;
  if (s.Step()) info = TokenInfo{id, s.Text(1), s.Text(2), s.Int(3), s.Int(4), s.Int(5)};
  tx.Commit();
  Durable(lock);
  return info;
}

bool Store::SetAdmin(const std::string& name, bool admin) {
  std::unique_lock lock(mu_);
  Stmt(db_, "UPDATE users SET admin = ? WHERE name = ?").Bind(1, admin).Bind(2, name).Run();
  const bool changed = sqlite3_changes(db_) > 0;
  Durable(lock);
  return changed;
}

// ---- playgrounds ----

namespace {

constexpr const char* kPlaygroundColumns =
    "seq, id, owner, fleet, spec_json, state, reason, message, handle, expires_at, "
    "stop_requested, released, created_at, updated_at, ready_at, finished_at, version";

Playground ReadPlayground(Stmt& s) {
  Playground p;
  p.seq = s.Int(0);
  p.id = s.Text(1);
  p.owner = s.Text(2);
  p.fleet = s.Text(3);
  p.spec_json = s.Text(4);
  p.state = ParsePlaygroundState(s.Text(5)).value_or(PlaygroundState::kStarting);  // CHECK
  p.reason = s.Text(6);
  p.message = s.Text(7);
  p.handle = s.Text(8);
  p.expires_at = s.Int(9);
  p.stop_requested = s.Int(10) != 0;
  p.released = s.Int(11) != 0;
  p.created_at = s.Int(12);
  p.updated_at = s.Int(13);
  p.ready_at = s.Int(14);
  p.finished_at = s.Int(15);
  p.version = s.Int(16);
  return p;
}

std::optional<Playground> SelectPlayground(sqlite3* db, const std::string& id) {
  Stmt s(db, fmt::format("SELECT {} FROM playgrounds WHERE id = ?", kPlaygroundColumns));
  s.Bind(1, id);
  if (!s.Step()) return std::nullopt;
  return ReadPlayground(s);
}

}  // namespace

Playground Store::CreatePlayground(Playground p) {
  std::unique_lock lock(mu_);
  if (p.id.empty()) p.id = NewPlaygroundId();
  p.state = PlaygroundState::kStarting;
  p.created_at = p.updated_at = Now();
  p.version = 1;
  Tx tx(db_);
  Stmt s(db_,
         "INSERT INTO playgrounds (id, owner, fleet, spec_json, state, handle, expires_at, "
         "created_at, updated_at, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.Bind(1, p.id).Bind(2, p.owner).Bind(3, p.fleet).Bind(4, p.spec_json);
  s.Bind(5, ToString(p.state)).Bind(6, p.handle).Bind(7, p.expires_at);
  s.Bind(8, p.created_at).Bind(9, p.updated_at).Bind(10, p.version).Run();
  p.seq = sqlite3_last_insert_rowid(db_);
  tx.Commit();
  Durable(lock);
  return p;
}

std::optional<Playground> Store::GetPlayground(const std::string& id) {
  std::lock_guard lock(read_mu_);
  return SelectPlayground(reader_, id);
}

std::vector<Playground> Store::ListPlaygrounds(const std::string& owner, bool only_unfinished) {
  std::lock_guard lock(read_mu_);
  std::string sql = fmt::format("SELECT {} FROM playgrounds WHERE 1", kPlaygroundColumns);
  if (!owner.empty()) sql += " AND owner = ?";
  if (only_unfinished)
    sql += " AND (state NOT IN ('Stopped', 'Expired', 'Failed') OR released = 0)";
  sql += " ORDER BY seq DESC";
  Stmt s(reader_, sql);
  if (!owner.empty()) s.Bind(1, owner);
  std::vector<Playground> out;
  while (s.Step())
    out.push_back(ReadPlayground(s));
  return out;
}

std::optional<Playground> Store::UpdatePlayground(const std::string& id,
                                                  const std::function<void(Playground&)>& mutate) {
  std::unique_lock lock(mu_);
  Tx tx(db_);
  std::optional<Playground> current = SelectPlayground(db_, id);
  if (!current) return std::nullopt;
  Playground next = *current;
  if (mutate) mutate(next);
  if (next.state != current->state && (IsTerminal(current->state) || next.state < current->state)) {
    return std::nullopt;
  }
  next.seq = current->seq;
  next.id = current->id;
  next.owner = current->owner;
  next.created_at = current->created_at;
  next.ready_at = current->ready_at;
  next.finished_at = current->finished_at;
  next.updated_at = Now();
  next.version = current->version + 1;
  if (next.state == PlaygroundState::kReady && next.ready_at == 0) next.ready_at = next.updated_at;
  if (IsTerminal(next.state) && next.finished_at == 0) next.finished_at = next.updated_at;
  Stmt s(db_,
         "UPDATE playgrounds SET fleet = ?, spec_json = ?, state = ?, reason = ?, message = ?, "
         "handle = ?, expires_at = ?, stop_requested = ?, released = ?, updated_at = ?, "
         "ready_at = ?, finished_at = ?, version = ? WHERE id = ? AND version = ?");
  s.Bind(1, next.fleet).Bind(2, next.spec_json).Bind(3, ToString(next.state));
  s.Bind(4, next.reason).Bind(5, next.message).Bind(6, next.handle).Bind(7, next.expires_at);
  s.Bind(8, next.stop_requested).Bind(9, next.released).Bind(10, next.updated_at);
  s.Bind(11, next.ready_at).Bind(12, next.finished_at).Bind(13, next.version);
  s.Bind(14, next.id).Bind(15, current->version).Run();
  if (sqlite3_changes(db_) != 1) {  // read in this IMMEDIATE transaction, as in UpdateJob
    throw StoreError(fmt::format("playground {} was updated concurrently", id));
  }
  tx.Commit();
  Durable(lock);
  return next;
}

}  // namespace starforge::store
