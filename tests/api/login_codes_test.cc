#include "starforge/api/login_codes.h"

#include <gtest/gtest.h>

namespace starforge::api {
namespace {

TEST(LoginCodes, ACodeGivesItsTokenOnceWithinAMinute) {
  LoginCodes codes;
  const std::string a = codes.Issue("sf_a", 1000);
  const std::string b = codes.Issue("sf_b", 1000);
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
  EXPECT_EQ(codes.Redeem(b, 2000), "sf_b");
  EXPECT_EQ(codes.Redeem(b, 2000), std::nullopt) << "single use";
  EXPECT_EQ(codes.Redeem(a, 1000 + LoginCodes::kLifetimeMs), std::nullopt) << "expired";
  EXPECT_EQ(codes.Redeem("nope", 1000), std::nullopt);
}

TEST(LoginCodes, PendingCodesAreBounded) {
  LoginCodes codes;
  const std::string first = codes.Issue("sf_first", 0);
  std::string last;
  for (size_t i = 0; i < LoginCodes::kMaxPending; ++i)
    last = codes.Issue("sf_x", 1);
  EXPECT_EQ(codes.Redeem(first, 2), std::nullopt) << "the oldest code made room";
  EXPECT_EQ(codes.Redeem(last, 2), "sf_x");
}

}  // namespace
}  // namespace starforge::api
