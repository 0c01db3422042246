// Reading a capsule back: its identity, its manifest, and whether every entry matches it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "starforge/capsule/collect.h"
#include "starforge/capsule/manifest.h"

namespace starforge::capsule {

struct InspectResult {
  std::string sha256;                 // of the archive bytes ("" if unreadable)
  uint64_t size = 0;                  // archive bytes
  std::optional<Manifest> manifest;   // set when .starforge/manifest.json was readable and valid
  std::vector<std::string> problems;  // one per mismatch, missing, extra or unsafe entry
  size_t verified = 0;                // manifest entries whose size and SHA-256 matched
  bool ok() const { return manifest.has_value() && problems.empty(); }
};

struct InspectOptions {
  int threads = 0;  // entries verified in parallel; 0: one thread per core (same result)
  // Refused before any entry is inflated: more entries than this, or manifest sizes adding up
  // to more than this (a zip bomb's manifest may claim anything).
  size_t max_entries = kMaxFiles + 3;
  uint64_t max_total_bytes = UINT64_MAX;
  // Called once the file is open and its size known, before anything else is read (tests: the
  // file changed under an inspection).
  std::function<void()> opened;
};

// Opens `capsule` and checks it the way the runner will: every manifest entry present with its
// size, SHA-256 and executable bit; no entry missing from the manifest; safe unique names; no
// directory entries; StarForge's files present; more than one top-level entry (else Ray would
// strip the top directory).
InspectResult Inspect(const std::filesystem::path& capsule, const InspectOptions& options = {});

}  // namespace starforge::capsule
