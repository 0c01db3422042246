#include "starforge/common/field_error.h"

namespace starforge {

std::string FieldError::ToString() const {
  return path.empty() ? message : path + ": " + message;
}

std::string JoinErrors(const FieldErrors& errors) {
  std::string out;
  for (const auto& e : errors) {
    if (!out.empty()) out += '\n';
    out += e.ToString();
  }
  return out;
}

}  // namespace starforge
