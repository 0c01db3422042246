// Shared helpers for the capsule tests: scratch trees, a JobSpec, subprocesses.
#pragma once

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "starforge/jobspec/parse.h"

namespace starforge::capsule::testing {

namespace fs = std::filesystem;

inline const std::string kTestData = std::string(STARFORGE_SOURCE_DIR) + "/tests/capsule/testdata";

// A fresh directory under the system temp dir, removed (even if made unreadable) at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "capsule-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
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
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& rel) const { return path_ / rel; }

 private:
  fs::path path_;
};

inline void Write(const fs::path& p, const std::string& content,
                  fs::perms perms = fs::perms(0644)) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
  fs::permissions(p, perms);
}

inline std::string Read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

inline jobspec::JobSpec MiniSpec(const std::string& name = "capsule-test") {
  jobspec::ParseResult r = jobspec::Parse(
      "name: " + name +
          "\nimage: python:3.11\nentrypoint: python train.py\npools: [{name: main}]\n",
      jobspec::Defaults{});
  if (!r.ok()) std::abort();
  return *r.spec;
}

struct Output {
  int code = -1;
  std::string out;
};

// Runs `cmd` through /bin/sh; returns its exit code and standard output (stderr passes through).
inline Output Shell(const std::string& cmd) {
  Output o;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
    o.out.append(buf.data(), n);
  const int status = ::pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

inline std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'')
      q += "'\\''";
    else
      q += c;
  }
  return q + "'";
}

inline std::string Python(const std::string& args) {
  return "python3 " + Quote(kTestData + "/zipcheck.py") + " " + args;
}

}  // namespace starforge::capsule::testing
