// SHA-256 through OpenSSL's EVP interface.
#include "base/digest.h"

#include <openssl/evp.h>

namespace kiln {

std::string Sha256Hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

std::string ContentDigest(std::string_view bytes) { return "sha256:" + Sha256Hex(bytes); }

}  // namespace kiln
