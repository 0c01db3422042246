#include "starforge/fleet/fleet.h"

namespace starforge::fleet {

Status RetryableUnlessEmpty(const char* reason, std::string error) {
  return error.empty() ? Status::Ok() : Status::Retryable(reason, std::move(error));
}

}  // namespace starforge::fleet
