// Fills a store with finished jobs for the console's large-list test (tests/console/
// local_test.mjs): `console_seed_jobs DB OWNER N` creates N Succeeded jobs of OWNER, named
// seed-00000 … (oldest first), a minute apart and ending now, each with its cleanup done so that
// the controller of a server started on DB has nothing to do with them. Through store::Store,
// the same code a server writes with, so the rows are what the API would have made.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "starforge/common/format.h"
#include "starforge/store/store.h"

int main(int argc, char** argv) {
  using namespace starforge;
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s DB OWNER N\n", argv[0]);
    return 2;
  }
  try {
    auto store = store::Store::Open(argv[1]);
    store->EnsureUser(argv[2], false);
    const int n = std::atoi(argv[3]);
    const int64_t now = NowMs();
    int64_t clock = 0;
    store->SetClockForTesting([&clock] { return clock; });
    for (int i = 0; i < n; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "seed-%05d", i);
      clock = now - static_cast<int64_t>(n - i) * 60'000;
      store::Job job;
      job.owner = argv[2];
      job.name = name;
      job.fleet = "local";
      job.spec_json = std::string("{\"name\":\"") + name + "\"}";
      const store::Job created = store->CreateJob(job, "seed");
      clock += 30'000;
      store->UpdateJob(
          created.id,
          [](store::Job& j) {
            j.exit_code = 0;
            j.logs_archived = true;
            j.released = true;
          },
          store::PhaseChange{store::Phase::kSucceeded, "Completed", "seeded", "seed"});
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "console_seed_jobs: %s\n", e.what());
    return 1;
  }
  return 0;
}
