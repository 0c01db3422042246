// The capsule's .starforge/manifest.json (the format the runner verifies) and the rules every
// path inside a capsule follows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "starforge/common/status_or.h"

namespace starforge::capsule {

// StarForge's own files live under this top-level directory; users' files may not.
inline constexpr const char* kStarforgeDir = ".starforge";
inline constexpr const char* kManifestPath = ".starforge/manifest.json";
inline constexpr int kManifestVersion = 1;
// The manifest is small; a bigger one is not ours (readers refuse it before reading it).
inline constexpr uint64_t kMaxManifestBytes = 64 << 20;

// One file of the capsule. `executable` records the owner's x bit, which unzip tools drop.
struct ManifestEntry {
  std::string path;  // '/'-separated, relative to the capsule root
  uint64_t size = 0;
  std::string sha256;  // lower-case hex
  bool executable = false;
  friend bool operator==(const ManifestEntry&, const ManifestEntry&) = default;
};

// Every file of the capsule except the manifest itself, sorted by path (byte order).
struct Manifest {
  int version = kManifestVersion;
  std::vector<ManifestEntry> files;
  friend bool operator==(const Manifest&, const Manifest&) = default;
};

// `{"files":[{"executable":…,"path":…,"sha256":…,"size":…},…],"version":1}` and a newline.
std::string ToText(const Manifest& manifest);

// Parses and checks a manifest (version, field types, safe unique sorted paths, hex digests);
// kInvalidArgument saying what is wrong.
StatusOr<Manifest> ParseManifest(std::string_view text);

// Empty when `path` is a safe relative archive path: non-empty UTF-8 components separated by
// single '/', none of them "." or "..", no leading '/', no backslash or control characters.
// Otherwise the reason, phrased to follow the path ("is absolute", …).
std::string CheckArchivePath(std::string_view path);

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points > U+10FFFF).
bool IsValidUtf8(std::string_view text);

}  // namespace starforge::capsule
