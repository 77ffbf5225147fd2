// Byte layout of a Kiln package file (.kpkg), shared by the package writer
// (compiler_core) and the runtime (client/runtime). See docs/package-format.md.
//
//   [0, 64)            header: magic, format version, manifest offset and size
//   [64, ...)          manifest: kiln.v1.PackageManifest, deterministic serialization
//   64-byte aligned    code: one x86-64 ELF relocatable object holding every kernel
//                      (a CUDA package instead: the PTX module, then its cubin)
//   64-byte aligned    weights: constant buffers, each 64-byte aligned (a CUDA
//                      package: kGpuBufferAlignment, as the device plan wants)
//   last 32 bytes      trailer: SHA-256 of every byte before it
//
// The package digest is "sha256:" + hex(SHA-256 of the whole file).
#pragma once

#include <cstdint>

namespace kiln::package {

inline constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'P', 'K', 'G', '\0'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr int64_t kHeaderSize = 64;
inline constexpr int64_t kAlignment = 64;
inline constexpr int64_t kTrailerSize = 32;
// A CUDA package's device plan aligns every buffer to this (what cuMemAlloc
// gives; the NVPTX kernels' widest access, ld.v4, needs 16). The package
// records it (PackageCuda.buffer_alignment): the runtime reads it there.
inline constexpr int64_t kGpuBufferAlignment = 256;

// Little-endian header at offset 0.
struct Header {
  char magic[8];
  uint32_t format_version;
  uint32_t reserved;
  uint64_t manifest_offset;
  uint64_t manifest_size;
  uint8_t padding[32];
};
static_assert(sizeof(Header) == kHeaderSize);

inline constexpr int64_t AlignUp(int64_t x) { return (x + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace kiln::package
