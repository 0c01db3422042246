// A job's capsule as the job page shows it (GET /api/v1/jobs/{id}/capsule): its size and the file
// list of its own manifest (.starforge/manifest.json, capsule/manifest.h), read from the stored
// capsule — never by listing the user's code again. The manifest of a capsule never changes
// (the capsule is named by its digest), so it is read from the object store once and then kept
// in a directory of the server's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "starforge/capsule/manifest.h"
#include "starforge/objstore/object_store.h"

namespace starforge::api {

struct CapsuleInfo {
  uint64_t size = 0;  // the capsule's bytes
  capsule::Manifest manifest;
};

// The manifest inside the capsule zip at `file` (the one entry, inflated, at most 64 MiB), or
// why not (kInvalidArgument).
StatusOr<capsule::Manifest> ReadCapsuleManifest(const std::filesystem::path& file);

// Reads capsule `sha256` (its key: capsule::ObjectKey) through `objects`: a filesystem store's
// object is opened where it lies; another store's is downloaded into `cache_dir` for the
// reading and removed. The manifest (and the size) are then kept in `cache_dir` as
// sha256-<hex>.json for the next call. kNotFound when the capsule is not stored; the object
// store's failure, or kInvalidArgument for an unreadable capsule, otherwise.
StatusOr<CapsuleInfo> LoadCapsuleInfo(objstore::ObjectStore& objects,
                                      const std::filesystem::path& cache_dir,
                                      const std::string& sha256);

}  // namespace starforge::api
