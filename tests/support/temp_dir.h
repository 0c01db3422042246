// A scratch directory for a test, removed with everything in it when the test is done.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "support/files.h"

namespace starforge::support {

// A fresh directory <system temp dir>/<prefix>-XXXXXX, removed by the destructor (even parts a
// test made unreadable).
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "starforge-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    namespace fs = std::filesystem;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec))
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& rel) const { return path_ / rel; }
  // Writes `content` to path()/rel (making its parents); the file's path.
  std::filesystem::path Write(const std::string& rel, const std::string& content) const {
    const std::filesystem::path p = path_ / rel;
    WriteFile(p, content);
    return p;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace starforge::support
