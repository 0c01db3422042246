// Incremental capsules: what the previous build of a tree learnt, so the next one reads and
// deflates only what changed. Each file's SHA-256 is remembered by its stat identity (path,
// device, inode, size, mtime, ctime: like git's index, no read), and each content's compressed
// entry by its SHA-256, as a place in the previous capsule whose bytes are copied as they are
// (the zip is deterministic: an entry's bytes depend only on the file's contents).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace starforge::capsule {

// One user file of a built capsule, as the next build may reuse it.
struct EntryRecord {
  std::string path;
  std::string sha256;
  uint64_t size = 0;
  uint16_t method = 0;  // 0 stored, 8 deflate
  uint32_t crc32 = 0;
  uint64_t comp_size = 0;
  uint64_t data_offset = 0;  // of the entry's data in the capsule
  // Stat identity of the source when it was read; has_stat false when it was too fresh to
  // trust (file times come from a coarse clock: a change within the same tick would not show).
  bool has_stat = false;
  uint64_t dev = 0, ino = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
};

// SHA-256's chaining state after the first `offset` bytes of a capsule (a multiple of 64 bytes):
// a build whose archive starts with the same bytes hashes on from here instead of from byte 0.
struct HashCheckpoint {
  uint64_t offset = 0;
  std::array<uint32_t, 8> state{};
  bool operator==(const HashCheckpoint&) const = default;
};

class ReuseIndex {
 public:
  ReuseIndex() = default;
  ReuseIndex(ReuseIndex&&) = default;  // the maps point into records_, which a move keeps
  ReuseIndex& operator=(ReuseIndex&&) = default;
  ReuseIndex(const ReuseIndex&) = delete;
  ReuseIndex& operator=(const ReuseIndex&) = delete;

  // The index saved at `file`; empty when there is none, it is damaged or cut short (its last
  // line is a SHA-256 of the rest), it was written by another capsule format, or the capsule it
  // points to was removed, moved or changed.
  static ReuseIndex Load(const std::filesystem::path& file);

  // Remembers `records` as the entries of `capsule` (which must exist) and `checkpoints` as its
  // SHA-256 states (BuildResult::checkpoints). An index that cannot be written is simply not
  // saved: the next build is a full one.
  static void Save(const std::filesystem::path& file, const std::filesystem::path& capsule,
                   const std::vector<EntryRecord>& records,
                   const std::vector<HashCheckpoint>& checkpoints);

  bool empty() const { return records_.empty(); }
  const std::filesystem::path& capsule() const { return capsule_; }
  // The capsule's SHA-256 states, by increasing offset.
  const std::vector<HashCheckpoint>& checkpoints() const { return checkpoints_; }

  // The record of `path` if its source still has the stat identity it had when it was read.
  const EntryRecord* ByStat(std::string_view path, uint64_t dev, uint64_t ino, uint64_t size,
                            int64_t mtime_ns, int64_t ctime_ns) const;
  // A record of the same contents, under any path.
  const EntryRecord* ByDigest(std::string_view sha256) const;

 private:
  std::filesystem::path capsule_;
  std::vector<EntryRecord> records_;
  std::vector<HashCheckpoint> checkpoints_;
  std::unordered_map<std::string_view, size_t> by_path_;
  std::unordered_map<std::string_view, size_t> by_digest_;
};

// The capsule format, as a string that changes whenever the same inputs would give other bytes
// (the DigestCache and ReuseIndex keys include it).
std::string FormatVersion();

}  // namespace starforge::capsule
