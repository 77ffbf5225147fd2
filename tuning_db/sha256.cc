// SHA-256 digests through OpenSSL's EVP interface.
#include "tuning_db/sha256.h"

#include <openssl/evp.h>

#include <cassert>

namespace kiln::tuningdb {

std::string Sha256Hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  int ok = EVP_Digest(bytes.data(), bytes.size(), md, &md_len, EVP_sha256(), nullptr);
  assert(ok == 1 && md_len == 32);
  (void)ok;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * md_len);
  for (unsigned int i = 0; i < md_len; ++i) {
    hex.push_back(kHex[md[i] >> 4]);
    hex.push_back(kHex[md[i] & 0xf]);
  }
  return hex;
}

std::string Sha256Digest(std::string_view bytes) { return "sha256:" + Sha256Hex(bytes); }

bool IsValidSha256Digest(std::string_view digest) {
  constexpr std::string_view kPrefix = "sha256:";
  if (digest.size() != kPrefix.size() + 64 || digest.substr(0, kPrefix.size()) != kPrefix) {
    return false;
  }
  for (char c : digest.substr(kPrefix.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace kiln::tuningdb
