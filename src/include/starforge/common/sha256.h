// SHA-256, the digest of everything content-addressed in StarForge (capsules, manifests, S3
// payload hashes, derived names). OpenSSL's EVP picks SHA-NI / AVX code paths at run time.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace starforge {

// Streaming SHA-256.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  // Adds `size` bytes at `data` to the digest.
  void Update(const void* data, size_t size);
  // Lower-case hex of the digest; the object must not be updated afterwards.
  std::string HexDigest();

 private:
  evp_md_ctx_st* ctx_;
};

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

}  // namespace starforge
