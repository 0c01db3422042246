#include "sha256_resume.h"

// OpenSSL 3.0 (Debian 12) has no way to export or import an EVP digest's state; newer releases
// add EVP_MD_CTX_serialize/deserialize. The low-level SHA256_CTX — deprecated in 3.0 but
// present, public and documented in <openssl/sha.h> — holds exactly the chaining value and the
// bit count, and runs the same assembly (SHA-NI where the CPU has it) as EVP_sha256().
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <stdexcept>

namespace starforge::capsule::internal {

ResumableSha256::ResumableSha256() : ctx_(std::make_unique<SHA256_CTX>()) {
  if (SHA256_Init(ctx_.get()) != 1) throw std::runtime_error("OpenSSL: cannot initialise SHA-256");
}

ResumableSha256::ResumableSha256(const HashCheckpoint& at) : ResumableSha256() {
  if (at.offset % SHA256_CBLOCK != 0) throw std::logic_error("SHA-256 resumed mid-block");
  for (size_t i = 0; i < 8; ++i)
    ctx_->h[i] = at.state[i];
  // The message length so far, in bits, as md32_common.h keeps it: low and high 32 bits.
  const uint64_t bits = at.offset * 8;
  ctx_->Nl = static_cast<SHA_LONG>(bits & 0xffffffffu);
  ctx_->Nh = static_cast<SHA_LONG>(bits >> 32);
  ctx_->num = 0;
  bytes_ = at.offset;
}

ResumableSha256::~ResumableSha256() = default;
ResumableSha256::ResumableSha256(ResumableSha256&&) noexcept = default;
ResumableSha256& ResumableSha256::operator=(ResumableSha256&&) noexcept = default;

void ResumableSha256::Update(const void* data, size_t size) {
  SHA256_Update(ctx_.get(), data, size);
  bytes_ += size;
}

HashCheckpoint ResumableSha256::Checkpoint() const {
  if (bytes_ % SHA256_CBLOCK != 0 || ctx_->num != 0)
    throw std::logic_error("SHA-256 checkpoint mid-block");
  HashCheckpoint c;
  c.offset = bytes_;
  for (size_t i = 0; i < 8; ++i)
    c.state[i] = ctx_->h[i];
  return c;
}

std::string ResumableSha256::HexDigest() {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256_Final(md, ctx_.get());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * sizeof md);
  for (unsigned char b : md) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

}  // namespace starforge::capsule::internal
