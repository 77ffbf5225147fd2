// Byte layout of a Kiln package file (.kpkg), shared by the package writer
// (compiler_core) and the runtime (client/runtime). See docs/package-format.md.
//
//   [0, 64)            header: magic, format version, manifest offset and size
//   [64, ...)          manifest: kiln.v1.PackageManifest, deterministic serialization
//   page aligned       code: one x86-64 ELF relocatable object holding every kernel
//                      (a CUDA package instead: the PTX module, then its cubin)
//   page aligned       weights: constant buffers, each 64-byte aligned, those of
//                      kPageAlignedBytes or more page aligned (a CUDA package:
//                      kGpuBufferAlignment, as the device plan wants)
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
// Sections start at page offsets in the file, and the runtime reads a package
// into page-aligned memory, so that a constant's address within its page is
// fixed by the weights layout alone. Constants of kPageAlignedBytes or more
// start a page: a kernel's speed depends on where its large operands lie
// against each other and against the cache's sets (a Winograd MatMul over
// 5 MiB of transformed weights, Zen 5: 0.24 ms with them page aligned, 0.40
// ms with them 64 or 128 bytes past), and before this any change in code
// size moved every constant.
inline constexpr int64_t kPageAlignment = 4096;
inline constexpr int64_t kPageAlignedBytes = 4096;
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

inline constexpr int64_t AlignUp(int64_t x, int64_t alignment = kAlignment) {
  return (x + alignment - 1) / alignment * alignment;
}

}  // namespace kiln::package
