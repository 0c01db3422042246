// Job name search benchmark: GET /api/v1/jobs?nameContains= as the store answers it
// (store::Store::ListJobs with JobFilter::name_contains: the FTS5 trigram index from 3
// characters) against the baseline measured in the same run on the same file: the same page read
// without the index, by a scan of the names newest first (`instr(lower(name), q)`, what a plain
// `LIKE '%q%'` costs). One run; prints a table. See bench/README.md.
//
//   job_search_bench [N]      N jobs (default 100000) in a fresh store under $TMPDIR
//   KEEP=1 job_search_bench   leaves the store's directory (printed) for a look with sqlite3
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "starforge/store/store.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using starforge::store::JobFilter;
using starforge::store::Store;

constexpr int kPage = 51;  // the API's default page and one more (job_routes.cc)
constexpr int kRuns = 15;  // per row; the median is printed

void Check(int rc, sqlite3* db, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    std::fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
    std::exit(1);
  }
}

void Exec(sqlite3* db, const char* sql) {
  Check(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), db, sql);
}

// Names as a team's look: model, method, a run number; deterministic.
std::string NameOf(int i) {
  static const char* models[] = {"llama3-8b", "qwen2-7b", "mistral-7b", "gemma-2b", "phi3-mini"};
  static const char* tasks[] = {"sft", "grpo", "dpo", "eval", "pretrain", "ppo", "rm"};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%s-%05d", models[i % 5], tasks[(i / 5) % 7], i);
  return buf;
}

// N finished jobs, written directly in one transaction (the triggers of the schema fill the name
// index as the server's own inserts do); 20 owners.
void Fill(const fs::path& file, int n) {
  sqlite3* db = nullptr;
  Check(sqlite3_open(file.c_str(), &db), db, "open");
  Exec(db, "BEGIN");
  sqlite3_stmt* s = nullptr;
  Check(
      sqlite3_prepare_v2(db,
                         "INSERT INTO jobs (id, owner, name, fleet, spec_json, phase, created_at, "
                         "updated_at, logs_archived, released) VALUES (?, ?, ?, 'local', '{}', "
                         "'Succeeded', ?, ?, 1, 1)",
                         -1, &s, nullptr),
      db, "prepare");
  for (int i = 0; i < n; ++i) {
    const std::string id = "j-" + std::to_string(1'000'000 + i);
    const std::string owner = "user" + std::to_string(i % 20);
    const std::string name = NameOf(i);
    sqlite3_bind_text(s, 1, id.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 2, owner.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 3, name.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 4, 1'700'000'000'000 + i);
    sqlite3_bind_int64(s, 5, 1'700'000'000'000 + i);
    Check(sqlite3_step(s), db, "insert");
    sqlite3_reset(s);
  }
  sqlite3_finalize(s);
  Exec(db, "COMMIT");
  sqlite3_close(db);
}

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double Median(const std::function<void()>& f) {
  f();  // warm
  std::vector<double> t;
  for (int r = 0; r < kRuns; ++r) {
    const auto start = Clock::now();
    f();
    t.push_back(Ms(Clock::now() - start));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 100'000;
  if (n < 1) {
    std::fprintf(stderr, "usage: %s [N]   N jobs, at least 1\n", argv[0]);
    return 2;
  }
  const char* tmp = std::getenv("TMPDIR");
  const fs::path dir =
      fs::path(tmp != nullptr ? tmp : "/tmp") / ("job_search_bench." + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "starforge.db";
  try {
    Store::Open(file).reset();  // the schema
    auto start = Clock::now();
    Fill(file, n);
    std::printf("%d jobs written in one transaction, name index kept by triggers: %.0f ms\n", n,
                Ms(Clock::now() - start));

    // What an existing database pays once: its index built by the migration.
    {
      sqlite3* db = nullptr;
      sqlite3_open(file.c_str(), &db);
      Exec(db,
           "DROP TRIGGER jobs_name_fts_insert; DROP TRIGGER jobs_name_fts_delete; "
           "DROP TRIGGER jobs_name_fts_update; DROP TABLE jobs_name_fts; PRAGMA user_version = 4");
      sqlite3_close(db);
      start = Clock::now();
      auto migrated = Store::Open(file);
      std::printf("migrating a version-4 database of %d jobs (building the index): %.0f ms\n\n", n,
                  Ms(Clock::now() - start));
    }

    auto store = Store::Open(file);
    sqlite3* raw = nullptr;
    sqlite3_open_v2(file.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* scan = nullptr;
    sqlite3_stmt* scan_owner = nullptr;
    const char* cols =
        "SELECT seq, id, owner, name, fleet, spec_json, phase, reason, message, upload_path, "
        "capsule_sha256, fleet_handle, exit_code, cancel_requested, cancel_requested_at, "
        "logs_archived, released, created_at, updated_at, started_at, finished_at, version FROM "
        "jobs WHERE instr(lower(name), ?1) > 0";
    Check(
        sqlite3_prepare_v2(
            raw, (std::string(cols) + " ORDER BY seq DESC LIMIT " + std::to_string(kPage)).c_str(),
            -1, &scan, nullptr),
        raw, "prepare scan");
    Check(sqlite3_prepare_v2(raw,
                             (std::string(cols) + " AND owner = ?2 ORDER BY seq DESC LIMIT " +
                              std::to_string(kPage))
                                 .c_str(),
                             -1, &scan_owner, nullptr),
          raw, "prepare scan");

    std::printf("%-26s %-7s %8s %12s %12s %8s\n", "nameContains", "owner", "matches", "index (ms)",
                "scan (ms)", "scan/index");
    struct Row {
      const char* q;
      bool owner;
    };
    for (const Row& row :
         {Row{"grpo-04242", false}, Row{"llama3-8b-eval-0", false}, Row{"no-such-run", false},
          Row{"eval", false}, Row{"EVAL", false}, Row{"grpo-04242", true}, Row{"no-such-run", true},
          Row{"dpo", true}, Row{"42", false}}) {
      JobFilter f;
      f.name_contains = row.q;
      f.limit = kPage;
      if (row.owner) f.owner = "user2";
      size_t matches = 0;
      const double indexed = Median([&] { matches = store->ListJobs(f).size(); });
      std::string lower = row.q;
      for (char& c : lower)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      sqlite3_stmt* s = row.owner ? scan_owner : scan;
      size_t scanned = 0;
      const double baseline = Median([&] {
        sqlite3_reset(s);
        sqlite3_bind_text(s, 1, lower.c_str(), -1, SQLITE_TRANSIENT);
        if (row.owner) sqlite3_bind_text(s, 2, "user2", -1, SQLITE_STATIC);
        scanned = 0;
        while (sqlite3_step(s) == SQLITE_ROW)
          ++scanned;
      });
      if (scanned != matches) {
        std::fprintf(stderr, "%s: the index found %zu jobs, the scan %zu\n", row.q, matches,
                     scanned);
        return 1;
      }
      std::printf("%-26s %-7s %8zu %12.2f %12.2f %8.1fx\n", row.q, row.owner ? "user2" : "",
                  matches, indexed, baseline, baseline / std::max(indexed, 1e-3));
    }
    sqlite3_finalize(scan);
    sqlite3_finalize(scan_owner);
    sqlite3_close(raw);
    std::printf("\n(a page is %d jobs; median of %d runs each; 1-2 characters use the scan)\n",
                kPage, kRuns);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "job_search_bench: %s\n", e.what());
    fs::remove_all(dir);
    return 1;
  }
  if (std::getenv("KEEP") != nullptr) {
    std::printf("kept %s\n", file.c_str());
  } else {
    fs::remove_all(dir);
  }
  return 0;
}
