// Shared by the jobspec tests.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/files.h"

namespace starforge::jobspec::testing {

// tests/jobspec/testdata/<name> (a failure when it is missing).
inline std::string ReadTestdata(const std::string& name) {
  const std::filesystem::path p =
      std::filesystem::path(STARFORGE_SOURCE_DIR) / "tests/jobspec/testdata" / name;
  EXPECT_TRUE(std::filesystem::is_regular_file(p)) << name;
  return support::ReadFile(p);
}

}  // namespace starforge::jobspec::testing
