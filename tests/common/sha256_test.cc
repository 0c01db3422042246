#include "starforge/common/sha256.h"

#include <gtest/gtest.h>

namespace starforge {
namespace {

// FIPS 180-2 examples.
TEST(Sha256, KnownDigests) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, StreamingEqualsOneShot) {
  const std::string text = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  Sha256 h;
  for (char c : text)
    h.Update(&c, 1);
  EXPECT_EQ(h.HexDigest(), Sha256Hex(text));
  EXPECT_EQ(Sha256Hex(text), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

}  // namespace
}  // namespace starforge
