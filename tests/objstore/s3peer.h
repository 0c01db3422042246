// Starts a real S3 protocol server for a test: s3rver (npm, pinned in the repository's
// package.json and installed by scripts/bootstrap) through tools/s3peer/s3peer.js, on a loopback
// port the kernel picks. A missing Node.js or s3rver is a test failure with the fix in the
// message, never a silent skip: CI on a fresh machine must install them.
#pragma once

#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "support/files.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace starforge::objstore::testing {

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
    const std::filesystem::path port_file = peer->dir_ / "port";
    const std::filesystem::path stderr_file = peer->dir_ / "stderr";
    support::ProcessOptions o;
    o.argv = {"node",     script,  "--port-file", port_file.string(),
              "--bucket", kBucket, "--log",       peer->log_.string()};
    o.stdout_file = "/dev/null";
    o.stderr_file = stderr_file;
    o.death_signal = SIGTERM;  // the script also watches its parent
    peer->process_.emplace(o);
    peer->port_ = peer->process_->WaitForPortFile(port_file);
    if (peer->port_ > 0) return peer;
    *error = peer->process_->Exited()
                 ? "the s3rver test peer exited before listening: " + support::ReadFile(stderr_file)
                 : "the s3rver test peer did not report a port within 30 s: " +
                       support::ReadFile(stderr_file);
    return nullptr;
  }

  S3Peer(const S3Peer&) = delete;
  S3Peer& operator=(const S3Peer&) = delete;

  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // One "METHOD URL CONTENT-LENGTH" line per request the peer received, in order.
  std::vector<std::string> Requests() const {
    std::vector<std::string> lines;
    std::istringstream in(support::ReadFile(log_));
    for (std::string line; std::getline(in, line);)
      lines.push_back(line);
    return lines;
  }

 private:
  S3Peer() : dir_("starforge-s3peer") {}
  support::TempDir dir_;
  std::filesystem::path log_ = dir_ / "requests.log";
  std::optional<support::Process> process_;  // after dir_: stopped before the dir is removed
  int port_ = 0;
};

}  // namespace starforge::objstore::testing
