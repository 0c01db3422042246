// Starts a real S3 protocol server for a test: s3rver (npm, pinned in the repository's
// package.json and installed by scripts/bootstrap) through tools/s3peer/s3peer.js, on a loopback
// port the kernel picks. A missing Node.js or s3rver is a test failure with the fix in the
// message, never a silent skip: CI on a fresh machine must install them.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace starforge::objstore::testing {

inline std::string Slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// A fresh directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "starforge-objstore-XXXXXX");
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

class S3Peer {
 public:
  static constexpr const char* kBucket = "forge-test";
  static constexpr const char* kAccessKey = "S3RVER";  // the one key s3rver knows
  static constexpr const char* kSecretKey = "S3RVER";

  // Starts the peer with bucket kBucket; nullptr and `*error` set when it cannot.
  static std::unique_ptr<S3Peer> Start(std::string* error) {
    const std::string root = STARFORGE_SOURCE_DIR;
    const std::string script = root + "/tools/s3peer/s3peer.js";
    if (!std::filesystem::exists(root + "/node_modules/s3rver/package.json")) {
      *error = "the s3rver npm package is not installed in " + root +
               "/node_modules: run scripts/bootstrap (it runs `npm ci` at the repository root)";
      return nullptr;
    }
    if (std::system("command -v node >/dev/null 2>&1") != 0) {
      *error = "Node.js (`node`) is not on PATH: run scripts/bootstrap (it installs nodejs/npm)";
      return nullptr;
    }
    auto peer = std::unique_ptr<S3Peer>(new S3Peer());
    const std::string port_file = peer->dir_ / "port";
    const std::string stderr_file = peer->dir_ / "stderr";
    peer->log_ = peer->dir_ / "requests.log";
    const pid_t parent = ::getpid();
    peer->pid_ = ::fork();
    if (peer->pid_ == 0) {
      // Dies with the test even if the test crashes (the script also watches its parent).
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);
      std::freopen(stderr_file.c_str(), "w", stderr);
      std::freopen("/dev/null", "w", stdout);
      ::execlp("node", "node", script.c_str(), "--port-file", port_file.c_str(), "--bucket",
               kBucket, "--log", peer->log_.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (std::filesystem::exists(port_file)) {
        peer->port_ = std::atoi(Slurp(port_file).c_str());
        if (peer->port_ > 0) return peer;
      }
      int status = 0;
      if (::waitpid(peer->pid_, &status, WNOHANG) == peer->pid_) {
        peer->pid_ = -1;
        *error = "the s3rver test peer exited before listening: " + Slurp(stderr_file);
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    *error = "the s3rver test peer did not report a port within 30 s: " + Slurp(stderr_file);
    return nullptr;
  }

  ~S3Peer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  S3Peer(const S3Peer&) = delete;
  S3Peer& operator=(const S3Peer&) = delete;

  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // One "METHOD URL CONTENT-LENGTH" line per request the peer received, in order.
  std::vector<std::string> Requests() const {
    std::vector<std::string> lines;
    std::istringstream in(Slurp(log_));
    for (std::string line; std::getline(in, line);)
      lines.push_back(line);
    return lines;
  }

 private:
  S3Peer() = default;
  TempDir dir_;
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace starforge::objstore::testing
