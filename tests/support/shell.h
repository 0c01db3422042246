// Running shell commands from tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/files.h"
#include "support/temp_dir.h"

namespace starforge::support {

// `s` as one word for /bin/sh, in single quotes.
inline std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The exit code in a wait status; -1 when the process did not exit by itself.
inline int ExitCode(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct Output {
  int code = -1;
  std::string out;
};

// Runs `cmd` through /bin/sh; its exit code and standard output (stderr passes through).
inline Output Shell(const std::string& cmd) {
  Output o;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
    o.out.append(buf.data(), n);
  o.code = ExitCode(::pclose(p));
  return o;
}

struct Captured {
  int code = -1;  // -1 when killed by a signal
  std::string out;
  std::string err;
};

// Runs `cmd` through /bin/sh in `cwd` (this process's when empty) with `input` on its standard
// input; its exit code, standard output and standard error (captured outside `cwd`).
inline Captured Capture(const std::string& cmd, const std::filesystem::path& cwd = {},
                        const std::string& input = "") {
  const TempDir io("starforge-capture");
  const std::filesystem::path in = io.Write("stdin", input);
  std::string full = "(" + cmd + ") <" + Quote(in.string()) + " >" +
                     Quote((io / "stdout").string()) + " 2>" + Quote((io / "stderr").string());
  if (!cwd.empty()) full = "cd " + Quote(cwd.string()) + " && " + full;
  const int status = std::system(full.c_str());
  return {ExitCode(status), ReadFile(io / "stdout"), ReadFile(io / "stderr")};
}

}  // namespace starforge::support
