#include <gtest/gtest.h>

#include "starforge/api/handler.h"
#include "starforge/common/status.h"

namespace starforge::api {
namespace {

TEST(ErrorForTest, EachCodeHasOneHttpStatus) {
  const struct {
    Code code;
    int status;
    const char* kind;
  } cases[] = {
      {Code::kInvalidArgument, 422, "Invalid"},
      {Code::kNotFound, 404, "NotFound"},
      {Code::kAlreadyExists, 409, "Conflict"},
      {Code::kFailedPrecondition, 409, "Conflict"},
      {Code::kAborted, 409, "Conflict"},
      {Code::kUnauthenticated, 401, "Unauthorized"},
      {Code::kPermissionDenied, 403, "Forbidden"},
      {Code::kResourceExhausted, 429, "TooManyRequests"},
      {Code::kUnavailable, 503, "Unavailable"},
      {Code::kDeadlineExceeded, 503, "Unavailable"},
      {Code::kInternal, 500, "Internal"},
      {Code::kUnknown, 500, "Internal"},
  };
  for (const auto& c : cases) {
    const ApiError e = ErrorFor(Status(c.code, "why"));
    EXPECT_EQ(e.status, c.status) << ToString(c.code);
    EXPECT_EQ(e.kind, c.kind) << ToString(c.code);
    EXPECT_EQ(e.message, "why");
    EXPECT_EQ(e.field, "");
    EXPECT_TRUE(e.errors.empty());
  }
}

TEST(ErrorForTest, TheReasonNamesTheErrorAndTheFieldsGoAlong) {
  const ApiError e = ErrorFor(
      Status::Invalid("gpus: 16 > 8", "gpus", {{"gpus", "16 > 8"}}).WithReason("Rejected"));
  EXPECT_EQ(e.status, 422);
  EXPECT_EQ(e.kind, "Rejected");
  EXPECT_EQ(e.field, "gpus");
  ASSERT_EQ(e.errors.size(), 1u);
  EXPECT_EQ(e.errors[0].message, "16 > 8");
}

TEST(ErrorForTest, ValueOrThrow) {
  EXPECT_EQ(ValueOrThrow(StatusOr<int>(3)), 3);
  try {
    ValueOrThrow(StatusOr<int>(Status::NotFound("playground p-1 not found")));
    FAIL() << "no throw";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 404);
    EXPECT_EQ(e.message, "playground p-1 not found");
  }
}

}  // namespace
}  // namespace starforge::api
