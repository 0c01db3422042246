// The `forge` binary under test (STARFORGE_FORGE_BIN), run as a user runs it.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/shell.h"

namespace starforge::support {

// The binary: STARFORGE_FORGE_BIN, or $STARFORGE_TEST_FORGE_BIN (e.g. a build with extra
// commands).
inline std::string ForgeBin() {
  const char* override_bin = std::getenv("STARFORGE_TEST_FORGE_BIN");
  return override_bin ? override_bin : STARFORGE_FORGE_BIN;
}

// `forge ARGS` through the shell with only PATH=/usr/bin:/bin and `env` ("K=V …") in its
// environment, in `cwd` (this process's when empty), `input` on its standard input. ARGS and
// `env` reach the shell verbatim: quote what needs it.
inline Captured RunForge(const std::string& args, const std::string& env = "",
                         const std::filesystem::path& cwd = {}, const std::string& input = "") {
  return Capture("env -i PATH=/usr/bin:/bin " + env + " " + Quote(ForgeBin()) + " " + args, cwd,
                 input);
}

}  // namespace starforge::support
