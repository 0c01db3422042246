// The capsule init container's program, run for real with python3 against a local HTTP server:
// a verified download succeeds, a digest mismatch fails (so the pod never starts) and leaves no
// file behind, and the URL (a bearer credential) is never printed.
#include "starforge/kuberay/fetch_script.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <openssl/evp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <thread>

#include "starforge/kuberay/shell.h"
#include "support/process.h"
#include "test_support.h"

namespace starforge::kuberay {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

std::string Sha256Hex(const std::string& data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> d{};
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), d.data(), &n, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += hex[d[i] >> 4];
    out += hex[d[i] & 15];
  }
  return out;
}

// `python3 -m http.server` on an ephemeral port, serving `root`.
class HttpServer {
 public:
  explicit HttpServer(const fs::path& root)
      : process_(Options(root)),
        port_(std::to_string(process_.WaitForPortFile(root / ".port", std::chrono::seconds(5)))) {}
  std::string Url(const std::string& name) const {
    return "http://127.0.0.1:" + port_ + "/" + name + "?X-Amz-Signature=topsecretsignature";
  }

 private:
  static support::ProcessOptions Options(const fs::path& root) {
    support::ProcessOptions o;
    o.argv = {"python3", "-c",
              "import http.server, socketserver\n"
              "s = socketserver.TCPServer(('127.0.0.1', 0), http.server.SimpleHTTPRequestHandler)\n"
              "open('.port.tmp', 'w').write(str(s.server_address[1]))\n"
              "import os; os.rename('.port.tmp', '.port')\n"
              "s.serve_forever()\n"};
    o.cwd = root;
    return o;
  }

  support::Process process_;
  std::string port_;
};

struct Result {
  int code;
  std::string output;
};

Result Fetch(const fs::path& dir, const std::string& url, const std::string& sha,
             const fs::path& dest) {
  const fs::path log = dir / "fetch.log";
  const std::string cmd = "python3 -c " + ShellQuote(kFetchCapsuleScript) + " fetch-capsule " +
                          ShellQuote(url) + " " + ShellQuote(sha) + " " +
                          ShellQuote(dest.string()) + " >" + ShellQuote(log.string()) + " 2>&1";
  const int status = std::system(cmd.c_str());
  return {WEXITSTATUS(status), ReadFile(log)};
}

class FetchScript : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(tmp_.path() / "srv");
    fs::create_directories(tmp_.path() / "pod");
    WriteFile(tmp_.path() / "srv/capsule.zip", payload_);
    server_ = std::make_unique<HttpServer>(tmp_.path() / "srv");
  }
  TempDir tmp_;
  std::string payload_ = std::string(3 << 20, 'x') + "end";  // spans several read blocks
  std::unique_ptr<HttpServer> server_;
};

TEST_F(FetchScript, DownloadsAndVerifies) {
  const fs::path dest = tmp_.path() / "pod" / (Sha256Hex(payload_) + ".zip");
  Result r = Fetch(tmp_.path(), server_->Url("capsule.zip"), Sha256Hex(payload_), dest);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(ReadFile(dest), payload_);
  EXPECT_FALSE(fs::exists(dest.string() + ".part"));
  EXPECT_THAT(r.output, Not(HasSubstr("topsecretsignature")));

  // A restarted init container reuses the verified file.
  fs::remove(tmp_.path() / "srv/capsule.zip");
  r = Fetch(tmp_.path(), server_->Url("capsule.zip"), Sha256Hex(payload_), dest);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("already present and verified"));
}

TEST_F(FetchScript, DigestMismatchFailsAndLeavesNothing) {
  const std::string wrong(64, '0');
  const fs::path dest = tmp_.path() / "pod" / (wrong + ".zip");
  Result r = Fetch(tmp_.path(), server_->Url("capsule.zip"), wrong, dest);
  EXPECT_EQ(r.code, 3);
  EXPECT_THAT(r.output,
              HasSubstr("SHA-256 mismatch: expected " + wrong + ", got " + Sha256Hex(payload_)));
  EXPECT_FALSE(fs::exists(dest));
  EXPECT_FALSE(fs::exists(dest.string() + ".part"));
}

TEST_F(FetchScript, MissingObjectFailsAtOnceWithoutPrintingTheUrl) {
  const fs::path dest = tmp_.path() / "pod" / "x.zip";
  Result r = Fetch(tmp_.path(), server_->Url("missing.zip"), std::string(64, 'a'), dest);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("download from 127.0.0.1 failed (attempt 1 of 5): HTTP 404"));
  EXPECT_THAT(r.output, Not(HasSubstr("attempt 2")));  // a 4xx does not heal by retrying
  EXPECT_THAT(r.output, Not(HasSubstr("topsecretsignature")));
  EXPECT_FALSE(fs::exists(dest));
}

}  // namespace
}  // namespace starforge::kuberay
