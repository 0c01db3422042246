// tools/kubesim for a test: the real binary on a loopback port the kernel picks.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "support/files.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace starforge::support {

// A kubesim process with a scratch directory of its own (dir(): its port file, its log, and
// whatever the test puts there before Start); stopped and removed by the destructor.
class KubesimProcess {
 public:
  KubesimProcess() : dir_("kubesim-test") {}

  // Runs `how.argv… bin --listen 127.0.0.1:0 --port-file <dir>/port flags…` (how.argv: a
  // wrapper such as setpriv, or nothing) with how's environment and death signal, its stdout and
  // stderr in Log(); waits for its port. False (Why() says why) when it exits or never listens.
  bool Start(const std::string& bin, const std::vector<std::string>& flags,
             ProcessOptions how = {}) {
    for (const std::string& a : {bin, std::string("--listen"), std::string("127.0.0.1:0"),
                                 std::string("--port-file"), (dir_ / "port").string()})
      how.argv.push_back(a);
    how.argv.insert(how.argv.end(), flags.begin(), flags.end());
    how.stdout_file = how.stderr_file = log_file();
    process_.emplace(how);
    port_ = process_->WaitForPortFile(dir_ / "port");
    return port_ > 0;
  }

  const std::filesystem::path& dir() const { return dir_.path(); }
  int port() const { return port_; }  // 0 until Start succeeds
  pid_t pid() const { return process_ ? process_->pid() : -1; }
  std::filesystem::path log_file() const { return dir_ / "kubesim.log"; }
  std::string Log() const { return ReadFile(log_file()); }
  // Why Start failed, with kubesim's own words.
  std::string Why() {
    const std::string how = process_ && process_->Exited()
                                ? "exited (" + std::to_string(process_->exit_code()) + ")"
                                : "did not write its port file within 30 s";
    return "kubesim " + how + " at start; its log (" + log_file().string() + "):\n" + Log();
  }

 private:
  TempDir dir_;
  std::optional<Process> process_;  // declared after dir_: stopped before the dir is removed
  int port_ = 0;
};

}  // namespace starforge::support
