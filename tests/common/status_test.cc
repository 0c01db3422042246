#include "starforge/common/status.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "starforge/common/status_or.h"

namespace starforge {
namespace {

TEST(StatusTest, OkByDefault) {
  const Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_FALSE(s.retryable());
  EXPECT_EQ(s.reason(), "");
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "ok");
  EXPECT_TRUE(Status(Code::kOk, "ignored").ok());
  EXPECT_EQ(Status(Code::kOk, "ignored").message(), "");
}

TEST(StatusTest, RetryableFollowsTheCodeUnlessSaidOtherwise) {
  EXPECT_TRUE(Status(Code::kUnavailable, "x").retryable());
  EXPECT_TRUE(Status(Code::kDeadlineExceeded, "x").retryable());
  EXPECT_TRUE(Status(Code::kAborted, "x").retryable());
  EXPECT_FALSE(Status(Code::kNotFound, "x").retryable());
  EXPECT_FALSE(Status(Code::kInvalidArgument, "x").retryable());
  EXPECT_FALSE(Status::Unavailable("x").WithRetryable(false).retryable());
  EXPECT_TRUE(Status::NotFound("x").WithRetryable(true).retryable());
  EXPECT_FALSE(Status().WithRetryable(true).retryable());  // ok stays ok
}

TEST(StatusTest, TheFleetsShorthands) {
  const Status r = Status::Retryable("SubmissionFailed", "busy");
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.retryable());
  EXPECT_FALSE(r.in_progress());
  EXPECT_EQ(r.code(), Code::kUnavailable);
  EXPECT_EQ(r.reason(), "SubmissionFailed");
  EXPECT_EQ(r.message(), "busy");

  const Status p = Status::Permanent("Rejected", "too big");
  EXPECT_FALSE(p.ok());
  EXPECT_FALSE(p.retryable());
  EXPECT_EQ(p.code(), Code::kUnknown);
  EXPECT_EQ(p.reason(), "Rejected");

  const Status i = Status::InProgress("Releasing", "finalizers");
  EXPECT_TRUE(i.retryable());
  EXPECT_TRUE(i.in_progress());
  EXPECT_EQ(i.reason(), "Releasing");
}

TEST(StatusTest, InvalidCarriesTheFields) {
  const Status s = Status::Invalid("ttl: too long\nmodel: missing", "ttl",
                                   {{"ttl", "too long"}, {"model", "missing"}});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.field(), "ttl");
  ASSERT_EQ(s.errors().size(), 2u);
  EXPECT_EQ(s.errors()[1].path, "model");
  EXPECT_EQ(s.ToString(), "ttl: too long\nmodel: missing");
  EXPECT_EQ(Status::NotFound("x").WithReason("Rejected").WithField("f").reason(), "Rejected");
}

TEST(StatusTest, CodeNames) {
  EXPECT_EQ(ToString(Code::kOk), "Ok");
  EXPECT_EQ(ToString(Code::kInvalidArgument), "InvalidArgument");
  EXPECT_EQ(ToString(Code::kFailedPrecondition), "FailedPrecondition");
  EXPECT_EQ(ToString(Code::kUnknown), "Unknown");
}

TEST(StatusOrTest, ValueOrStatus) {
  StatusOr<int> v = 7;
  ASSERT_TRUE(v);
  EXPECT_TRUE(v.status().ok());
  EXPECT_EQ(*v, 7);
  EXPECT_EQ(v.value(), 7);

  const StatusOr<int> e = Status::NotFound("no such thing");
  EXPECT_FALSE(e);
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Code::kNotFound);
  EXPECT_EQ(e.status().message(), "no such thing");
  EXPECT_THROW((void)e.value(), std::bad_optional_access);
}

TEST(StatusOrTest, AnOkStatusIsNotAValue) {
  const StatusOr<int> e = Status::Ok();
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Code::kInternal);
}

TEST(StatusOrTest, MoveOnlyValues) {
  StatusOr<std::unique_ptr<std::string>> p = std::make_unique<std::string>("x");
  ASSERT_TRUE(p);
  EXPECT_EQ(**p, "x");
  EXPECT_EQ(p->get()->size(), 1u);
  std::unique_ptr<std::string> taken = std::move(p).value();
  EXPECT_EQ(*taken, "x");
}

}  // namespace
}  // namespace starforge
