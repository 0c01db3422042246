// Reading a job's driver.log for the API: the last N lines, and following it as Server-Sent
// Events. Lines are never split between events except a line longer than kMaxChunk.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace starforge::api {

// Opens a job's log, <job dir>/logs/<name>, for reading. The job writes its directory, so it may
// have made `logs` or the file a symlink (to another job's logs, to a secret of the server) or a
// FIFO (to hang the reader): neither is followed nor opened, and -1 is returned as for a missing
// file. Never blocks.
int OpenJobLog(const std::filesystem::path& file);

// The byte offset where the last `n` lines of `file` start (a final line without '\n' counts);
// the file's size for n = 0, and 0 when the file has fewer lines or does not exist.
int64_t TailOffset(const std::filesystem::path& file, int64_t n);

// Follows a growing log file from a byte offset (0, a client's Last-Event-ID, or TailOffset).
class LogFollower {
 public:
  static constexpr size_t kMaxChunk = 1 << 20;  // bytes read per event at most

  LogFollower(std::filesystem::path file, int64_t offset)
      : file_(std::move(file)), offset_(offset) {}

  // What was appended since the last call, as SSE "log" events (convert.h SseLogEvent): the
  // complete lines; with `final` also a last line without '\n'. "" when there is nothing new
  // (or the file does not exist yet). An offset past the end of the file is moved to its end.
  std::string Poll(bool final);
  int64_t offset() const { return offset_; }

 private:
  std::filesystem::path file_;
  int64_t offset_;
};

}  // namespace starforge::api
