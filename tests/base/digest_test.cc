// Tests of the SHA-256 helpers against known vectors.
#include "base/digest.h"

#include <openssl/sha.h>

#include <string>

#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(ContentDigest("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// Every length around the padding boundaries (55, 56, 63, 64 ...) and a large
// input, against OpenSSL's SHA-256 as the reference, on each engine.
class Sha256EngineTest : public ::testing::TestWithParam<Sha256Engine> {};

TEST_P(Sha256EngineTest, MatchesOpenSslOnEveryPaddingCase) {
  const Sha256Engine engine = GetParam();
  if (!Sha256EngineRuns(engine)) GTEST_SKIP() << "this CPU has no SHA extensions (CPUID leaf 7, EBX bit 29)";
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>((i * 131 + 7) & 0xff));
  for (size_t n = 0; n <= data.size(); ++n) {
    unsigned char want[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(data.data()), n, want);
    Sha256Bytes got = Sha256On(engine, std::string_view(data.data(), n));
    ASSERT_EQ(std::string(got.begin(), got.end()), std::string(want, want + SHA256_DIGEST_LENGTH)) << n << " bytes";
  }
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 2654435761u >> 13);
  unsigned char want[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(big.data()), big.size(), want);
  Sha256Bytes got = Sha256On(engine, big);
  EXPECT_EQ(std::string(got.begin(), got.end()), std::string(want, want + SHA256_DIGEST_LENGTH));
}

INSTANTIATE_TEST_SUITE_P(Engines, Sha256EngineTest,
                         ::testing::Values(Sha256Engine::kPortable, Sha256Engine::kShaExtensions),
                         [](const ::testing::TestParamInfo<Sha256Engine>& info) {
                           return info.param == Sha256Engine::kPortable ? std::string("Portable")
                                                                        : std::string("ShaExtensions");
                         });

// Sha256 takes the host's engine: the same digest as either engine.
TEST(Sha256Test, HostEngineAgreesWithPortable) {
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7919 >> 3);
  EXPECT_EQ(Sha256(data), Sha256On(Sha256Engine::kPortable, data));
  EXPECT_EQ(Sha256(data), Sha256On(HostSha256Engine(), data));
}

// The hasher over pieces of every size up to 130 bytes (across block
// boundaries and the buffered tail) gives Sha256 of the whole, and Finish()
// in the middle gives the prefix's digest and leaves the rest intact.
TEST(Sha256Test, HasherInPiecesMatchesOneShot) {
  std::string data(1000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 40503u >> 5);
  for (size_t piece = 1; piece <= 130; ++piece) {
    Sha256Hasher hasher;
    for (size_t at = 0; at < data.size(); at += piece) {
      const std::string_view part = std::string_view(data).substr(at, piece);
      hasher.Update(part);
      ASSERT_EQ(hasher.Finish(), Sha256(std::string_view(data).substr(0, at + part.size())))
          << piece << "-byte pieces, " << at + part.size() << " bytes in";
    }
  }
  Sha256Hasher empty;
  EXPECT_EQ(empty.Finish(), Sha256(""));
  empty.Update("");
  EXPECT_EQ(empty.Finish(), Sha256(""));
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
