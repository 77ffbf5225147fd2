// SHA-256 through OpenSSL's EVP interface.
#include "base/digest.h"

#include <openssl/evp.h>

#include <cstdlib>

namespace kiln {

Sha256Bytes Sha256(std::string_view bytes) {
  Sha256Bytes md;
  unsigned int len = 0;
  // EVP_Digest with SHA-256 fails only when libcrypto cannot allocate a context.
  if (EVP_Digest(bytes.data(), bytes.size(), md.data(), &len, EVP_sha256(), nullptr) != 1 || len != md.size()) {
    std::abort();
  }
  return md;
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

std::string Sha256Hex(std::string_view bytes) {
  Sha256Bytes md = Sha256(bytes);
  return HexEncode(std::string_view(reinterpret_cast<const char*>(md.data()), md.size()));
}

std::string ContentDigest(std::string_view bytes) { return "sha256:" + Sha256Hex(bytes); }

bool IsValidContentDigest(std::string_view digest) {
  constexpr std::string_view kPrefix = "sha256:";
  if (digest.size() != kPrefix.size() + 64 || digest.substr(0, kPrefix.size()) != kPrefix) return false;
  for (char c : digest.substr(kPrefix.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace kiln
