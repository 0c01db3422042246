// Capsules built by a client (`forge submit` builds the capsule itself, so the code crosses the
// network once and nobody zips it twice): what the server checks before it stores one, and how it
// puts its own reading of the JobSpec (and its runner) into one built with another.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "starforge/capsule/inspect.h"
#include "starforge/jobspec/jobspec.h"

namespace starforge::capsule {

struct AcceptOptions {
  uint64_t max_bytes =
      512ULL << 20;  // FORGE_CAPSULE_MAX_BYTES: the archive, and its files unpacked
  std::optional<std::string_view> runner;  // the runner the server ships; unset: runner::Zipapp()
  std::filesystem::path scratch_dir;       // where a rebuilt capsule is written
};

struct AcceptResult {
  std::vector<std::string> errors;  // non-empty: refused, nothing written
  std::string sha256;               // of the capsule to store
  uint64_t size = 0;
  std::filesystem::path path;  // the upload itself, or the rebuilt capsule in scratch_dir
  size_t user_files = 0;
  bool rebuilt = false;  // its JobSpec or runner differed from the server's: they were replaced
  int local_errno = 0;   // set when our own disk failed (not the upload's fault)
  bool ok() const { return errors.empty(); }
};

// Checks `upload` as Inspect does (safe unique names, every entry's size, SHA-256 and x bit
// against the manifest, nothing unlisted, no directory entries), with limits checked before
// anything is inflated: the archive and the sum of the manifest's sizes at most max_bytes, at most
// kMaxFiles files; no .starforge/ file but the JobSpec and the runner; no file that is also
// another's directory. If its .starforge/jobspec.json is not jobspec::ToCanonicalText(spec) or its
// runner is not the server's, writes a copy with the server's (the user's entries are copied as
// they are, compressed bytes included) — the capsule the server would have built itself from the
// same files with the same libdeflate.
AcceptResult AcceptCapsule(const std::filesystem::path& upload, const jobspec::JobSpec& spec,
                           const AcceptOptions& options);

// AcceptCapsule for an upload already inspected — by Inspect(upload) with max_total_bytes =
// options.max_bytes, or as it arrived (StreamCheck::Finish): the checks after Inspect's.
AcceptResult AcceptInspected(const std::filesystem::path& upload, InspectResult inspected,
                             const jobspec::JobSpec& spec, const AcceptOptions& options);

}  // namespace starforge::capsule
