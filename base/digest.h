// SHA-256 digests (OpenSSL) in the two spellings Kiln uses: bare hex for keys,
// "sha256:<hex>" for content-addressed artifacts such as packages.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

std::string Sha256Hex(std::string_view bytes);
// "sha256:" + Sha256Hex(bytes).
std::string ContentDigest(std::string_view bytes);

}  // namespace kiln
