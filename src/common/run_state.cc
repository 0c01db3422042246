#include "starforge/common/run_state.h"

#include <array>

namespace starforge {

std::string_view ToString(RunState state) {
  // In the order of the enum.
  static constexpr std::array<std::string_view, 6> kNames = {"Pending", "Running",   "Succeeded",
                                                             "Failed",  "Cancelled", "Unknown"};
  const auto i = static_cast<size_t>(state);
  return i < kNames.size() ? kNames[i] : "Unknown";
}

}  // namespace starforge
