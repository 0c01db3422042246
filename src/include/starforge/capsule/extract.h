// Unpacking an archive someone else made (code uploaded to the API) without trusting it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace starforge::capsule {

struct ExtractLimits {
  uint64_t max_total_bytes = 4ULL << 30;  // sum of the files' uncompressed sizes
  size_t max_entries = 100'000;
  // ExtractZip only: called with the archive's declared unpacked size (within the limits) before
  // anything is written, to hold that much disk (DiskBudget); a non-empty answer refuses the
  // archive as the destination's fault (local_errno ENOSPC, the answer as the error).
  std::function<std::string(uint64_t declared)> hold_space;
};

struct ExtractResult {
  std::vector<std::string> errors;  // non-empty → nothing is left at the destination
  // The failure was ours, not the archive's (the destination cannot be written: no space, I/O
  // error): errno, e.g. ENOSPC. 0 when the archive itself was refused.
  int local_errno = 0;
  size_t files = 0;
  uint64_t bytes = 0;
  bool reserved = false;  // an entry is or is under .starforge/ (kept for StarForge's files)
  bool ok() const { return errors.empty(); }
};

// Unpacks the zip `archive` into `dest`, which must not exist yet (its parent must). Refuses,
// before writing anything, entries with absolute, '..', '.', empty, non-UTF-8, control-character
// or backslash names; duplicates; a file that is also another entry's directory; symlinks and
// other special files; encrypted entries; more than max_entries entries; declared sizes over
// max_total_bytes. While writing, counts the bytes actually inflated (a zip bomb's headers may
// lie) and stops at the limit. An archive that declares more than the destination's free space is
// refused before anything is written (local_errno ENOSPC). Regular files get 0644, or 0755 if the
// archive marks them executable (Unix attributes); directory entries become directories.
ExtractResult ExtractZip(const std::filesystem::path& archive, const std::filesystem::path& dest,
                         const ExtractLimits& limits = {});

// ExtractZip's checks without its writes: every entry's name and type, the limits, and every
// file inflated (bytes counted, CRC checked) into memory that is reused, so refusing or accepting
// an upload costs no disk. files/bytes/reserved as ExtractZip would report; local_errno stays 0.
ExtractResult CheckZip(const std::filesystem::path& archive, const ExtractLimits& limits = {});

}  // namespace starforge::capsule
