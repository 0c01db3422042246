// SHA-256 that can be stopped at a block boundary and resumed later, in another process, from
// the saved chaining state ("midstate"): the next build of a capsule hashes only what follows
// the part of the archive that is byte-identical to the previous one. The digest is the plain
// SHA-256 of the bytes. Private to src/capsule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "starforge/capsule/reuse.h"  // HashCheckpoint

struct SHA256state_st;

namespace starforge::capsule::internal {

class ResumableSha256 {
 public:
  ResumableSha256();
  // As if the `at.offset` bytes whose chaining state is `at.state` had been hashed.
  explicit ResumableSha256(const HashCheckpoint& at);
  ~ResumableSha256();
  ResumableSha256(ResumableSha256&&) noexcept;
  ResumableSha256& operator=(ResumableSha256&&) noexcept;

  void Update(const void* data, size_t size);
  uint64_t bytes() const { return bytes_; }
  // The state after bytes(), which must be a multiple of 64 (a whole number of blocks).
  HashCheckpoint Checkpoint() const;
  // Lower-case hex of the digest; the object must not be updated afterwards.
  std::string HexDigest();

 private:
  std::unique_ptr<SHA256state_st> ctx_;
  uint64_t bytes_ = 0;
};

}  // namespace starforge::capsule::internal
