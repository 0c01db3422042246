#include "starforge/api/login_codes.h"

#include <openssl/rand.h>

#include <array>
#include <stdexcept>
#include <utility>

namespace starforge::api {

namespace {

std::string RandomCode() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::array<unsigned char, 32> buf{};
  if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1)
    throw std::runtime_error("the system's random number generator failed (OpenSSL RAND_bytes)");
  std::string code;
  for (unsigned char b : buf)  // 252 = 7 × 36: values above are rare and only skew slightly
    code += kAlphabet[b % 36];
  return code;
}

}  // namespace

void LoginCodes::DropExpired(int64_t now_ms) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.expires_ms <= now_ms)
      it = pending_.erase(it);
    else
      ++it;
  }
}

std::string LoginCodes::Issue(const std::string& token, int64_t now_ms) {
  std::lock_guard lock(mu_);
  DropExpired(now_ms);
  if (pending_.size() >= kMaxPending) {  // the oldest makes room
    auto oldest = pending_.begin();
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if (it->second.expires_ms < oldest->second.expires_ms) oldest = it;
    }
    pending_.erase(oldest);
  }
  std::string code = RandomCode();
  pending_[code] = {token, now_ms + kLifetimeMs};
  return code;
}

std::optional<std::string> LoginCodes::Redeem(const std::string& code, int64_t now_ms) {
  std::lock_guard lock(mu_);
  auto it = pending_.find(code);
  if (it == pending_.end()) return std::nullopt;
  Pending p = std::move(it->second);
  pending_.erase(it);
  if (p.expires_ms <= now_ms) return std::nullopt;
  return p.token;
}

}  // namespace starforge::api
