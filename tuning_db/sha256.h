// SHA-256 digests (OpenSSL EVP) and the "sha256:<64 hex>" digest strings that name
// artifacts and packages in the tuning database.
#pragma once

#include <string>
#include <string_view>

namespace kiln::tuningdb {

// Lower-case hex SHA-256 of `bytes` (64 characters).
std::string Sha256Hex(std::string_view bytes);

// "sha256:" + Sha256Hex(bytes).
std::string Sha256Digest(std::string_view bytes);

// True when `digest` is exactly "sha256:" followed by 64 lower-case hex digits.
bool IsValidSha256Digest(std::string_view digest);

}  // namespace kiln::tuningdb
