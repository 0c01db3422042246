// Starts a real S3 protocol server for a test, on a loopback port the kernel picks:
//  - kS3rver: s3rver (npm, pinned in the repository's package.json, installed by
//    scripts/bootstrap) through tools/s3peer/s3peer.js. It knows one access key id (S3RVER) and
//    accepts any signature.
//  - kSigV4: s3sigpeer (tools/s3peer/sigpeer: gofakes3 from the Go module proxy, built into
//    build/tools/bin by scripts/bootstrap). It verifies every SigV4 signature (header and
//    presigned, with expiry), the region and the payload hash, as AWS S3 does; with tls, it
//    serves https with a certificate of a CA the test writes (ca_file()).
// A missing peer is a test failure with the fix in the message, never a silent skip: CI on a
// fresh machine must install them.
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
  enum class Kind { kS3rver, kSigV4 };
  static constexpr const char* kBucket = "forge-test";
  static constexpr const char* kAccessKey = "S3RVER";  // the one key s3rver knows
  static constexpr const char* kSecretKey = "S3RVER";
  // s3sigpeer's key pair; the secret has characters that need care ('/', '+', '=').
  static constexpr const char* kSigAccessKey = "AKIASTARFORGETEST001";
  static constexpr const char* kSigSecretKey = "sf/Test+Secret=Key0123456789abcdefGHIJKL";
  static constexpr const char* kSigRegion = "eu-central-1";  // not the default: signing must say it

  // Starts s3rver with bucket kBucket; nullptr and `*error` set when it cannot.
  static std::unique_ptr<S3Peer> Start(std::string* error) { return Start(Kind::kS3rver, error); }

  static std::unique_ptr<S3Peer> Start(Kind kind, std::string* error, bool tls = false) {
    const std::string root = STARFORGE_SOURCE_DIR;
    auto peer = std::unique_ptr<S3Peer>(new S3Peer());
    peer->kind_ = kind;
    const std::filesystem::path port_file = peer->dir_ / "port";
    const std::filesystem::path stderr_file = peer->dir_ / "stderr";
    support::ProcessOptions o;
    if (kind == Kind::kS3rver) {
      if (!std::filesystem::exists(root + "/node_modules/s3rver/package.json")) {
        *error = "the s3rver npm package is not installed in " + root +
                 "/node_modules: run scripts/bootstrap (it runs `npm ci` at the repository root)";
        return nullptr;
      }
      if (std::system("command -v node >/dev/null 2>&1") != 0) {
        *error = "Node.js (`node`) is not on PATH: run scripts/bootstrap (it installs nodejs/npm)";
        return nullptr;
      }
      o.argv = {"node",        root + "/tools/s3peer/s3peer.js",
                "--port-file", port_file.string(),
                "--bucket",    kBucket,
                "--log",       peer->log_.string()};
    } else {
      const std::string bin = root + "/build/tools/bin/s3sigpeer";
      if (!std::filesystem::exists(bin)) {
        *error = bin + " is missing: run scripts/bootstrap (it builds it with tools/s3peer/build)";
        return nullptr;
      }
      o.argv = {bin,           "--port-file",  port_file.string(),  "--bucket",
                kBucket,       "--log",        peer->log_.string(), "--access-key",
                kSigAccessKey, "--secret-key", kSigSecretKey,       "--region",
                kSigRegion};
      if (tls) {
        if (!peer->MakeCertificates(error)) return nullptr;
        o.argv.insert(o.argv.end(), {"--tls-cert", (peer->dir_ / "server.crt").string(),
                                     "--tls-key", (peer->dir_ / "server.key").string()});
        peer->tls_ = true;
      }
    }
    o.stdout_file = "/dev/null";
    o.stderr_file = stderr_file;
    o.death_signal = SIGTERM;  // both also watch their parent
    peer->process_.emplace(o);
    peer->port_ = peer->process_->WaitForPortFile(port_file);
    if (peer->port_ > 0) return peer;
    *error = peer->process_->Exited()
                 ? "the S3 test peer exited before listening: " + support::ReadFile(stderr_file)
                 : "the S3 test peer did not report a port within 30 s: " +
                       support::ReadFile(stderr_file);
    return nullptr;
  }

  S3Peer(const S3Peer&) = delete;
  S3Peer& operator=(const S3Peer&) = delete;

  Kind kind() const { return kind_; }
  int port() const { return port_; }
  // https://localhost:<port> under tls (the certificate names localhost), else http://127.0.0.1.
  std::string endpoint() const {
    return tls_ ? "https://localhost:" + std::to_string(port_)
                : "http://127.0.0.1:" + std::to_string(port_);
  }
  std::string access_key() const { return kind_ == Kind::kS3rver ? kAccessKey : kSigAccessKey; }
  std::string secret_key() const { return kind_ == Kind::kS3rver ? kSecretKey : kSigSecretKey; }
  std::string region() const { return kind_ == Kind::kS3rver ? "us-east-1" : kSigRegion; }
  // The CA that signed the https certificate (tls only).
  std::string ca_file() const { return (dir_ / "ca.crt").string(); }

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

  // A CA and a server certificate for localhost/127.0.0.1 (ECDSA P-256: fast to generate).
  bool MakeCertificates(std::string* error) {
    const std::string d = dir_.path().string();
    const std::string cmd =
        "cd '" + d +
        "' && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
        "-subj '/CN=starforge test CA' -keyout ca.key -out ca.crt 2>>openssl.log && "
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj '/CN=localhost' "
        "-keyout server.key -out server.csr 2>>openssl.log && "
        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext && "
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
        "-extfile san.ext -out server.crt 2>>openssl.log";
    if (std::system(cmd.c_str()) == 0) return true;
    *error =
        "openssl could not make the test certificates: " + support::ReadFile(dir_ / "openssl.log");
    return false;
  }

  support::TempDir dir_;
  std::filesystem::path log_ = dir_ / "requests.log";
  std::optional<support::Process> process_;  // after dir_: stopped before the dir is removed
  Kind kind_ = Kind::kS3rver;
  bool tls_ = false;
  int port_ = 0;
};

}  // namespace starforge::objstore::testing
