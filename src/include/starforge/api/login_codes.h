// One-time login codes for the web console (`forge console --login`): the CLI, signed in, asks
// the server for a code; the link it prints carries the code in its #fragment (never sent to a
// server, so never logged); the console redeems it once, by POST, for the token that asked.
// Codes live in memory only, expire after a minute and are single-use. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace starforge::api {

class LoginCodes {
 public:
  static constexpr int64_t kLifetimeMs = 60'000;
  static constexpr size_t kMaxPending = 1000;  // a flood of requests cannot grow memory

  // A new code (32 characters of [a-z0-9]) for `token`, valid until now_ms + kLifetimeMs.
  std::string Issue(const std::string& token, int64_t now_ms);
  // The token of `code` if it is pending and not expired; the code is used up either way.
  std::optional<std::string> Redeem(const std::string& code, int64_t now_ms);

 private:
  struct Pending {
    std::string token;
    int64_t expires_ms;
  };
  void DropExpired(int64_t now_ms);
  std::mutex mu_;
  std::map<std::string, Pending> pending_;
};

}  // namespace starforge::api
