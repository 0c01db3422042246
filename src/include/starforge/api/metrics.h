// A job's training metrics for the API (GET /api/v1/jobs/{id}/metrics): the scalars the job
// writes as JSON lines to <job dir>/metrics.jsonl ({"step": 10, "loss": 0.31, …}; the runner's
// starforge_runner.metrics.log writes them). The job writes that file, so it is untrusted: it is
// read without following a symlink or opening a FIFO, in bounded pieces, and only so far.
#pragma once

#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace starforge::api {

struct MetricsLimits {
  int64_t max_chunk = 4 << 20;  // bytes read per answer; the client asks again from offset
  int64_t max_file = 64 << 20;  // bytes of the file read at all
  int64_t max_line = 64 << 10;  // a longer line is skipped
  size_t max_series = 100;      // scalar names per answer; others are left out
};

// The points in `file` from byte `offset` on, as the API answers them:
//   {"series": [{"name", "points": [[step|null, value], …]}], "offset", "size", "lines",
//    "skipped", "complete", "warning"?}
// Only complete lines are read, unless `final` (the job has ended): then a last line without
// '\n' too. `offset` in the answer is where the next read starts; "complete" is true when
// `final` and everything readable has been read. Keys "step", "time", "timestamp" and
// "wall_time" are not series; values that are not finite numbers (strings, booleans, null,
// objects) are ignored; a line that is not a JSON object counts as skipped.
nlohmann::json ReadMetrics(const std::filesystem::path& file, int64_t offset, bool final,
                           const MetricsLimits& limits = {});

}  // namespace starforge::api
