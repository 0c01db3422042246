// The Job Capsule: a deterministic zip of the user's files (at the top level) and StarForge's
// (.starforge/jobspec.json, manifest.json, runner.pyz), named by its SHA-256. See
// docs/capsule.md for the format and the guarantees.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "starforge/capsule/collect.h"
#include "starforge/capsule/manifest.h"
#include "starforge/capsule/reuse.h"
#include "starforge/capsule/runner.h"  // kJobSpecPath, kRunnerPath
#include "starforge/jobspec/jobspec.h"

namespace starforge::capsule {

inline constexpr int64_t kDefaultMaxBytes = 512LL << 20;  // FORGE_CAPSULE_MAX_BYTES default

// The order of the capsule's entries (format 3): the user's files by path (byte order), then
// StarForge's own (.starforge/…) by path. StarForge's come last because the manifest changes
// with any file: an archive that changes after its first changed user file shares every byte
// before it with the previous one, which a rebuild does not hash again (docs/capsule.md).
// Readers look entries up by name; nothing depends on this order but the bytes.
bool ArchiveOrder(std::string_view a, std::string_view b);

struct BuildProgress {
  enum class Phase { kHashing, kWriting };
  Phase phase = Phase::kHashing;
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
};

struct BuildOptions {
  // The capsule file. Empty: `output_dir/sha256-<hex>.zip`. Written in a private temporary
  // directory beside it (.forge-capsule-XXXXXX/) and renamed: either absent or complete.
  std::filesystem::path output;
  std::filesystem::path output_dir = ".";
  int64_t max_bytes = kDefaultMaxBytes;  // FORGE_CAPSULE_MAX_BYTES
  // The runner zipapp stored as .starforge/runner.pyz; unset: runner::Zipapp().
  std::optional<std::string_view> runner;
  int threads = 0;  // threads hashing and deflating; 0: one per core (the output is the same)
  // The previous build of the same tree (ReuseIndex::Load): files whose stat identity is
  // unchanged are not read again for their digest, and contents it already holds are copied
  // from its capsule instead of deflated again. Unset or empty: everything is read and
  // deflated. The output is the same either way.
  const ReuseIndex* reuse = nullptr;
  // Called on the calling thread, at most about ten times a second.
  std::function<void(const BuildProgress&)> progress;
  // Called on the build's writing thread each time the capsule file holds more of the archive:
  // `fd` is that file (readable; the build closes it when it returns, so a caller that reads it
  // later dups it during the call) and `bytes` how much of the archive, from its first byte, it
  // now holds. `forge submit` uploads the archive while it is built by reading it back (pread)
  // up to there: no copy of its own, and the build never waits for the upload. Called with
  // `bytes` only growing; the file's bytes are the capsule's only when the build succeeds.
  std::function<void(int fd, uint64_t bytes)> written;
};

struct BuildResult {
  std::vector<std::string> errors;          // non-empty → no file was written
  std::string sha256;                       // of the archive bytes: the capsule's identity
  uint64_t size = 0;                        // archive bytes
  std::filesystem::path path;               // where it was written
  Manifest manifest;                        // as stored in .starforge/manifest.json
  size_t user_files = 0;                    // files of the user's (entries = user_files + 3)
  std::vector<EntryRecord> entries;         // the user's files, for ReuseIndex::Save
  std::vector<HashCheckpoint> checkpoints;  // the archive's SHA-256 states, for ReuseIndex::Save
  size_t files_read = 0;      // user files read to hash them (the others: digest from `reuse`)
  size_t entries_reused = 0;  // entries copied from the previous capsule, not read or deflated
  // Archive bytes run through SHA-256: fewer than `size` when the archive starts with bytes of
  // the previous capsule, whose hash state the reuse index kept.
  uint64_t bytes_hashed = 0;
  bool ok() const { return errors.empty(); }
};

// Builds a capsule from `files` (normally Collect(dir).files) and `spec`. Byte-identical output
// for the same file contents, executable bits, paths, JobSpec and runner, wherever the files
// live and whatever their times, owners or other permission bits. Refuses: no files (Ray would
// strip a lone .starforge/ directory), unsafe, duplicate or reserved (.starforge/) paths, a file
// that is also a directory prefix of another, files that cannot be read or that change while
// being read, and an archive over `max_bytes` (the error lists the ten largest files).
BuildResult Build(const std::vector<InputFile>& files, const jobspec::JobSpec& spec,
                  const BuildOptions& options);

// The object-store key of a capsule: "capsules/sha256-<hex>.zip".
std::string ObjectKey(std::string_view sha256_hex);

// "sha256-<hex>.zip": the file name part of ObjectKey.
std::string FileName(std::string_view sha256_hex);

// Bytes for people: "812 B", "4.0 KiB", "1.5 GiB".
std::string FormatBytes(uint64_t bytes);

// Whether a file's contents are stored rather than deflated: decided from its first 64 KiB
// alone (a near-uniform byte histogram means already compressed or random data), so that the
// choice is the same on every machine and costs no trial compression.
bool LooksIncompressible(std::string_view head);

}  // namespace starforge::capsule
