// Resubmitting unchanged code without rebuilding: remembers which capsule digest the exact same
// inputs produced, keyed by the files' identities and times (like git's index), so a caller can
// skip the build when the object store already holds capsules/sha256-<digest>.zip.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "starforge/capsule/collect.h"
#include "starforge/jobspec/jobspec.h"

namespace starforge::capsule {

struct Fingerprint {
  std::string key;    // hex; "" when a file could not be stat'ed (then nothing is cached)
  bool racy = false;  // a file changed in the last 2 s: its times may not show a next change
};

class DigestCache {
 public:
  // Entries live as small files in `dir` (created when first needed).
  explicit DigestCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

  // Everything Build reads, by identity: each file's path, source, device, inode, size, mtime,
  // ctime and owner-x bit; the canonical JobSpec; the runner (unset: runner::Zipapp()); the
  // capsule format version. Costs one stat per file, no reads.
  Fingerprint Compute(const std::vector<InputFile>& files, const jobspec::JobSpec& spec,
                      std::optional<std::string_view> runner = std::nullopt) const;

  // The same from the identities Collect recorded in `files` (InputFile::has_stat), without a
  // stat: what an unchanged resubmit looks up. Files without one are stat'ed.
  Fingerprint FromWalk(const std::vector<InputFile>& files, const jobspec::JobSpec& spec,
                       std::optional<std::string_view> runner = std::nullopt) const;

  // The digest remembered for `fp`, if any.
  std::optional<std::string> Lookup(const Fingerprint& fp) const;

  // Remembers `sha256` for `fp`, unless fp is racy or empty. Call with a fingerprint computed
  // before the build and checked equal to one computed after it.
  void Remember(const Fingerprint& fp, const std::string& sha256) const;

 private:
  Fingerprint Make(const std::vector<InputFile>& files, const jobspec::JobSpec& spec,
                   std::optional<std::string_view> runner, bool from_walk) const;
  std::filesystem::path dir_;
};

}  // namespace starforge::capsule
