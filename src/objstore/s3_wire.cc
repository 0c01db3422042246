#include "starforge/objstore/s3_wire.h"
#include "starforge/common/format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace starforge::objstore::s3wire {

namespace {

std::string DecodeEntities(std::string_view text) {
  static constexpr std::pair<std::string_view, char> kEntities[] = {
      {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
  std::string out;
  for (size_t i = 0; i < text.size();) {
    bool replaced = false;
    if (text[i] == '&') {
      for (const auto& [entity, c] : kEntities) {
        if (text.substr(i, entity.size()) == entity) {
          out += c;
          i += entity.size();
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += text[i++];
  }
  return out;
}

// A server's text, made safe for a one-line message and cut, since a misbehaving proxy may answer
// with a whole HTML page.
std::string Excerpt(std::string_view text) {
  std::string out = OneLine(text);
  if (out.size() > 300) out = out.substr(0, 300) + "…";
  return out;
}

std::string Detail(long status, const std::string& code, const std::string& message) {
  std::string d = fmt::format("HTTP {}", status);
  if (!code.empty()) d += " " + code;
  if (!message.empty()) d += ": " + Excerpt(message);
  return d;
}

}  // namespace

std::optional<std::string> ExtractXmlTag(std::string_view xml, std::string_view tag) {
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  const size_t begin = xml.find(open);
  if (begin == std::string_view::npos) return std::nullopt;
  const size_t text = begin + open.size();
  const size_t end = xml.find(close, text);
  if (end == std::string_view::npos) return std::nullopt;
  return DecodeEntities(xml.substr(text, end - text));
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Status ClassifyHttpError(const Target& target, long status, std::string_view body) {
  const std::string code = ExtractXmlTag(body, "Code").value_or("");
  const std::string message = ExtractXmlTag(body, "Message").value_or("");
  const std::string detail = Detail(status, code, message);
  const std::string where = fmt::format("bucket \"{}\" at {}", target.bucket, target.endpoint);

  if (code == kNoSuchBucket) {
    return Failure(ErrorKind::kNoSuchBucket, fmt::format("bucket \"{}\" does not exist at {}",
                                                         target.bucket, target.endpoint));
  }
  if (code == "NoSuchKey" || (status == 404 && code.empty() && !target.key.empty())) {
    return Failure(ErrorKind::kNotFound,
                   fmt::format("object \"{}\" does not exist in {}", target.key, where));
  }
  if (code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
      code == "InvalidSecurity" || code == "InvalidToken" || code == "ExpiredToken") {
    return Failure(ErrorKind::kBadCredentials,
                   fmt::format("the S3 credentials were rejected ({}) by {}: check "
                               "FORGE_S3_ACCESS_KEY/FORGE_S3_SECRET_KEY",
                               code, target.endpoint));
  }
  if (code == "RequestTimeTooSkewed") {
    return Failure(
        ErrorKind::kInvalid,
        fmt::format("{} rejected the request time (RequestTimeTooSkewed): this machine's "
                    "clock is more than 15 minutes off; fix it (e.g. with NTP)",
                    target.endpoint));
  }
  if (code == "AuthorizationHeaderMalformed" && message.find("region") != std::string::npos) {
    return Failure(ErrorKind::kInvalid,
                   fmt::format("{} expects another region ({}): set FORGE_S3_REGION",
                               target.endpoint, detail));
  }
  if (status == 403) {
    // Without s3:ListBucket, S3 answers 403 rather than 404 for a missing key, so a HEAD
    // before an upload needs that permission too.
    return Failure(ErrorKind::kAccessDenied,
                   fmt::format("access denied to {} ({}): the credentials need s3:GetObject, "
                               "s3:PutObject and s3:ListBucket on the bucket",
                               where, code.empty() ? fmt::format("HTTP {}", status) : detail));
  }
  if (code == kRequestTimeout || status == 408) {
    return Failure(ErrorKind::kTimeout,
                   fmt::format("{} timed out the request ({})", where, detail));
  }
  if (status >= 500 || status == 429 || code == kSlowDown) {
    return Failure(ErrorKind::kServer,
                   fmt::format("S3 server error at {} ({})", target.endpoint, detail));
  }
  if (status == 404) {
    return Failure(ErrorKind::kNotFound, fmt::format("not found at {} ({})", where, detail));
  }
  const std::string what =
      target.key.empty() ? where : fmt::format("\"{}\" in {}", target.key, where);
  return Failure(ErrorKind::kInvalid,
                 fmt::format("S3 refused the request for {} ({})", what, detail));
}

bool IsRetryableHttp(long status, std::string_view code) {
  return status >= 500 || status == 429 || status == 408 || code == kRequestTimeout ||
         code == kSlowDown || code == kInternalError;
}

std::string CompleteMultipartXml(const std::vector<std::string>& etags) {
  std::string xml = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < etags.size(); ++i) {
    xml += fmt::format("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", i + 1,
                       XmlEscape(etags[i]));
  }
  return xml + "</CompleteMultipartUpload>";
}

int64_t ChoosePartSize(int64_t size, int64_t preferred) {
  int64_t part = std::max<int64_t>(preferred, 1);
  if ((size + part - 1) / part > kMaxParts) {
    constexpr int64_t kMiB = int64_t{1} << 20;
    part = (size + kMaxParts - 1) / kMaxParts;
    part = (part + kMiB - 1) / kMiB * kMiB;
  }
  return part;
}

std::string Redact(std::string text, const std::vector<std::string_view>& needles) {
  for (std::string_view needle : needles) {
    if (needle.empty()) continue;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 3)) {
      text.replace(at, needle.size(), "***");
    }
  }
  return text;
}

}  // namespace starforge::objstore::s3wire
