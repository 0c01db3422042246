// The `forge` command line. Kept as a function of (argv, environment, streams) so tests run it
// in-process as well as through the binary.
#pragma once

#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace starforge::cli {

// Exit codes: 0 success; 1 the input is invalid or the job cannot run (errors printed);
// 2 usage error or invalid FORGE_* configuration.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 1;
inline constexpr int kExitUsage = 2;

// Runs `forge <args…>` (args excludes the program name) with `env` as its FORGE_* environment.
int Run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
        std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace starforge::cli
