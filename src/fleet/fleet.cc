#include "starforge/fleet/fleet.h"

namespace starforge::fleet {

std::string_view ToString(State state) {
  switch (state) {
    case State::kPending:
      return "Pending";
    case State::kRunning:
      return "Running";
    case State::kSucceeded:
      return "Succeeded";
    case State::kFailed:
      return "Failed";
    case State::kCancelled:
      return "Cancelled";
    case State::kUnknown:
      return "Unknown";
  }
  return "Unknown";
}

Status RetryableUnlessEmpty(const char* reason, std::string error) {
  return error.empty() ? Status::Ok() : Status::Retryable(reason, std::move(error));
}

}  // namespace starforge::fleet
