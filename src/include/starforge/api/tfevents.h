// TensorBoard event files (`events.out.tfevents.*`) a job writes under its job directory: the
// scalars in them, for GET /api/v1/jobs/{id}/metrics (metrics.h) beside metrics.jsonl. The
// record format is TFRecord: uint64 length, masked CRC-32C of the length, the data, masked
// CRC-32C of the data (little-endian); the data is an Event protobuf (api/tfevents.proto, the
// subset read). The job writes these files, so they are untrusted: found without following a
// symlink at any step, read in bounded pieces, every CRC checked.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace starforge::api {

// CRC-32C (Castagnoli) of `data`, and TFRecord's mask of it.
uint32_t Crc32c(std::string_view data);
uint32_t MaskedCrc32c(std::string_view data);

struct EventFile {
  std::string path;  // relative to the job directory, '/'-separated
  int64_t size = 0;
};

// The event files under `job_dir` (names starting "events.out.tfevents."), sorted by path:
// directories are opened one component at a time without following symlinks; at most
// `max_depth` levels below `job_dir`, `max_entries` directory entries looked at and `max_files`
// files returned. `warning` says which limit was reached ("" when none).
std::vector<EventFile> FindEventFiles(const std::filesystem::path& job_dir, int max_depth,
                                      int64_t max_entries, size_t max_files, std::string* warning);

// One scalar of an event: its tag, step and value.
struct EventScalar {
  std::string tag;
  int64_t step = 0;
  double value = 0;
};

struct EventRead {
  int64_t offset = 0;    // where the next read starts
  int64_t size = 0;      // the file's size when read
  int64_t records = 0;   // records read
  int64_t skipped = 0;   // records skipped: bad data CRC, not an Event, longer than max_record
  int64_t limit = 0;     // what of the file is read at all: min(size, max_file)
  bool more = false;     // the read stopped at max_bytes: there is more to read now
  bool stopped = false;  // a record's header is corrupt (or the file is not one): read no more
  std::string problem;   // why it stopped, or what was skipped last ("" when nothing)
};

struct EventReadLimits {
  int64_t max_bytes = 4 << 20;   // bytes read from `offset` in this call
  int64_t max_file = 64 << 20;   // bytes of the file read at all
  int64_t max_record = 1 << 20;  // a longer record is skipped (images, graphs), not read
};

// The records of the event file `rel` under `job_dir` from byte `offset`: each scalar to
// `emit`. Only whole records are read: one still being written is read by a later call. The
// file is opened like metrics.jsonl (no symlink at any step, no FIFO); a missing file reads as
// empty.
EventRead ReadEventFile(const std::filesystem::path& job_dir, const std::string& rel,
                        int64_t offset, const EventReadLimits& limits,
                        const std::function<void(const EventScalar&)>& emit);

}  // namespace starforge::api
