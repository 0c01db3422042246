// The pure parts of talking to S3: reading its XML replies, turning error replies into clear
// messages, retry decisions and multipart arithmetic. Kept apart from the transport so tests
// cover them without a server.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "starforge/objstore/object_store.h"

namespace starforge::objstore::s3wire {

// S3's error codes (the <Code> of an error body) that StarForge acts on.
inline constexpr const char* kNoSuchBucket = "NoSuchBucket";
inline constexpr const char* kRequestTimeout = "RequestTimeout";
inline constexpr const char* kSlowDown = "SlowDown";
inline constexpr const char* kInternalError = "InternalError";

// The text of the first <tag>…</tag> in `xml`, with the five predefined entities decoded;
// nullopt when absent. Not an XML parser: S3's error and multipart replies are flat documents
// whose few fields we need, and no XML library is a dependency.
std::optional<std::string> ExtractXmlTag(std::string_view xml, std::string_view tag);
// Escapes & < > " ' for element text.
std::string XmlEscape(std::string_view text);

// Where a request went, so messages can name it (never credentials).
struct Target {
  std::string endpoint;  // as configured, e.g. "http://127.0.0.1:9000"
  std::string bucket;
  std::string key;  // "" for bucket-level requests
};

// The failed Status for a non-2xx reply. `body` may be empty (HEAD replies carry none); S3 error
// codes (NoSuchBucket, InvalidAccessKeyId, SignatureDoesNotMatch, AccessDenied, SlowDown, …) pick
// the kind and message.
Status ClassifyHttpError(const Target& target, long status, std::string_view body);

// Whether a reply is worth retrying: 5xx, 429, and S3's RequestTimeout/SlowDown codes. Other
// 4xx replies would fail the same way again.
bool IsRetryableHttp(long status, std::string_view code);

// The body of CompleteMultipartUpload; etags[i] is part i+1's ETag as the server sent it.
std::string CompleteMultipartXml(const std::vector<std::string>& etags);

// Part size for an object of `size` bytes: `preferred`, grown (to a whole MiB) when needed to
// stay within S3's 10 000 parts.
int64_t ChoosePartSize(int64_t size, int64_t preferred);
inline constexpr int64_t kMaxParts = 10000;

// `text` with every occurrence of each non-empty needle replaced by "***": the last guard that
// keeps a credential out of an error message, whatever a server echoed.
std::string Redact(std::string text, const std::vector<std::string_view>& needles);

}  // namespace starforge::objstore::s3wire
