// Reading a package back with protobuf, for tools and the server: the header,
// the trailer checksum and the manifest of a .kpkg (`kiln inspect PKG`, the
// whole-model check). The runtime has its own dependency-free decoder
// (client/runtime/manifest.h); this one gives the generated message.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "kiln/v1/package.pb.h"

namespace kiln {

// True when `bytes` start with the package magic: a package, not an ONNX model.
bool LooksLikePackage(std::string_view bytes);

struct PackageInfo {
  kiln::v1::PackageManifest manifest;
  std::string digest;  // "sha256:<hex>" of the whole file
  int64_t size = 0;
};

// The manifest of a package. INVALID_ARGUMENT naming what is wrong for a file
// that is not a package or whose header or manifest is malformed (a format
// version other than this build's says which it reads); DATA_LOSS when the
// trailer's checksum does not match its contents.
absl::StatusOr<PackageInfo> ReadPackageInfo(std::string_view bytes);

// True when the two packages run the same kernels: the same target (CPU, or
// CUDA GPU and SM), groups
// with the same workloads and schedules, in the same order. Their digests may
// still differ, when the records behind those schedules (provenance) do.
bool SameKernels(const kiln::v1::PackageManifest& a, const kiln::v1::PackageManifest& b);

}  // namespace kiln
