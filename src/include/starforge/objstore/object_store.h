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
#include <variant>

#include "starforge/config/config.h"

namespace starforge::objstore {

enum class ErrorKind {
  kNotFound,        // the object does not exist
  kNoSuchBucket,    // the bucket does not exist
  kAccessDenied,    // the credentials are valid but may not do this
  kBadCredentials,  // the access key is unknown or the signature does not match
  kUnreachable,     // no connection (refused, DNS, TLS handshake)
  kTimeout,         // connected, but the transfer stalled
  kServer,          // 5xx / SlowDown after every retry
  kInvalid,         // a bad argument, a local I/O problem or a request the server refused
};
std::string ToString(ErrorKind kind);  // "not-found", "no-such-bucket", ...

// What went wrong, for a person. The message never contains a secret.
struct Error {
  ErrorKind kind = ErrorKind::kInvalid;
  std::string message;
};

// A value or an Error (std::expected is C++23).
template <typename T>
class Result {
 public:
  // Implicit on purpose, as std::expected's: `return value;` and `return Error{…};` both work.
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return std::get<0>(v_); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T* operator->() const { return &std::get<0>(v_); }
  const T& operator*() const { return std::get<0>(v_); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

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
  virtual Result<PutOutcome> PutFile(const std::string& key, const std::string& path,
                                     const Progress& progress = {}) = 0;
  // PutFile for a file nobody will write again (the caller may remove it afterwards): a store on
  // the same filesystem links it into place instead of copying it. The default is PutFile.
  virtual Result<PutOutcome> PutFinishedFile(const std::string& key, const std::string& path) {
    return PutFile(key, path);
  }
  // PutFile for bytes in memory.
  virtual Result<PutOutcome> PutBytes(const std::string& key, std::string_view bytes,
                                      const Progress& progress = {}) = 0;
  // The object's size and ETag, or nullopt when it does not exist.
  virtual Result<std::optional<ObjectInfo>> Head(const std::string& key) = 0;
  // Writes the object to `path` (atomically: a temporary file renamed into place); its size.
  virtual Result<int64_t> GetFile(const std::string& key, const std::string& path,
                                  const Progress& progress = {}) = 0;
  // The object's bytes.
  virtual Result<std::string> GetBytes(const std::string& key) = 0;
  // A URL that lets anyone GET this one object until `now + expires_seconds`
  // (1..kMaxPresignSeconds). Pure: no request is made and the object need not exist.
  virtual Result<std::string> PresignGet(const std::string& key, int64_t expires_seconds,
                                         std::time_t now) = 0;
  // What this store is, for people: kind, location, never credentials.
  virtual std::string Describe() const = 0;
};

// "" when `key` is usable by every store, else why not. Keys are '/'-separated segments of
// printable characters, at most 1024 bytes, with no empty, "." or ".." segment.
std::string CheckKey(std::string_view key);
// "" when 1 <= seconds <= kMaxPresignSeconds, else why not.
std::string CheckPresignExpiry(int64_t seconds);

// The store `cfg` selects: S3 when FORGE_S3_ENDPOINT is set, else the filesystem store under
// `<FORGE_STORAGE_ROOT>/objects`.
Result<std::unique_ptr<ObjectStore>> Open(const config::Config& cfg);

}  // namespace starforge::objstore
