#include "starforge/common/quantity.h"

#include <algorithm>
#include <charconv>
#include <limits>

namespace starforge {

namespace {

// A parsed quantity as exact decimal arithmetic needs it: value = digits * 10^exp10 * 2^exp2.
struct Parts {
  bool negative = false;
  bool binary = false;  // a Ki..Ei suffix
  std::string digits;   // integer and fraction digits, leading zeros stripped
  int64_t exp10 = 0;
  int exp2 = 0;
};

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

size_t SkipDigits(std::string_view s, size_t pos) {
  while (pos < s.size() && IsDigit(s[pos]))
    ++pos;
  return pos;
}

// Suffixes as k8s.io/apimachinery/pkg/api/resource/suffix.go defines them.
bool ApplySuffix(std::string_view suffix, Parts& p) {
  static constexpr std::pair<std::string_view, int> kDecimal[] = {
      {"n", -9}, {"u", -6}, {"m", -3}, {"", 0},   {"k", 3},
      {"M", 6},  {"G", 9},  {"T", 12}, {"P", 15}, {"E", 18}};
  static constexpr std::pair<std::string_view, int> kBinary[] = {
      {"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}, {"Pi", 50}, {"Ei", 60}};
  for (const auto& [s, e] : kDecimal) {
    if (suffix == s) return p.exp10 += e, true;
  }
  for (const auto& [s, e] : kBinary) {
    if (suffix == s) return p.exp2 = e, p.binary = true, true;
  }
  // Only an exponent remains possible: 'e' or 'E' and a signed integer ("1E3" is 1000, "1E" exa).
  if (suffix.size() < 2 || (suffix[0] != 'e' && suffix[0] != 'E')) return false;
  std::string_view exp = suffix.substr(1);
  bool negative = false;
  if (exp[0] == '+' || exp[0] == '-') {
    negative = exp[0] == '-';
    exp.remove_prefix(1);
  }
  if (exp.empty() || SkipDigits(exp, 0) != exp.size()) return false;
  int64_t value = 0;
  if (std::from_chars(exp.data(), exp.data() + exp.size(), value).ec != std::errc{}) return false;
  // Beyond ±10^6 the result saturates or rounds to one unit anyway; clamping avoids overflow.
  value = std::min<int64_t>(value, 1'000'000);
  p.exp10 += negative ? -value : value;
  return true;
}

std::optional<Parts> ParseParts(std::string_view text) {
  Parts p;
  size_t pos = 0;
  if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    p.negative = text[pos] == '-';
    ++pos;
  }
  const size_t int_end = SkipDigits(text, pos);
  std::string_view int_part = text.substr(pos, int_end - pos), frac_part;
  pos = int_end;
  if (pos < text.size() && text[pos] == '.') {
    const size_t frac_end = SkipDigits(text, pos + 1);
    frac_part = text.substr(pos + 1, frac_end - pos - 1);
    pos = frac_end;
  }
  // apimachinery accepts "", "-" and "." as zero; a quantity without a digit is a typo here.
  if (int_part.empty() && frac_part.empty()) return std::nullopt;
  p.digits = std::string(int_part) + std::string(frac_part);
  p.digits.erase(0, std::min(p.digits.find_first_not_of('0'), p.digits.size()));
  p.exp10 = -static_cast<int64_t>(frac_part.size());
  if (!ApplySuffix(text.substr(pos), p)) return std::nullopt;
  return p;
}

// digits *= 2, on a decimal digit string.
void Double(std::string& digits) {
  int carry = 0;
  for (size_t i = digits.size(); i-- > 0;) {  // from the last digit
    const int d = (digits[i] - '0') * 2 + carry;
    digits[i] = static_cast<char>('0' + d % 10);
    carry = d / 10;
  }
  if (carry) digits.insert(digits.begin(), '1');
}

// ceil(|value| * 10^scale), away from zero for negative values, saturating at the int64 range.
int64_t ScaledCeil(const Parts& parts, int scale) {
  if (parts.digits.empty()) return 0;
  std::string digits = parts.digits;
  for (int i = 0; i < parts.exp2; ++i)
    Double(digits);
  const int64_t exp10 = parts.exp10 + scale;
  const int64_t len = static_cast<int64_t>(digits.size());
  const int64_t int_len = len + exp10;  // digits before the decimal point
  constexpr int64_t kMaxDigits = std::numeric_limits<int64_t>::digits10 + 1;  // 19
  uint64_t magnitude = 0;
  bool saturated = int_len > kMaxDigits;
  if (!saturated && int_len > 0) {
    std::string whole = digits.substr(0, static_cast<size_t>(std::min(int_len, len)));
    whole.append(static_cast<size_t>(std::max<int64_t>(0, exp10)), '0');
    std::from_chars(whole.data(), whole.data() + whole.size(), magnitude);
  }
  const bool has_fraction =
      int_len < len &&
      digits.find_first_not_of('0', static_cast<size_t>(std::max<int64_t>(0, int_len))) !=
          std::string::npos;
  if (has_fraction) ++magnitude;
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (saturated || magnitude > kMax) {
    return parts.negative ? std::numeric_limits<int64_t>::min()
                          : std::numeric_limits<int64_t>::max();
  }
  const auto value = static_cast<int64_t>(magnitude);
  return parts.negative ? -value : value;
}

}  // namespace

std::optional<Quantity> Quantity::Parse(std::string_view text) {
  const std::optional<Parts> parts = ParseParts(text);
  if (!parts) return std::nullopt;
  return Quantity(std::string(text), ScaledCeil(*parts, 3),
                  parts->binary ? Format::kBinarySI : Format::kDecimalSI);
}

int64_t Quantity::Value() const {
  // Recomputed from the text: a value near INT64_MAX units has no representable milli-value.
  const std::optional<Parts> parts = ParseParts(text_);
  return parts ? ScaledCeil(*parts, 0) : 0;
}

void Quantity::Add(const Quantity& other) {
  if (!has_format_) {
    format_ = other.format_;
    has_format_ = other.has_format_;
  }
  milli_ += other.milli_;
  text_ = String();
}

void Quantity::Mul(int64_t n) {
  milli_ *= n;
  text_ = String();
}

std::string Quantity::String() const {
  if (milli_ == 0) return "0";
  const bool negative = milli_ < 0;
  const int64_t magnitude = negative ? -milli_ : milli_;
  const std::string sign = negative ? "-" : "";
  if (magnitude % 1000 != 0) return sign + std::to_string(magnitude) + "m";
  const int64_t units = magnitude / 1000;
  // The largest suffix that leaves a whole number (k8s.io/apimachinery/pkg/api/resource).
  auto largest = [&](int64_t base, const char* const* suffixes) -> std::string {
    int index = -1;
    int64_t m = units;
    while (m % base == 0 && index < 5) {
      m /= base;
      ++index;
    }
    return index < 0 ? std::string() : sign + std::to_string(m) + suffixes[index];
  };
  static const char* const kBinary[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  static const char* const kDecimal[] = {"k", "M", "G", "T", "P", "E"};
  if (format_ == Format::kBinarySI) {
    if (std::string out = largest(1024, kBinary); !out.empty()) return out;
  }
  if (std::string out = largest(1000, kDecimal); !out.empty()) return out;
  return sign + std::to_string(units);
}

}  // namespace starforge
