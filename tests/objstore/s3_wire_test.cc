// S3 reply parsing, error classification, retry and multipart arithmetic; progress display.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "starforge/objstore/progress.h"
#include "starforge/objstore/s3_wire.h"

namespace starforge::objstore {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

const s3wire::Target kTarget{"http://s3.local:9000", "forge", "capsules/a.zip"};

TEST(S3Xml, ExtractsFlatTagsAndDecodesEntities) {
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
      "<Message>The key &quot;a&amp;b&quot; &lt;gone&gt;</Message><Key>a</Key></Error>";
  EXPECT_EQ(s3wire::ExtractXmlTag(xml, "Code"), "NoSuchKey");
  EXPECT_EQ(s3wire::ExtractXmlTag(xml, "Message"), "The key \"a&b\" <gone>");
  EXPECT_EQ(s3wire::ExtractXmlTag(xml, "RequestId"), std::nullopt);
  EXPECT_EQ(s3wire::ExtractXmlTag("<Code>unterminated", "Code"), std::nullopt);
  EXPECT_EQ(s3wire::ExtractXmlTag("", "Code"), std::nullopt);
  EXPECT_EQ(s3wire::XmlEscape("\"a\"&<b>'"), "&quot;a&quot;&amp;&lt;b&gt;&apos;");
}

Status Classify(long status, const std::string& code, const std::string& message = "") {
  const std::string body =
      code.empty() ? ""
                   : "<Error><Code>" + code + "</Code><Message>" + message + "</Message></Error>";
  return s3wire::ClassifyHttpError(kTarget, status, body);
}

TEST(S3Errors, ClearMessagesPerCode) {
  Status e = Classify(404, "NoSuchBucket");
  EXPECT_EQ(e.reason(), ToString(ErrorKind::kNoSuchBucket));
  EXPECT_EQ(e.message(), "bucket \"forge\" does not exist at http://s3.local:9000");

  e = Classify(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist");
  EXPECT_EQ(e.reason(), ToString(ErrorKind::kBadCredentials));
  EXPECT_EQ(e.message(),
            "the S3 credentials were rejected (InvalidAccessKeyId) by http://s3.local:9000: check "
            "FORGE_S3_ACCESS_KEY/FORGE_S3_SECRET_KEY");
  EXPECT_EQ(Classify(403, "SignatureDoesNotMatch").reason(), ToString(ErrorKind::kBadCredentials));

  e = Classify(403, "AccessDenied", "Access Denied");
  EXPECT_EQ(e.reason(), ToString(ErrorKind::kAccessDenied));
  EXPECT_THAT(e.message(), HasSubstr("access denied to bucket \"forge\" at http://s3.local:9000 "
                                     "(HTTP 403 AccessDenied: Access Denied)"));
  EXPECT_EQ(Classify(403, "").reason(), ToString(ErrorKind::kAccessDenied));  // a HEAD: no body

  e = Classify(404, "NoSuchKey");
  EXPECT_EQ(e.reason(), ToString(ErrorKind::kNotFound));
  EXPECT_EQ(e.message(),
            "object \"capsules/a.zip\" does not exist in bucket \"forge\" at http://s3.local:9000");
  EXPECT_EQ(Classify(404, "").reason(), ToString(ErrorKind::kNotFound));

  EXPECT_EQ(Classify(503, "SlowDown", "Reduce your rate").reason(), ToString(ErrorKind::kServer));
  EXPECT_THAT(Classify(503, "SlowDown", "Reduce your rate").message(),
              HasSubstr("(HTTP 503 SlowDown: Reduce your rate)"));
  EXPECT_EQ(Classify(500, "").reason(), ToString(ErrorKind::kServer));
  EXPECT_EQ(Classify(400, "RequestTimeout").reason(), ToString(ErrorKind::kTimeout));
  EXPECT_THAT(Classify(403, "RequestTimeTooSkewed").message(), HasSubstr("clock"));
  EXPECT_EQ(Classify(400, "InvalidArgument", "bad").reason(), ToString(ErrorKind::kInvalid));
  EXPECT_THAT(Classify(400, "InvalidArgument", "bad").message(),
              HasSubstr("S3 refused the request for \"capsules/a.zip\" in bucket \"forge\""));
}

TEST(S3Errors, EachKindIsAStatusCode) {
  const struct {
    ErrorKind kind;
    Code code;
    bool retryable;
    const char* reason;
  } cases[] = {
      {ErrorKind::kNotFound, Code::kNotFound, false, "NotFound"},
      {ErrorKind::kNoSuchBucket, Code::kFailedPrecondition, false, "NoSuchBucket"},
      {ErrorKind::kAccessDenied, Code::kPermissionDenied, false, "AccessDenied"},
      {ErrorKind::kBadCredentials, Code::kUnauthenticated, false, "BadCredentials"},
      {ErrorKind::kUnreachable, Code::kUnavailable, true, "Unreachable"},
      {ErrorKind::kTimeout, Code::kDeadlineExceeded, true, "Timeout"},
      {ErrorKind::kServer, Code::kUnavailable, true, "ServerError"},
      {ErrorKind::kInvalid, Code::kInvalidArgument, false, "Invalid"},
  };
  for (const auto& c : cases) {
    const Status s = Failure(c.kind, "why");
    EXPECT_EQ(s.code(), c.code) << c.reason;
    EXPECT_EQ(s.retryable(), c.retryable) << c.reason;
    EXPECT_EQ(s.reason(), c.reason);
    EXPECT_EQ(s.message(), "why");
  }
}

TEST(S3Errors, ServerTextIsKeptToOneShortLine) {
  const std::string html = "<html>\n" + std::string(5000, 'x') + "</html>";
  const Status e = s3wire::ClassifyHttpError(
      kTarget, 502, "<Error><Code>Bad</Code><Message>" + html + "</Message></Error>");
  EXPECT_LT(e.message().size(), 500u);
  EXPECT_EQ(e.message().find('\n'), std::string::npos);
}

TEST(S3Retry, OnlyTransientRepliesAreRetried) {
  for (long status : {500L, 502L, 503L, 504L, 429L})
    EXPECT_TRUE(s3wire::IsRetryableHttp(status, ""));
  EXPECT_TRUE(s3wire::IsRetryableHttp(400, "RequestTimeout"));
  EXPECT_TRUE(s3wire::IsRetryableHttp(503, "SlowDown"));
  for (long status : {400L, 401L, 403L, 404L, 409L, 416L}) {
    EXPECT_FALSE(s3wire::IsRetryableHttp(status, "")) << status;
  }
  EXPECT_FALSE(s3wire::IsRetryableHttp(403, "AccessDenied"));
}

TEST(S3Multipart, PartSizeStaysWithinTenThousandParts) {
  constexpr int64_t kMiB = 1 << 20;
  EXPECT_EQ(s3wire::ChoosePartSize(100 * kMiB, 16 * kMiB), 16 * kMiB);
  EXPECT_EQ(s3wire::ChoosePartSize(10000 * 16 * kMiB, 16 * kMiB), 16 * kMiB);
  const int64_t huge = 10000 * 16 * kMiB + 1;
  const int64_t part = s3wire::ChoosePartSize(huge, 16 * kMiB);
  EXPECT_EQ(part, 17 * kMiB);
  EXPECT_LE((huge + part - 1) / part, s3wire::kMaxParts);
  EXPECT_EQ(s3wire::CompleteMultipartXml({"\"a\""}),
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&quot;a&quot;</ETag>"
            "</Part></CompleteMultipartUpload>");
}

TEST(S3Redact, RemovesEveryOccurrence) {
  EXPECT_EQ(s3wire::Redact("key AKIA1 and secret s3cr3t, again AKIA1", {"AKIA1", "s3cr3t", ""}),
            "key *** and secret ***, again ***");
}

TEST(Progress, Formatting) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(12 << 20), "12.0 MiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 30), "3.00 GiB");
  EXPECT_EQ(FormatDuration(0.4), "0s");
  EXPECT_EQ(FormatDuration(42), "42s");
  EXPECT_EQ(FormatDuration(187), "3m07s");
  EXPECT_EQ(FormatDuration(7500), "2h05m");
  EXPECT_EQ(ProgressLine("put k", 10 << 20, 40 << 20, 2.5),
            "put k  10.0 MiB / 40.0 MiB  25%  4.00 MiB/s  ETA 8s");
  EXPECT_EQ(ProgressLine("put k", 0, 100, 0), "put k  0 B / 100 B  0%");
}

TEST(Progress, MeterStaysQuietForQuickTransfersAndRedrawsOtherwise) {
  std::ostringstream quick;
  ProgressMeter q(quick, "put", 1h);
  q.Update(5, 10);
  q.Update(10, 10);
  q.Finish();
  EXPECT_EQ(quick.str(), "");

  std::ostringstream slow;
  ProgressMeter s(slow, "put", 0ms, 0ms);
  s.Update(5, 10);
  s.Update(10, 10);
  s.Finish();
  EXPECT_THAT(slow.str(), HasSubstr("\rput  5 B / 10 B  50%"));
  EXPECT_THAT(slow.str(), HasSubstr("\rput  10 B / 10 B  100%"));
  EXPECT_EQ(slow.str().back(), '\n');
}

}  // namespace
}  // namespace starforge::objstore
