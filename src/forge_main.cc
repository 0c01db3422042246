#include <iostream>

#include "starforge/cli/forge.h"
#include "starforge/config/config.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return starforge::cli::Run(args, starforge::config::ProcessEnvironment(), std::cin, std::cout,
                             std::cerr);
}
