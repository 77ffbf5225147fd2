// Package header, checksum and manifest, read with protobuf.
#include "compiler_core/package/manifest_reader.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/digest.h"
#include "kiln/v1/package_layout.h"

namespace kiln {

bool LooksLikePackage(std::string_view bytes) {
  return bytes.size() >= sizeof(package::kMagic) &&
         std::memcmp(bytes.data(), package::kMagic, sizeof(package::kMagic)) == 0;
}

absl::StatusOr<PackageInfo> ReadPackageInfo(std::string_view bytes) {
  const int64_t size = static_cast<int64_t>(bytes.size());
  if (!LooksLikePackage(bytes)) return absl::InvalidArgumentError("not a Kiln package: no KILNPKG magic");
  if (size < package::kHeaderSize + package::kTrailerSize) {
    return absl::InvalidArgumentError(absl::StrCat("package of ", size, " bytes is shorter than its header and trailer"));
  }
  package::Header header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (header.format_version != package::kFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat("package format version ", header.format_version,
                                                   "; this build reads version ", package::kFormatVersion));
  }
  const int64_t body = size - package::kTrailerSize;
  if (header.manifest_offset < static_cast<uint64_t>(package::kHeaderSize) ||
      header.manifest_offset > static_cast<uint64_t>(body) ||
      header.manifest_size > static_cast<uint64_t>(body) - header.manifest_offset) {
    return absl::InvalidArgumentError(absl::StrCat("package header: manifest [", header.manifest_offset, ", +",
                                                   header.manifest_size, ") lies outside the file's ", size,
                                                   " bytes"));
  }
  const Sha256Bytes sum = Sha256(bytes.substr(0, static_cast<size_t>(body)));
  if (std::memcmp(sum.data(), bytes.data() + body, sum.size()) != 0) {
    return absl::DataLossError("package checksum mismatch: the file is corrupt or was modified");
  }
  PackageInfo info;
  if (header.manifest_size > static_cast<uint64_t>(INT32_MAX) ||
      !info.manifest.ParseFromArray(bytes.data() + header.manifest_offset, static_cast<int>(header.manifest_size))) {
    return absl::InvalidArgumentError("package manifest: malformed protobuf");
  }
  info.digest = ContentDigest(bytes);
  info.size = size;
  return info;
}

bool SameKernels(const kiln::v1::PackageManifest& a, const kiln::v1::PackageManifest& b) {
  if (a.compiler_version() != b.compiler_version() || a.target_cpu() != b.target_cpu() ||
      a.target_features() != b.target_features() || a.device() != b.device() || a.cuda().sm() != b.cuda().sm() ||
      a.groups_size() != b.groups_size()) {
    return false;
  }
  for (int i = 0; i < a.groups_size(); ++i) {
    if (a.groups(i).workload_key() != b.groups(i).workload_key() ||
        a.groups(i).schedule_config() != b.groups(i).schedule_config()) {
      return false;
    }
  }
  return true;
}

}  // namespace kiln
