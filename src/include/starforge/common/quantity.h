// Kubernetes resource quantities ("500m", "32", "256Gi", "1e3"), as the API server accepts them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace starforge {

class Quantity {
 public:
  // How String() writes the value: binary SI after a Ki..Ei suffix, decimal SI otherwise (an
  // exponent such as "1e3" is written in decimal SI form, "1k", where apimachinery keeps "1e3").
  enum class Format { kDecimalSI, kBinarySI };

  // Zero, "0", with no format yet: the first quantity added gives it its format (as a resource
  // total starts).
  Quantity() = default;

  // Parses the Kubernetes quantity grammar (k8s.io/apimachinery/pkg/api/resource): an optional
  // sign, a decimal number, and an optional binary (Ki..Ei), decimal (n,u,m,k,M,G,T,P,E) or
  // exponent (e3, E-2) suffix. Returns nullopt for anything else, including surrounding spaces.
  static std::optional<Quantity> Parse(std::string_view text);

  // The value in thousandths of a unit, rounded up (like Quantity.MilliValue()); saturates at
  // INT64_MAX/INT64_MIN.
  int64_t MilliValue() const { return milli_; }
  // The value in whole units, rounded up (like Quantity.Value(): "500m" -> 1).
  int64_t Value() const;
  // The text it was parsed from (canonical enough for manifests: the API server accepts it).
  const std::string& Text() const { return text_; }
  bool IsPositive() const { return milli_ > 0; }
  bool IsZero() const { return milli_ == 0; }
  Format format() const { return format_; }

  // Sums and multiples, exact to the milli-unit (resource totals, like apimachinery's Add on
  // values that fit); the text becomes String().
  void Add(const Quantity& other);
  void Mul(int64_t n);

  // Quantity.String()'s canonical form of the milli-value in format(): "2", "1500m", "4Gi",
  // "1224Mi" (1.2Gi), "200M", "0"; a binary value that is not a multiple of 1Ki in decimal SI.
  std::string String() const;

 private:
  Quantity(std::string text, int64_t milli, Format format)
      : text_(std::move(text)), milli_(milli), format_(format), has_format_(true) {}
  std::string text_ = "0";
  int64_t milli_ = 0;
  Format format_ = Format::kDecimalSI;
  bool has_format_ = false;  // false only for the default zero
};

}  // namespace starforge
