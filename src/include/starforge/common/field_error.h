// A problem found in user input, located by a field path such as `pools[1].gpusPerMachine`.
#pragma once

#include <string>
#include <vector>

namespace starforge {

struct FieldError {
  std::string path;     // field path; empty when the error concerns the whole document
  std::string message;  // what is wrong and, where possible, how to fix it

  // "path: message", or just "message" when path is empty.
  std::string ToString() const;
  friend bool operator==(const FieldError&, const FieldError&) = default;
};

using FieldErrors = std::vector<FieldError>;

// One error per line, in order.
std::string JoinErrors(const FieldErrors& errors);

}  // namespace starforge
