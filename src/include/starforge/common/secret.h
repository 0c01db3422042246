// A value that must never be printed: logs, errors, API responses and dumps show "***".
#pragma once

#include <ostream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace starforge {

class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string value) : value_(std::move(value)) {}

  // The only way to the plain value: grep for Reveal() to audit every use.
  const std::string& Reveal() const { return value_; }
  bool empty() const { return value_.empty(); }

  static constexpr const char* kMask = "***";

 private:
  std::string value_;
};

inline std::ostream& operator<<(std::ostream& os, const Secret&) {
  return os << Secret::kMask;
}
// Serialises as "***" (or "" when unset), so dumping a config cannot leak it.
inline void to_json(nlohmann::json& j, const Secret& s) {
  j = s.empty() ? "" : Secret::kMask;
}

}  // namespace starforge

template <>
struct fmt::formatter<starforge::Secret> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const starforge::Secret&, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(starforge::Secret::kMask, ctx);
  }
};
