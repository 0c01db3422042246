// The in-capsule runner (runner/ in the repository), as the bytes of a deterministic Python
// zipapp built at compile time. The capsule builder stores it as .starforge/runner.pyz.
#pragma once

#include <string_view>

namespace starforge::runner {

// The zipapp's bytes; identical for identical runner sources on any machine.
std::string_view Zipapp();

}  // namespace starforge::runner
