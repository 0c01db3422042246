// Starts tools/kubesim for a test: fork/exec of <dir of this test binary>/../bin/kubesim on an
// ephemeral port, read back through --port-file; killed and reaped on destruction.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace starforge::kube::testing {

inline std::string KubesimPath() {
  namespace fs = std::filesystem;
  fs::path self = fs::read_symlink("/proc/self/exe");
  return (self.parent_path() / ".." / "bin" / "kubesim").lexically_normal().string();
}

class Kubesim {
 public:
  // Throws std::runtime_error (with what to do) when the binary is missing or does not start.
  explicit Kubesim(std::vector<std::string> extra_args = {}) {
    namespace fs = std::filesystem;
    std::string bin = KubesimPath();
    if (!fs::exists(bin)) {
      throw std::runtime_error("kubesim not found at " + bin +
                               ": build the `kubesim` target (tools/kubesim) first");
    }
    std::string tmpl = (fs::temp_directory_path() / "kubesim-test-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    port_file_ = dir_ + "/port";
    cert_file_ = dir_ + "/cert.pem";
    std::vector<std::string> args = {
        bin, "--listen", "127.0.0.1:0", "--port-file", port_file_, "--bookmark-interval-ms", "200"};
    for (auto& a : extra_args) {
      if (a == "{cert}") a = cert_file_;
      args.push_back(a);
    }
    tls_ = std::find(args.begin(), args.end(), "--tls") != args.end();
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      // Quiet unless the test fails: its stderr goes to a file in the temp dir.
      FILE* log = std::fopen((dir_ + "/stderr").c_str(), "w");
      if (log != nullptr) dup2(fileno(log), 2);
      execv(argv[0], argv.data());
      _exit(127);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(port_file_);
      int port = 0;
      if (in >> port && port > 0) {
        port_ = port;
        return;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("kubesim exited at start; see " + dir_ + "/stderr");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    throw std::runtime_error("kubesim did not write its port file within 15 s");
  }
  ~Kubesim() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (waitpid(pid_, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
          kill(pid_, SIGKILL);
          waitpid(pid_, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  Kubesim(const Kubesim&) = delete;
  Kubesim& operator=(const Kubesim&) = delete;

  std::string url() const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
  }
  const std::string& cert_file() const { return cert_file_; }
  const std::string& dir() const { return dir_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  bool tls_ = false;
  std::string dir_;
  std::string port_file_;
  std::string cert_file_;
};

// For SetUpTestSuite: the running simulator, or null with the reason in `*error` (each test's
// SetUp then fails with it: a missing kubesim is a failure, never a skip).
inline std::unique_ptr<Kubesim> StartKubesim(std::vector<std::string> args, std::string* error) {
  try {
    return std::make_unique<Kubesim>(std::move(args));
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
}

}  // namespace starforge::kube::testing
