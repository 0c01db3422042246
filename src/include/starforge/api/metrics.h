// A job's training metrics for the API (GET /api/v1/jobs/{id}/metrics): the scalars the job
// writes as JSON lines to <job dir>/metrics.jsonl ({"step": 10, "loss": 0.31, …}; the runner's
// starforge_runner.metrics.log writes them). The job writes that file, so it is untrusted: it is
// read without following a symlink or opening a FIFO, in bounded pieces, and only so far.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/api/tfevents.h"

namespace starforge::api {

struct MetricsLimits {
  int64_t max_chunk = 4 << 20;  // bytes read per answer; the client asks again from offset
  int64_t max_file = 64 << 20;  // bytes of the file read at all
  int64_t max_line = 64 << 10;  // a longer line is skipped
  size_t max_series = 100;      // scalar names per answer; others are left out
  // TensorBoard event files (tfevents.h): each read like metrics.jsonl (max_file, and max_chunk
  // for all of them and metrics.jsonl together per answer).
  size_t max_event_files = 16;       // files read at most (the first by path)
  int max_event_depth = 4;           // directory levels below the job directory looked in
  int64_t max_dir_entries = 10'000;  // directory entries looked at to find them
  int64_t max_record = 1 << 20;      // a longer record (an image, a graph) is skipped unread
};

// Where a read of a job's metrics goes on: the byte offset in metrics.jsonl and in each event
// file (by its path under the job directory). Encoded for clients as an opaque string: the
// offset alone while there are no event files ("1234"), so a byte offset is a cursor too.
struct MetricsCursor {
  int64_t jsonl = 0;
  std::map<std::string, int64_t> events;
  std::string Encode() const;
  static std::optional<MetricsCursor> Decode(std::string_view s);  // nullopt: malformed
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

// The job's event files (FindEventFiles with `limits`); *warning says which limit was reached.
std::vector<EventFile> FindJobEventFiles(const std::filesystem::path& job_dir,
                                         const MetricsLimits& limits, std::string* warning);

// A job's metrics from `from` on: <job_dir>/metrics.jsonl as ReadMetrics reads it and the
// scalars of the event files `files` (FindJobEventFiles), merged into the same series (an event
// file's tag is a series' name; its points have the event's step). The answer is ReadMetrics'
// (offset, size, lines and skipped are metrics.jsonl's) plus "cursor" (where the next read
// starts: MetricsCursor::Encode), "eventFiles" ([{path, offset, size}]) and "more" (a limit of
// this answer left bytes unread: ask again at once); `find_warning` joins "warning". "complete"
// once `final` and every file is read to its end (or to a corrupt record).
nlohmann::json ReadJobMetrics(const std::filesystem::path& job_dir, const MetricsCursor& from,
                              const std::vector<EventFile>& files, bool final,
                              const MetricsLimits& limits = {},
                              const std::string& find_warning = "");

}  // namespace starforge::api
