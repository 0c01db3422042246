// SHA-256 resumed from a saved state gives the digest of the whole message.
#include "../../src/capsule/sha256_resume.h"

#include <gtest/gtest.h>

#include <string>

#include "starforge/common/sha256.h"

namespace starforge::capsule::internal {
namespace {

std::string Message(size_t size) {
  std::string m(size, '\0');
  uint64_t x = 7;
  for (auto& c : m) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    c = static_cast<char>(x >> 56);
  }
  return m;
}

TEST(ResumableSha256, ResumedAtAnyBlockBoundaryGivesTheWholeMessagesDigest) {
  const std::string m = Message(3 * 4096 + 17);
  const std::string want = Sha256Hex(m);
  for (size_t at : {size_t{0}, size_t{64}, size_t{4096}, size_t{3 * 4096}}) {
    SCOPED_TRACE(at);
    ResumableSha256 first;
    first.Update(m.data(), at);
    const HashCheckpoint saved = first.Checkpoint();
    EXPECT_EQ(saved.offset, at);
    ResumableSha256 resumed(saved);  // as another process would, from the numbers alone
    EXPECT_EQ(resumed.bytes(), at);
    resumed.Update(m.data() + at, m.size() - at);
    EXPECT_EQ(resumed.HexDigest(), want);
  }
}

// Past 2^32 bits (512 MiB) the bit count needs its high word: a resumed length that lost it
// would give another digest. Checked against a hash that went through the same offset.
TEST(ResumableSha256, AnOffsetBeyondFourGigabitsKeepsItsLength) {
  const std::string block = Message(1 << 20);
  ResumableSha256 whole;
  for (int i = 0; i < 513; ++i)
    whole.Update(block.data(), block.size());
  const HashCheckpoint at = whole.Checkpoint();
  EXPECT_EQ(at.offset, 513ull << 20);
  ResumableSha256 resumed(at);
  whole.Update("tail", 4);
  resumed.Update("tail", 4);
  EXPECT_EQ(resumed.HexDigest(), whole.HexDigest());
}

TEST(ResumableSha256, StatesOfDifferentPrefixesDiffer) {
  const std::string m = Message(128);
  ResumableSha256 a, b;
  a.Update(m.data(), 64);
  b.Update(m.data() + 64, 64);
  EXPECT_NE(a.Checkpoint(), b.Checkpoint());
  EXPECT_THROW(ResumableSha256(HashCheckpoint{.offset = 10, .state = {}}), std::logic_error);
}

}  // namespace
}  // namespace starforge::capsule::internal
