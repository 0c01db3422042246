// Classification of canned API server responses into typed errors, and the retry rules.
#include "starforge/kube/errors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "starforge/kube/resource.h"
#include "starforge/kube/watch_decoder.h"

namespace starforge::kube {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

std::string StatusBody(int code, const std::string& reason, const std::string& message,
                       nlohmann::json details = nullptr) {
  nlohmann::json s = {
      {"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", nlohmann::json::object()},
      {"status", "Failure"}, {"message", message}, {"reason", reason},
      {"code", code}};
  if (!details.is_null()) s["details"] = details;
  return s.dump();
}

struct Canned {
  int code;
  std::string reason;
  Reason expected;
};

TEST(ErrorsTest, EveryStatusReasonIsTyped) {
  const Canned cases[] = {
      {400, "BadRequest", Reason::kBadRequest},
      {401, "Unauthorized", Reason::kUnauthorized},
      {403, "Forbidden", Reason::kForbidden},
      {404, "NotFound", Reason::kNotFound},
      {405, "MethodNotAllowed", Reason::kMethodNotAllowed},
      {406, "NotAcceptable", Reason::kNotAcceptable},
      {409, "AlreadyExists", Reason::kAlreadyExists},
      {409, "Conflict", Reason::kConflict},
      {410, "Expired", Reason::kExpired},
      {410, "Gone", Reason::kExpired},
      {413, "RequestEntityTooLarge", Reason::kRequestEntityTooLarge},
      {415, "UnsupportedMediaType", Reason::kUnsupportedMediaType},
      {422, "Invalid", Reason::kInvalid},
      {429, "TooManyRequests", Reason::kTooManyRequests},
      {500, "InternalError", Reason::kInternalError},
      {500, "ServerTimeout", Reason::kServerTimeout},
      {503, "ServiceUnavailable", Reason::kServiceUnavailable},
      {504, "Timeout", Reason::kTimeout},
      {418, "SomethingNew", Reason::kUnknown},
  };
  for (const auto& c : cases) {
    ApiError e = ErrorFromResponse(c.code, StatusBody(c.code, c.reason, "msg " + c.reason), "");
    EXPECT_EQ(e.reason(), c.expected) << c.reason;
    EXPECT_EQ(e.code(), c.code) << c.reason;
    EXPECT_EQ(e.message(), "msg " + c.reason);
    EXPECT_EQ(e.status_reason(), c.reason);
  }
}

TEST(ErrorsTest, NotFoundCarriesTheServerMessageAndContext) {
  ApiError e =
      ErrorFromResponse(404,
                        StatusBody(404, "NotFound", "rayjobs.ray.io \"x\" not found",
                                   {{"name", "x"}, {"group", "ray.io"}, {"kind", "rayjobs"}}),
                        "", "GET /apis/ray.io/v1/namespaces/ns/rayjobs/x");
  EXPECT_TRUE(IsNotFound(e));
  EXPECT_EQ(e.details()["name"], "x");
  EXPECT_STREQ(e.what(),
               "GET /apis/ray.io/v1/namespaces/ns/rayjobs/x: NotFound (404): rayjobs.ray.io \"x\" "
               "not found");
}

TEST(ErrorsTest, InvalidCarriesCauses) {
  ApiError e = ErrorFromResponse(
      422,
      StatusBody(422, "Invalid", "RayJob.ray.io \"Bad\" is invalid: metadata.name: Invalid value",
                 {{"name", "Bad"},
                  {"group", "ray.io"},
                  {"kind", "RayJob"},
                  {"causes",
                   {{{"reason", "FieldValueInvalid"},
                     {"message", "Invalid value: \"Bad\": a lowercase RFC 1123 subdomain"},
                     {"field", "metadata.name"}},
                    {{"reason", "FieldValueRequired"},
                     {"message", "Required value"},
                     {"field", "spec.entrypoint"}}}}}),
      "");
  EXPECT_EQ(e.reason(), Reason::kInvalid);
  ASSERT_EQ(e.causes().size(), 2u);
  EXPECT_EQ(e.causes()[0], (StatusCause{"FieldValueInvalid",
                                        "Invalid value: \"Bad\": a lowercase RFC 1123 subdomain",
                                        "metadata.name"}));
  EXPECT_EQ(e.causes()[1].field, "spec.entrypoint");
}

TEST(ErrorsTest, PlainTextTooManyRequestsWithRetryAfter) {
  // What API priority and fairness really sends: not a Status.
  ApiError e = ErrorFromResponse(429, "Too many requests, please try again later.\n", "1");
  EXPECT_EQ(e.reason(), Reason::kTooManyRequests);
  EXPECT_EQ(e.code(), 429);
  EXPECT_EQ(e.message(), "Too many requests, please try again later.");
  ASSERT_TRUE(e.retry_after().has_value());
  EXPECT_EQ(*e.retry_after(), seconds(1));
}

TEST(ErrorsTest, RetryAfterFromDetailsAndHeader) {
  std::string body = StatusBody(500, "ServerTimeout", "try again", {{"retryAfterSeconds", 3}});
  EXPECT_EQ(ErrorFromResponse(500, body, "").retry_after(), seconds(3));
  EXPECT_EQ(ErrorFromResponse(500, body, "7").retry_after(), seconds(7));  // header wins
  // An HTTP-date Retry-After is not understood: treated as absent.
  EXPECT_FALSE(ErrorFromResponse(503, "", "Wed, 21 Oct 2015 07:28:00 GMT").retry_after());
}

TEST(ErrorsTest, NonStatusBodiesFallBackToTheHttpCode) {
  ApiError empty = ErrorFromResponse(503, "", "");
  EXPECT_EQ(empty.reason(), Reason::kServiceUnavailable);
  EXPECT_EQ(empty.message(), "the server is currently unable to handle the request");
  ApiError html = ErrorFromResponse(502, "<html><body>Bad Gateway</body></html>", "");
  EXPECT_EQ(html.reason(), Reason::kUnknown);
  EXPECT_EQ(html.code(), 502);
  EXPECT_THAT(html.message(), HasSubstr("Bad Gateway"));
  ApiError other_json = ErrorFromResponse(404, R"({"error":"nope"})", "");
  EXPECT_EQ(other_json.reason(), Reason::kNotFound);
  ApiError huge = ErrorFromResponse(500, std::string(10000, 'x'), "");
  EXPECT_LT(huge.message().size(), 600u);
}

TEST(ErrorsTest, StatusWithoutReasonUsesCode) {
  ApiError e = ErrorFromResponse(409, R"({"kind":"Status","status":"Failure","code":409})", "");
  EXPECT_EQ(e.reason(), Reason::kConflict);
  EXPECT_EQ(e.message(), "the server reported a conflict");
}

TEST(ErrorsTest, WatchErrorEventStatus) {
  nlohmann::json status = {{"kind", "Status"},    {"apiVersion", "v1"},
                           {"status", "Failure"}, {"code", 410},
                           {"reason", "Expired"}, {"message", "too old resource version: 5 (90)"}};
  ApiError e = ErrorFromStatus(status);
  EXPECT_TRUE(IsExpired(e));
  EXPECT_EQ(e.code(), 410);
}

TEST(ErrorsTest, ScrubRemovesEveryOccurrence) {
  EXPECT_EQ(Scrub("Bearer abc and abc", "abc"), "Bearer *** and ***");
  EXPECT_EQ(Scrub("nothing", ""), "nothing");
}

TEST(ErrorsTest, RetryRulesFollowClientGo) {
  auto err = [](int code, const std::string& reason, std::optional<int> ra = std::nullopt) {
    ApiError e =
        ErrorFromResponse(code, StatusBody(code, reason, "m"), ra ? std::to_string(*ra) : "");
    return e;
  };
  // 429: always, honouring Retry-After (default 1 s).
  EXPECT_TRUE(ShouldRetry(err(429, "TooManyRequests", 2), false).retry);
  EXPECT_EQ(ShouldRetry(err(429, "TooManyRequests", 2), false).server_delay,
            std::chrono::milliseconds(2000));
  EXPECT_EQ(ShouldRetry(err(429, "TooManyRequests"), false).server_delay,
            std::chrono::milliseconds(1000));
  // 5xx with Retry-After: always.
  EXPECT_TRUE(ShouldRetry(err(503, "ServiceUnavailable", 1), false).retry);
  EXPECT_TRUE(ShouldRetry(err(500, "ServerTimeout"), false).retry);
  // 5xx without Retry-After: reads only; a create/patch is never blindly resent.
  EXPECT_TRUE(ShouldRetry(err(500, "InternalError"), true).retry);
  EXPECT_FALSE(ShouldRetry(err(500, "InternalError"), false).retry);
  EXPECT_TRUE(ShouldRetry(err(504, "Timeout"), true).retry);
  EXPECT_FALSE(ShouldRetry(err(503, "ServiceUnavailable"), false).retry);
  // Never.
  for (auto [code, reason] : std::vector<std::pair<int, std::string>>{{400, "BadRequest"},
                                                                      {401, "Unauthorized"},
                                                                      {403, "Forbidden"},
                                                                      {404, "NotFound"},
                                                                      {405, "MethodNotAllowed"},
                                                                      {409, "AlreadyExists"},
                                                                      {409, "Conflict"},
                                                                      {410, "Expired"},
                                                                      {422, "Invalid"}}) {
    EXPECT_FALSE(ShouldRetry(err(code, reason), true).retry) << reason;
  }
  // Transport: before any byte was sent, any method; otherwise reads only.
  ApiError refused(Reason::kTransport, 0, "connection refused");
  refused.set_nothing_sent(true);
  EXPECT_TRUE(ShouldRetry(refused, false).retry);
  ApiError reset(Reason::kTransport, 0, "connection reset");
  EXPECT_FALSE(ShouldRetry(reset, false).retry);
  EXPECT_TRUE(ShouldRetry(reset, true).retry);
}

// What code outside kube/ sees of a failure: the kind as a Code, the reason read back, the
// message without the request line, and whether a later attempt may pass.
TEST(ErrorsTest, ToStatusKeepsTheDistinctionsCallersMake) {
  struct Case {
    int code;
    std::string reason;
    Code expected;
    bool retryable;
  };
  const Case cases[] = {
      {400, "BadRequest", Code::kInvalidArgument, false},
      {401, "Unauthorized", Code::kUnauthenticated, false},
      {403, "Forbidden", Code::kPermissionDenied, false},
      {404, "NotFound", Code::kNotFound, false},
      {409, "AlreadyExists", Code::kAlreadyExists, false},
      {409, "Conflict", Code::kAborted, true},
      {410, "Expired", Code::kFailedPrecondition, false},
      {422, "Invalid", Code::kInvalidArgument, false},
      {429, "TooManyRequests", Code::kResourceExhausted, true},
      {500, "InternalError", Code::kInternal, true},
      {500, "ServerTimeout", Code::kUnavailable, true},
      {503, "ServiceUnavailable", Code::kUnavailable, true},
      {504, "Timeout", Code::kDeadlineExceeded, true},
      {502, "", Code::kUnknown, true},
  };
  for (const Case& c : cases) {
    const Status s =
        ToStatus(ErrorFromResponse(c.code, StatusBody(c.code, c.reason, "msg"), "", "GET /x"));
    EXPECT_EQ(s.code(), c.expected) << c.reason;
    EXPECT_EQ(s.retryable(), c.retryable) << c.reason;
    EXPECT_EQ(ReasonOf(s),
              ErrorFromResponse(c.code, StatusBody(c.code, c.reason, "m"), "").reason())
        << c.reason;
  }
  const Status nf =
      ToStatus(ErrorFromResponse(404, StatusBody(404, "NotFound", "gone"), "", "GET /x"));
  EXPECT_EQ(nf.message(), "NotFound (404): gone");
  EXPECT_EQ(nf.reason(), "NotFound");
  const Status refused = ToStatus(ApiError(Reason::kTransport, 0, "connection refused", "GET /x"));
  EXPECT_EQ(refused.message(), "Transport: connection refused");
  EXPECT_EQ(refused.code(), Code::kUnavailable);
  EXPECT_TRUE(refused.retryable());
  EXPECT_EQ(ReasonOf(refused), Reason::kTransport);
  EXPECT_EQ(ReasonOf(Status::Internal("not from kube")), Reason::kUnknown);
}

TEST(ErrorsTest, TryGivesTheValueOrTheStatus) {
  const StatusOr<int> value = Try([] { return 7; });
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 7);
  const StatusOr<int> failed =
      Try([]() -> int { throw ApiError(Reason::kNotFound, 404, "no such thing"); });
  EXPECT_EQ(failed.status().code(), Code::kNotFound);
  EXPECT_TRUE(Try([] {}).ok());
  EXPECT_EQ(Try([] { throw ApiError(Reason::kConflict, 409, "stale"); }).code(), Code::kAborted);
  EXPECT_THROW(Try([] { throw std::logic_error("not a kube failure"); }), std::logic_error);
}

TEST(ResourceTest, Paths) {
  using namespace resources;
  // A custom resource: a group of its own under /apis.
  const ResourceRef kRayJobs{"ray.io", "v1", "rayjobs", true, "RayJob"};
  EXPECT_EQ(kPods.CollectionPath("ns"), "/api/v1/namespaces/ns/pods");
  EXPECT_EQ(kPods.CollectionPath(""), "/api/v1/pods");
  EXPECT_EQ(kPods.ObjectPath("ns", "p", "log"), "/api/v1/namespaces/ns/pods/p/log");
  EXPECT_EQ(kNodes.ObjectPath("ignored", "n1"), "/api/v1/nodes/n1");
  EXPECT_EQ(kRayJobs.ObjectPath("ns", "rj", "status"),
            "/apis/ray.io/v1/namespaces/ns/rayjobs/rj/status");
  EXPECT_EQ(kEventsV1.CollectionPath(""), "/apis/events.k8s.io/v1/events");
  EXPECT_EQ(kJobs.Qualified(), "jobs.batch");
  EXPECT_EQ(kRayJobs.ApiVersion(), "ray.io/v1");
  EXPECT_EQ(kRayJobs.Qualified(), "rayjobs.ray.io");
  EXPECT_EQ(kPods.ObjectPath("ns", "a/b"), "/api/v1/namespaces/ns/pods/a%2Fb");
  EXPECT_EQ(EncodeQuery({{"fieldSelector", "involvedObject.name=x,type!=Normal"}, {"limit", "5"}}),
            "fieldSelector=involvedObject.name%3Dx%2Ctype%21%3DNormal&limit=5");
  EXPECT_EQ(ObjectKey("ns", "n"), "ns/n");
  EXPECT_EQ(ObjectKey("", "n"), "n");
}

TEST(WatchDecoderTest, SplitsObjectsAcrossArbitraryChunks) {
  std::string stream = R"({"type":"ADDED","object":{"metadata":{"name":"a {b} \"c\" \\"}}})"
                       "\n"
                       R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}})"
                       "\n  \n"
                       R"({"type":"DELETED","object":{"items":[{"x":"]"}]}})";
  for (size_t chunk : {size_t{1}, size_t{2}, size_t{7}, size_t{64}, stream.size()}) {
    WatchDecoder d;
    std::vector<nlohmann::json> got;
    for (size_t i = 0; i < stream.size(); i += chunk) {
      d.Feed(std::string_view(stream).substr(i, chunk), [&](nlohmann::json j) {
        got.push_back(std::move(j));
        return true;
      });
    }
    ASSERT_EQ(got.size(), 3u) << "chunk " << chunk;
    EXPECT_EQ(got[0]["object"]["metadata"]["name"], "a {b} \"c\" \\");
    EXPECT_EQ(got[1]["type"], "BOOKMARK");
    EXPECT_EQ(got[2]["object"]["items"][0]["x"], "]");
    EXPECT_EQ(d.pending(), 0u);
  }
}

TEST(WatchDecoderTest, StopsEarlyAndRejectsGarbage) {
  WatchDecoder d;
  int seen = 0;
  EXPECT_FALSE(d.Feed("{\"a\":1}{\"b\":2}", [&](nlohmann::json) { return ++seen < 1; }));
  EXPECT_EQ(seen, 1);
  WatchDecoder bad;
  EXPECT_THROW(bad.Feed("Too many requests", [](nlohmann::json) { return true; }),
               std::runtime_error);
  WatchDecoder partial;
  partial.Feed("{\"type\":\"ADD", [](nlohmann::json) { return true; });
  EXPECT_GT(partial.pending(), 0u);
}

}  // namespace
}  // namespace starforge::kube
