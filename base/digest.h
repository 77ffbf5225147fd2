// SHA-256 digests (a self-contained FIPS 180-4 implementation, with the SHA
// extensions where the CPU has them) in the spellings Kiln uses: raw bytes
// (a package's trailer), bare hex for keys, and "sha256:<hex>" for
// content-addressed artifacts such as packages.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

using Sha256Bytes = std::array<uint8_t, 32>;

Sha256Bytes Sha256(std::string_view bytes);

// How Sha256 compresses blocks: the x86 SHA extensions (SHA-NI) where the host
// has them, else portable C++. Both give the same digests.
enum class Sha256Engine { kPortable, kShaExtensions };
Sha256Engine HostSha256Engine();
// Whether `engine` runs on this host.
bool Sha256EngineRuns(Sha256Engine engine);
// Sha256 with a given engine (the portable one where `engine` does not run
// here): the tests check each engine against OpenSSL.
Sha256Bytes Sha256On(Sha256Engine engine, std::string_view bytes);
// SHA-256 over bytes given in pieces. Finish() leaves the hasher as it was, so
// one pass over a package yields both the digest of its body (the trailer it
// ends with) and of the whole file (its content digest).
class Sha256Hasher {
 public:
  Sha256Hasher();
  void Update(std::string_view bytes);
  Sha256Bytes Finish() const;

 private:
  uint32_t state_[8];
  uint8_t buffer_[64];  // the bytes past the last full block
  size_t buffered_ = 0;
  uint64_t length_ = 0;
};

// Lower-case hex of `bytes`.
std::string HexEncode(std::string_view bytes);
// Lower-case hex SHA-256 of `bytes` (64 characters).
std::string Sha256Hex(std::string_view bytes);
// "sha256:" + Sha256Hex(bytes).
std::string ContentDigest(std::string_view bytes);
// "sha256:" + the hex of an already computed SHA-256 (a Sha256Hasher's).
std::string ContentDigestOf(const Sha256Bytes& hash);
// True when `digest` is exactly "sha256:" followed by 64 lower-case hex digits.
bool IsValidContentDigest(std::string_view digest);

}  // namespace kiln
