#include "starforge/common/quantity.h"

#include <gtest/gtest.h>

#include <limits>

namespace starforge {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

struct ValidCase {
  const char* text;
  int64_t milli;
  int64_t value;
};

class ValidQuantityTest : public testing::TestWithParam<ValidCase> {};

TEST_P(ValidQuantityTest, ParsesToExactMilliValueAndValue) {
  const ValidCase& c = GetParam();
  const auto q = Quantity::Parse(c.text);
  ASSERT_TRUE(q.has_value()) << c.text;
  EXPECT_EQ(q->MilliValue(), c.milli) << c.text;
  EXPECT_EQ(q->Value(), c.value) << c.text;
  EXPECT_EQ(q->Text(), c.text);
}

INSTANTIATE_TEST_SUITE_P(
    Grammar, ValidQuantityTest,
    testing::Values(ValidCase{"0", 0, 0}, ValidCase{"32", 32000, 32}, ValidCase{"500m", 500, 1},
                    ValidCase{"1500m", 1500, 2}, ValidCase{"1.5", 1500, 2}, ValidCase{".5", 500, 1},
                    ValidCase{"5.", 5000, 5}, ValidCase{"+1", 1000, 1}, ValidCase{"-1", -1000, -1},
                    ValidCase{"-500m", -500, -1}, ValidCase{"007", 7000, 7},
                    ValidCase{"1k", 1'000'000, 1000}, ValidCase{"2Ki", 2'048'000, 2048},
                    ValidCase{"2Gi", 2'147'483'648'000, 2'147'483'648},
                    ValidCase{"1.5Gi", 1'610'612'736'000, 1'610'612'736},
                    ValidCase{"256Gi", 274'877'906'944'000, 274'877'906'944},
                    ValidCase{"1e3", 1'000'000, 1000}, ValidCase{"1E3", 1'000'000, 1000},
                    ValidCase{"1e+3", 1'000'000, 1000}, ValidCase{"1e-3", 1, 1},
                    ValidCase{"1E-2", 10, 1}, ValidCase{"1M", 1'000'000'000, 1'000'000},
                    ValidCase{"1G", 1'000'000'000'000, 1'000'000'000},
                    ValidCase{"1T", 1'000'000'000'000'000, 1'000'000'000'000},
                    ValidCase{"1P", 1'000'000'000'000'000'000, 1'000'000'000'000'000},
                    // "E" alone is exa (10^18): a valid suffix, not an exponent.
                    ValidCase{"1E", kMax, 1'000'000'000'000'000'000},
                    ValidCase{"1Ei", kMax, 1'152'921'504'606'846'976}, ValidCase{"100n", 1, 1},
                    ValidCase{"1u", 1, 1}, ValidCase{"0.1m", 1, 1},
                    ValidCase{"1.G", 1'000'000'000'000, 1'000'000'000}, ValidCase{"0.0001", 1, 1},
                    ValidCase{"-0.0001", -1, -1}, ValidCase{"0.000m", 0, 0},
                    ValidCase{"10P", kMax, 10'000'000'000'000'000}, ValidCase{"1e100", kMax, kMax},
                    ValidCase{"-1e100", kMin, kMin}, ValidCase{"1e-100", 1, 1},
                    ValidCase{"123456789012345678901234567890", kMax, kMax}));

class InvalidQuantityTest : public testing::TestWithParam<const char*> {};

TEST_P(InvalidQuantityTest, IsRejected) {
  EXPECT_FALSE(Quantity::Parse(GetParam()).has_value()) << '"' << GetParam() << '"';
}

INSTANTIATE_TEST_SUITE_P(Grammar, InvalidQuantityTest,
                         testing::Values("", " 1", "1 ", "1GiB", "1K", "1ki", "1gi", "Gi", "-", "+",
                                         ".", "1e", "1e+", "1ee3", "1e3e3", "1Gi3", "1.5.5", "--1",
                                         "1,5", "0x10", "1m3", "1 Gi", "abc", "1e1.5",
                                         "1e99999999999999999999"));

TEST(QuantityTest, IsPositive) {
  EXPECT_TRUE(Quantity::Parse("1m")->IsPositive());
  EXPECT_TRUE(Quantity::Parse("0.0000001")->IsPositive());  // rounds up to 1m
  EXPECT_FALSE(Quantity::Parse("0")->IsPositive());
  EXPECT_FALSE(Quantity::Parse("0Gi")->IsPositive());
  EXPECT_FALSE(Quantity::Parse("-1")->IsPositive());
}

TEST(QuantityTest, StringIsCanonical) {
  EXPECT_EQ(Quantity::Parse("2")->String(), "2");
  EXPECT_EQ(Quantity::Parse("1.5")->String(), "1500m");
  EXPECT_EQ(Quantity::Parse("4096Mi")->String(), "4Gi");
  EXPECT_EQ(Quantity::Parse("1.2Gi")->String(), "1288490188800m");  // not whole: milli-units
  EXPECT_EQ(Quantity::Parse("1224Mi")->String(), "1224Mi");
  EXPECT_EQ(Quantity::Parse("200000k")->String(), "200M");
  EXPECT_EQ(Quantity::Parse("1000Ki")->String(), "1000Ki");
  EXPECT_EQ(Quantity::Parse("1e3")->String(), "1k");
  EXPECT_EQ(Quantity::Parse("0Gi")->String(), "0");
  EXPECT_EQ(Quantity().String(), "0");
}

TEST(QuantityTest, SumsKeepTheFirstFormat) {
  Quantity total;  // a resource total: zero, no format until the first addend
  total.Add(*Quantity::Parse("1Gi"));
  total.Add(*Quantity::Parse("512Mi"));
  EXPECT_EQ(total.String(), "1536Mi");
  EXPECT_EQ(total.Text(), "1536Mi");
  EXPECT_EQ(total.Value(), int64_t{1536} << 20);
  total.Mul(2);
  EXPECT_EQ(total.String(), "3Gi");
  Quantity cpus;
  cpus.Add(*Quantity::Parse("500m"));
  cpus.Add(*Quantity::Parse("1"));
  EXPECT_EQ(cpus.String(), "1500m");
  EXPECT_EQ(cpus.Value(), 2);
  // Binary units that do not divide into Ki fall back to decimal SI, as apimachinery does.
  Quantity odd;
  odd.Add(*Quantity::Parse("1Ki"));
  odd.Add(*Quantity::Parse("1000"));
  EXPECT_EQ(odd.String(), "2024");
}

}  // namespace
}  // namespace starforge
