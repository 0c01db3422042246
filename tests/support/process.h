// Child processes for tests: the real binaries (forge serve, kubesim, s3rver, Ray, …) started,
// waited for and stopped the same way everywhere.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/files.h"

namespace starforge::support {

struct ProcessOptions {
  std::vector<std::string> argv;  // argv[0]: a path, or a name looked up in PATH
  // The whole environment ("KEY=VALUE"); this process's when unset.
  std::optional<std::vector<std::string>> env;
  std::filesystem::path cwd;          // this process's when empty
  std::filesystem::path stdout_file;  // inherited when empty
  std::filesystem::path stderr_file;  // inherited when empty; may equal stdout_file
  // Sent to the child when the test dies, so that it never outlives a crashed test (0: none).
  int death_signal = 0;
};

// A running child process; stopped (SIGTERM, then SIGKILL after 20 s) by the destructor.
class Process {
 public:
  // Starts `o.argv`; a failed exec shows as exit code 127.
  explicit Process(const ProcessOptions& o) {
    // Everything the child needs is prepared here: after fork() it only calls async-signal-safe
    // functions (the test may have other threads).
    std::vector<std::string> args = o.argv, env = o.env.value_or(std::vector<std::string>());
    std::vector<char*> argv, envp;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    const std::string cwd = o.cwd.string(), out = o.stdout_file.string(),
                      err = o.stderr_file.string();
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ != 0) return;
    if (o.death_signal != 0) {
      ::prctl(PR_SET_PDEATHSIG, o.death_signal);
      if (::getppid() != parent) ::_exit(1);
    }
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(127);
    int out_fd = -1;
    if (!out.empty()) {
      out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (out_fd < 0 || ::dup2(out_fd, 1) < 0) ::_exit(127);
    }
    if (!err.empty()) {
      const int err_fd =
          err == out ? out_fd : ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err_fd < 0 || ::dup2(err_fd, 2) < 0) ::_exit(127);
    }
    if (o.env)
      ::execvpe(argv[0], argv.data(), envp.data());
    else
      ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ~Process() {
    if (pid_ > 0) Stop();
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }

  // Whether it has exited (reaping it then); exit_code() says how.
  bool Exited() {
    if (pid_ <= 0) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
    Reaped(status);
    return true;
  }
  // Its exit code, 128+N when signal N ended it, -1 when it is running or had to be killed.
  int exit_code() const { return exit_code_; }

  // Sends `sig` and waits for it to end (SIGKILL after `timeout`); exit_code().
  int Stop(int sig = SIGTERM, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    if (pid_ <= 0) return exit_code_;
    ::kill(pid_, sig);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!Exited()) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
        return exit_code_ = -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return exit_code_;
  }

  // Waits until `file` holds a port number (a server that writes where it listens); the port,
  // or 0 when the process exited or `timeout` passed first.
  int WaitForPortFile(const std::filesystem::path& file,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (const int port = std::atoi(ReadFile(file).c_str()); port > 0) return port;
      if (Exited()) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
  }

 private:
  void Reaped(int status) {
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  pid_t pid_ = -1;
  int exit_code_ = -1;
};

}  // namespace starforge::support
