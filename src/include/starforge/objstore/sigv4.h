// AWS Signature Version 4 as S3 uses it: single URI encoding, no path normalisation. Pure (no
// I/O, no clock), so tests reproduce AWS's published examples bit for bit. Used both to sign
// request headers and to presign GET URLs.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "starforge/common/secret.h"

namespace starforge::objstore::sigv4 {

inline constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";
inline constexpr std::string_view kEmptyPayloadHash =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

using Params = std::vector<std::pair<std::string, std::string>>;

// Lower-case hex of the bytes.
std::string Hex(std::string_view bytes);
// Lower-case hex SHA-256.
std::string Sha256Hex(std::string_view data);
// Raw 32-byte HMAC-SHA256.
std::string HmacSha256(std::string_view key, std::string_view data);

// Percent-encodes every byte outside RFC 3986's unreserved set (A-Z a-z 0-9 - . _ ~) as %XX
// with upper-case hex, so UTF-8 is encoded byte by byte and a space becomes %20 (never '+').
// `keep_slash` leaves '/' alone: S3 object paths keep it, query values encode it.
std::string UriEncode(std::string_view text, bool keep_slash);

// "20130524T000000Z" (UTC).
std::string FormatAmzDate(std::time_t t);
// The inverse; nullopt unless exactly YYYYMMDDTHHMMSSZ with a valid date and time.
std::optional<std::time_t> ParseAmzDate(std::string_view text);

struct Credentials {
  Secret access_key_id;  // not secret to AWS (it is in every URL), but configured as one
  Secret secret_access_key;
};

struct Scope {
  std::string amz_date;  // YYYYMMDDTHHMMSSZ; the first 8 characters are the scope's date
  std::string region = "us-east-1";
  std::string service = "s3";
};
// "<date>/<region>/<service>/aws4_request".
std::string CredentialScope(const Scope& scope);

struct Request {
  std::string method;        // "GET", "PUT", ...
  std::string path = "/";    // unencoded, e.g. "/test$file.text" (encoded once when signing)
  Params query;              // unencoded names and values, in any order
  Params headers;            // every header to sign, as sent (Host included); any case/order
  std::string payload_hash;  // hex SHA-256 of the body, or kUnsignedPayload
};

// The canonical query string: names and values encoded ('/' too), sorted by encoded name then
// value, joined as name=value with '&' (an empty value gives "name=").
std::string CanonicalQuery(const Params& query);
// "a;b;c": the lower-cased header names, sorted, duplicates once.
std::string SignedHeaders(const Params& headers);
// The six-line canonical request; headers are lower-cased, values trimmed with inner runs of
// spaces collapsed, duplicate names joined with ','.
std::string CanonicalRequest(const Request& request);
std::string StringToSign(const Scope& scope, std::string_view canonical_request);
// The raw key from the HMAC chain "AWS4"+secret -> date -> region -> service -> "aws4_request".
std::string SigningKey(const Secret& secret, const Scope& scope);

struct Signed {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;      // lower-case hex
  std::string authorization;  // header signing: the Authorization header's value
  std::string query;          // presigning: the URL's whole query string, signature last
};

// Signs every header in `request` (which must include host and, for S3, x-amz-date and
// x-amz-content-sha256 — the caller adds them so they are sent exactly as signed).
Signed SignHeaders(const Request& request, const Credentials& credentials, const Scope& scope);

// Query-string signing: adds X-Amz-Algorithm, -Credential, -Date, -Expires and -SignedHeaders
// to `request.query`, signs, and returns the query with X-Amz-Signature appended. S3 presigned
// URLs use kUnsignedPayload as `payload_hash`. `expires_seconds` is not range-checked here
// (see CheckPresignExpiry) so the generic test-suite cases can be reproduced too.
Signed Presign(const Request& request, const Credentials& credentials, const Scope& scope,
               int64_t expires_seconds);

}  // namespace starforge::objstore::sigv4
