// Kubernetes resource quantities ("500m", "32", "256Gi", "1e3"), as the API server accepts them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace starforge {

class Quantity {
 public:
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

 private:
  Quantity(std::string text, int64_t milli) : text_(std::move(text)), milli_(milli) {}
  std::string text_;
  int64_t milli_ = 0;
};

}  // namespace starforge
