// Where capsules live: one small interface, an S3 implementation (s3_store.h) and a filesystem
// one (fs_store.h). Keys are content-addressed (`capsules/sha256-<hex>.zip`), so a key that
// already exists holds the same bytes: Put uploads nothing then.
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "starforge/common/status.h"
#include "starforge/common/status_or.h"
#include "starforge/config/config.h"

namespace starforge::objstore {

// Why an operation on a store failed. Every failure is a Status made by Failure(kind, …):
// callers act on its code() and retryable(); its reason() names the kind.
enum class ErrorKind {
  kNotFound,        // the object does not exist               → kNotFound
  kNoSuchBucket,    // the bucket does not exist               → kFailedPrecondition
  kAccessDenied,    // the credentials may not do this         → kPermissionDenied
  kBadCredentials,  // unknown access key or a bad signature   → kUnauthenticated
  kUnreachable,     // no connection (refused, DNS, TLS)       → kUnavailable, retryable
  kTimeout,         // connected, but the transfer stalled     → kDeadlineExceeded, retryable
  kServer,          // 5xx / SlowDown after every retry        → kUnavailable, retryable
  kInvalid,         // a bad argument, a local I/O problem or a request the server refused
                    //                                         → kInvalidArgument
};
// The reason of Failure(kind, …): "NotFound", "NoSuchBucket", "AccessDenied", "BadCredentials",
// "Unreachable", "Timeout", "ServerError", "Invalid".
std::string ToString(ErrorKind kind);
// The failed Status of `kind` (its code and retryability as above). The message is for a person
// and never contains a secret.
Status Failure(ErrorKind kind, std::string message);

struct ObjectInfo {
  int64_t size = 0;
  std::string etag;  // without quotes; empty for the filesystem store
};

struct PutOutcome {
  int64_t size = 0;            // the object's size
  int64_t bytes_uploaded = 0;  // request body bytes sent (0 when the key already existed)
  bool already_present = false;
};

// Called with (bytes done, bytes total) as an upload or download advances; total is <= 0
// while a download's size is not yet known.
using Progress = std::function<void(int64_t done, int64_t total)>;

// The SigV4 maximum for presigned URLs (7 days); both stores enforce it so switching store
// cannot change which expiries are accepted.
inline constexpr int64_t kMaxPresignSeconds = 604800;

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // Stores the file at `path` under `key` unless `key` exists (then sends no body). An existing
  // object of a different size is an error: content-addressed keys cannot legitimately differ.
  virtual StatusOr<PutOutcome> PutFile(const std::string& key, const std::string& path,
                                       const Progress& progress = {}) = 0;
  // PutFile for a file nobody will write again (the caller may remove it afterwards): a store on
  // the same filesystem links it into place instead of copying it. The default is PutFile.
  virtual StatusOr<PutOutcome> PutFinishedFile(const std::string& key, const std::string& path) {
    return PutFile(key, path);
  }
  // PutFile for bytes in memory.
  virtual StatusOr<PutOutcome> PutBytes(const std::string& key, std::string_view bytes,
                                        const Progress& progress = {}) = 0;
  // The object's size and ETag, or nullopt when it does not exist.
  virtual StatusOr<std::optional<ObjectInfo>> Head(const std::string& key) = 0;
  // Writes the object to `path` (atomically: a temporary file renamed into place); its size.
  virtual StatusOr<int64_t> GetFile(const std::string& key, const std::string& path,
                                    const Progress& progress = {}) = 0;
  // The object's bytes.
  virtual StatusOr<std::string> GetBytes(const std::string& key) = 0;
  // A URL that lets anyone GET this one object until `now + expires_seconds`
  // (1..kMaxPresignSeconds). Pure: no request is made and the object need not exist.
  virtual StatusOr<std::string> PresignGet(const std::string& key, int64_t expires_seconds,
                                           std::time_t now) = 0;
  // What this store is, for people: kind, location, never credentials.
  virtual std::string Describe() const = 0;
};

// Ok when `key` is usable by every store, else Failure(kInvalid, why not). Keys are '/'-separated
// segments of printable characters, at most 1024 bytes, with no empty, "." or ".." segment.
Status CheckKey(std::string_view key);
// Ok when 1 <= seconds <= kMaxPresignSeconds, else Failure(kInvalid, why not).
Status CheckPresignExpiry(int64_t seconds);

// The store `cfg` selects: S3 when FORGE_S3_ENDPOINT is set, else the filesystem store under
// `<FORGE_STORAGE_ROOT>/objects`.
StatusOr<std::unique_ptr<ObjectStore>> Open(const config::Config& cfg);

}  // namespace starforge::objstore
