#include "starforge/objstore/object_store.h"

#include <fmt/format.h>

#include "starforge/objstore/fs_store.h"
#include "starforge/objstore/s3_store.h"

namespace starforge::objstore {

std::string ToString(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNotFound:
      return "NotFound";
    case ErrorKind::kNoSuchBucket:
      return "NoSuchBucket";
    case ErrorKind::kAccessDenied:
      return "AccessDenied";
    case ErrorKind::kBadCredentials:
      return "BadCredentials";
    case ErrorKind::kUnreachable:
      return "Unreachable";
    case ErrorKind::kTimeout:
      return "Timeout";
    case ErrorKind::kServer:
      return "ServerError";
    case ErrorKind::kInvalid:
      break;
  }
  return "Invalid";
}

Status Failure(ErrorKind kind, std::string message) {
  Code code = Code::kInvalidArgument;
  switch (kind) {
    case ErrorKind::kNotFound:
      code = Code::kNotFound;
      break;
    case ErrorKind::kNoSuchBucket:
      code = Code::kFailedPrecondition;
      break;
    case ErrorKind::kAccessDenied:
      code = Code::kPermissionDenied;
      break;
    case ErrorKind::kBadCredentials:
      code = Code::kUnauthenticated;
      break;
    case ErrorKind::kUnreachable:
    case ErrorKind::kServer:
      code = Code::kUnavailable;
      break;
    case ErrorKind::kTimeout:
      code = Code::kDeadlineExceeded;
      break;
    case ErrorKind::kInvalid:
      break;
  }
  return Status(code, std::move(message)).WithReason(ToString(kind));
}

Status CheckKey(std::string_view key) {
  if (key.empty()) return Failure(ErrorKind::kInvalid, "an object key must not be empty");
  if (key.size() > 1024)
    return Failure(ErrorKind::kInvalid,
                   fmt::format("an object key is at most 1024 bytes, got {}", key.size()));
  for (unsigned char c : key) {
    // Control characters break log lines and HTTP; '\\' means a path separator to some tools.
    if (c < 0x20 || c == 0x7f || c == '\\') {
      return Failure(ErrorKind::kInvalid,
                     fmt::format("object key {:?} contains a control character or backslash",
                                 std::string(key)));
    }
  }
  size_t start = 0;
  while (start <= key.size()) {
    const size_t slash = std::min(key.find('/', start), key.size());
    const std::string_view segment = key.substr(start, slash - start);
    // Empty, "." and ".." segments would be normalised away by HTTP clients and by the
    // filesystem store's paths, so the object would land somewhere other than its key says.
    if (segment.empty() || segment == "." || segment == "..") {
      return Failure(
          ErrorKind::kInvalid,
          fmt::format("object key {:?} has an empty, \".\" or \"..\" path segment (keys look like "
                      "capsules/sha256-<hex>.zip)",
                      std::string(key)));
    }
    start = slash + 1;
  }
  return Status::Ok();
}

Status CheckPresignExpiry(int64_t seconds) {
  if (seconds >= 1 && seconds <= kMaxPresignSeconds) return Status::Ok();
  return Failure(
      ErrorKind::kInvalid,
      fmt::format(
          "a presigned URL's expiry must be between 1 and {} seconds (7 days, the SigV4 maximum), "
          "got {}",
          kMaxPresignSeconds, seconds));
}

StatusOr<std::unique_ptr<ObjectStore>> Open(const config::Config& cfg) {
  if (!cfg.s3_endpoint.empty()) return OpenS3(S3OptionsFromConfig(cfg));
  std::string root = cfg.storage_root;
  while (root.size() > 1 && root.back() == '/') {
    root.pop_back();
  }
  return OpenFilesystem(root == "/" ? "/objects" : root + "/objects");
}

}  // namespace starforge::objstore
