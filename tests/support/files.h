// Whole-file reads and writes for tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace starforge::support {

// The bytes of `p`; "" when it cannot be read.
inline std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Replaces `p` with `content`, making its parent directories first.
inline void WriteFile(const std::filesystem::path& p, const std::string& content) {
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
}

}  // namespace starforge::support
