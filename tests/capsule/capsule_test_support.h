// Shared helpers for the capsule tests: scratch trees, a JobSpec, subprocesses.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "starforge/jobspec/parse.h"
#include "support/files.h"
#include "support/shell.h"
#include "support/temp_dir.h"

namespace starforge::capsule::testing {

namespace fs = std::filesystem;

inline const std::string kTestData = std::string(STARFORGE_SOURCE_DIR) + "/tests/capsule/testdata";

using support::Quote;
using support::ReadFile;
using support::Shell;
using support::TempDir;

// Writes `content` to `p` (making its parents) with mode `perms`.
inline void Write(const fs::path& p, const std::string& content,
                  fs::perms perms = fs::perms(0644)) {
  support::WriteFile(p, content);
  fs::permissions(p, perms);
}

// One line per element, for failure messages.
inline std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v)
    s += e + "\n";
  return s;
}

inline jobspec::JobSpec MiniSpec(const std::string& name = "capsule-test") {
  jobspec::ParseResult r = jobspec::Parse(
      "name: " + name +
          "\nimage: python:3.11\nentrypoint: python train.py\npools: [{name: main}]\n",
      jobspec::Defaults{});
  if (!r.ok()) std::abort();
  return *r.spec;
}

inline std::string Python(const std::string& args) {
  return "python3 " + Quote(kTestData + "/zipcheck.py") + " " + args;
}

}  // namespace starforge::capsule::testing
