// Tests of the SHA-256 helpers against known vectors.
#include "base/digest.h"

#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(ContentDigest("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, DigestValidation) {
  EXPECT_TRUE(IsValidContentDigest(ContentDigest("x")));
  EXPECT_FALSE(IsValidContentDigest(""));
  EXPECT_FALSE(IsValidContentDigest("sha256:"));
  EXPECT_FALSE(IsValidContentDigest("md5:" + Sha256Hex("x")));
  EXPECT_FALSE(IsValidContentDigest("sha256:" + Sha256Hex("x") + "0"));
  std::string upper = "sha256:" + Sha256Hex("x");
  upper[10] = 'A';
  EXPECT_FALSE(IsValidContentDigest(upper));
  EXPECT_FALSE(IsValidContentDigest("sha256:../../../../etc/passwd" + std::string(36, '0')));
}

}  // namespace
}  // namespace kiln
