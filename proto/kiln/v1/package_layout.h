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

// Where a step argument's bytes lie while the step runs. Kernels take their
// arguments as noalias pointers, so no two of one step may share a byte: the
// writer checks its plan and the runtime checks it again. Spaces: 0 the
// arena (scratch; in a CUDA package inputs and outputs too), 1 the weights
// (constants), both at the buffer's offset; a CPU package's input or output
// lies in memory of its own, space 2 + its buffer index.
struct ArgumentBytes {
  int64_t space = 0, begin = 0, end = 0;
};
inline constexpr ArgumentBytes ArgumentBytesOf(int buffer, bool constant, bool scratch, int64_t offset, int64_t size,
                                               bool gpu) {
  if (constant) return {1, offset, offset + size};
  if (gpu || scratch) return {0, offset, offset + size};
  return {2 + buffer, 0, size};
}

inline constexpr int64_t AlignUp(int64_t x, int64_t alignment = kAlignment) {
  return (x + alignment - 1) / alignment * alignment;
}

}  // namespace kiln::package
