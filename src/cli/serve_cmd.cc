#include "command.h"

namespace starforge::cli {

void RegisterServeCommands(Registry& /*registry*/) {}

}  // namespace starforge::cli
