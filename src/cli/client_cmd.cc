#include "command.h"

namespace starforge::cli {

void RegisterClientCommands(Registry& /*registry*/) {}

}  // namespace starforge::cli
