#include "starforge/objstore/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "starforge/common/format.h"
#include "starforge/common/sha256.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace starforge::objstore::sigv4 {

namespace {

bool IsUnreserved(unsigned char c) {
  return std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~';
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// SigV4 "Trimall": strip the ends and squeeze inner runs of spaces to one.
std::string TrimAll(std::string_view value) {
  std::string out;
  bool pending_space = false;
  for (char c : value) {
    if (c == ' ' || c == '\t') {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

// Lower-cased names sorted, values of repeated names joined with ',' in the order given.
std::vector<std::pair<std::string, std::string>> CanonicalHeaderList(const Params& headers) {
  std::vector<std::pair<std::string, std::string>> list;
  for (const auto& [name, value] : headers)
    list.emplace_back(Lower(name), TrimAll(value));
  std::stable_sort(list.begin(), list.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<std::string, std::string>> merged;
  for (auto& [name, value] : list) {
    if (!merged.empty() && merged.back().first == name) {
      merged.back().second += "," + value;
    } else {
      merged.emplace_back(std::move(name), std::move(value));
    }
  }
  return merged;
}

std::string Sign(const Request& request, const Credentials& credentials, const Scope& scope,
                 Signed* out) {
  out->canonical_request = CanonicalRequest(request);
  out->string_to_sign = StringToSign(scope, out->canonical_request);
  out->signature =
      Hex(HmacSha256(SigningKey(credentials.secret_access_key, scope), out->string_to_sign));
  return out->signature;
}

}  // namespace

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 0xf];
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  return starforge::Sha256Hex(data);
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac.data(), &len);
  return std::string(reinterpret_cast<const char*>(mac.data()), len);
}

std::string UriEncode(std::string_view text, bool keep_slash) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 0xf];
    }
  }
  return out;
}

std::string FormatAmzDate(std::time_t t) {
  return FormatUtc(static_cast<int64_t>(t), "%Y%m%dT%H%M%SZ");
}

std::optional<std::time_t> ParseAmzDate(std::string_view text) {
  if (text.size() != 16 || text[8] != 'T' || text[15] != 'Z') return std::nullopt;
  auto num = [&](size_t pos, size_t len) -> int {
    int v = 0;
    for (size_t i = pos; i < pos + len; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(text[i]))) return -1;
      v = v * 10 + (text[i] - '0');
    }
    return v;
  };
  const int year = num(0, 4), month = num(4, 2), day = num(6, 2);
  const int hour = num(9, 2), minute = num(11, 2), second = num(13, 2);
  if (year < 1970 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 ||
      minute > 59 || second < 0 || second > 59) {
    return std::nullopt;
  }
  const auto t = static_cast<std::time_t>(UnixSeconds(year, month, day, hour, minute, second));
  // timegm normalises 31 February into March: a round trip catches impossible dates.
  if (FormatAmzDate(t) != text) return std::nullopt;
  return t;
}

std::string CredentialScope(const Scope& scope) {
  return scope.amz_date.substr(0, 8) + "/" + scope.region + "/" + scope.service + "/aws4_request";
}

std::string CanonicalQuery(const Params& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query)
    encoded.emplace_back(UriEncode(name, false), UriEncode(value, false));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out += '&';
    out += name + "=" + value;
  }
  return out;
}

std::string SignedHeaders(const Params& headers) {
  std::string out;
  for (const auto& [name, value] : CanonicalHeaderList(headers)) {
    if (!out.empty()) out += ';';
    out += name;
  }
  return out;
}

std::string CanonicalRequest(const Request& request) {
  std::string headers;
  for (const auto& [name, value] : CanonicalHeaderList(request.headers))
    headers += name + ":" + value + "\n";
  return request.method + "\n" + UriEncode(request.path, true) + "\n" +
         CanonicalQuery(request.query) + "\n" + headers + "\n" + SignedHeaders(request.headers) +
         "\n" + request.payload_hash;
}

std::string StringToSign(const Scope& scope, std::string_view canonical_request) {
  return std::string(kAlgorithm) + "\n" + scope.amz_date + "\n" + CredentialScope(scope) + "\n" +
         Sha256Hex(canonical_request);
}

std::string SigningKey(const Secret& secret, const Scope& scope) {
  std::string key = HmacSha256("AWS4" + secret.Reveal(), scope.amz_date.substr(0, 8));
  key = HmacSha256(key, scope.region);
  key = HmacSha256(key, scope.service);
  return HmacSha256(key, "aws4_request");
}

Signed SignHeaders(const Request& request, const Credentials& credentials, const Scope& scope) {
  Signed out;
  Sign(request, credentials, scope, &out);
  out.authorization = std::string(kAlgorithm) +
                      " Credential=" + credentials.access_key_id.Reveal() + "/" +
                      CredentialScope(scope) + ", SignedHeaders=" + SignedHeaders(request.headers) +
                      ", Signature=" + out.signature;
  return out;
}

Signed Presign(const Request& request, const Credentials& credentials, const Scope& scope,
               int64_t expires_seconds) {
  Request r = request;
  r.query.emplace_back("X-Amz-Algorithm", std::string(kAlgorithm));
  r.query.emplace_back("X-Amz-Credential",
                       credentials.access_key_id.Reveal() + "/" + CredentialScope(scope));
  r.query.emplace_back("X-Amz-Date", scope.amz_date);
  r.query.emplace_back("X-Amz-Expires", std::to_string(expires_seconds));
  r.query.emplace_back("X-Amz-SignedHeaders", SignedHeaders(r.headers));
  Signed out;
  Sign(r, credentials, scope, &out);
  out.query = CanonicalQuery(r.query) + "&X-Amz-Signature=" + out.signature;
  return out;
}

}  // namespace starforge::objstore::sigv4
