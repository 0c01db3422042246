// Starts tools/kubesim for a test: <dir of this test binary>/../bin/kubesim on an ephemeral port
// (support/kubesim.h); stopped and reaped on destruction.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/kubesim.h"

namespace starforge::kube::testing {

inline std::string KubesimPath() {
  namespace fs = std::filesystem;
  fs::path self = fs::read_symlink("/proc/self/exe");
  return (self.parent_path() / ".." / "bin" / "kubesim").lexically_normal().string();
}

class Kubesim {
 public:
  // Throws std::runtime_error (with what to do) when the binary is missing or does not start.
  // "{cert}" in `extra_args` stands for cert_file().
  explicit Kubesim(std::vector<std::string> extra_args = {}) {
    const std::string bin = KubesimPath();
    if (!std::filesystem::exists(bin)) {
      throw std::runtime_error("kubesim not found at " + bin +
                               ": build the `kubesim` target (tools/kubesim) first");
    }
    cert_file_ = (process_.dir() / "cert.pem").string();
    std::vector<std::string> args = {"--bookmark-interval-ms", "200"};
    for (auto& a : extra_args)
      args.push_back(a == "{cert}" ? cert_file_ : a);
    tls_ = std::find(args.begin(), args.end(), "--tls") != args.end();
    if (!process_.Start(bin, args)) throw std::runtime_error(process_.Why());
  }

  std::string url() const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(process_.port());
  }
  const std::string& cert_file() const { return cert_file_; }
  std::string dir() const { return process_.dir().string(); }

 private:
  support::KubesimProcess process_;
  bool tls_ = false;
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

// A namespace for the running test, so that tests can share one kubesim (it takes a while to
// start): `prefix` and the test's name, lower-case alphanumerics, at most `max_size` characters.
inline std::string TestNamespace(const std::string& prefix, size_t max_size = 60) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string out = prefix;
  for (char c : std::string(info->name()))
    if (std::isalnum(static_cast<unsigned char>(c)))
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out.substr(0, max_size);
}

}  // namespace starforge::kube::testing
