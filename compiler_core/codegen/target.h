// The devices kernels are compiled for: a CPU (LLVM triple, CPU name and
// feature string) or a CUDA GPU (its compute capability), each with the
// canonical key that tuning records are filed under.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace kiln {

struct CpuTarget {
  std::string triple;    // "x86_64-pc-linux-gnu"
  std::string cpu;       // "znver4"
  std::string features;  // LLVM feature string, "+avx2,+avx512f,-amx-tile,...", sorted by name

  // The machine this process runs on (llvm::sys::getHostCPUFeatures, and
  // getHostCPUName as CpuNameForFeatures corrects it).
  static CpuTarget Host();
  // A named CPU: an x86-64 psABI level ("x86-64-v3") or an LLVM x86 CPU name
  // ("skylake-avx512", "znver3"), with every feature LLVM's CPU table gives it
  // (implied ones included). INVALID_ARGUMENT for a name LLVM does not know.
  static absl::StatusOr<CpuTarget> Named(const std::string& name);
  // Canonical key, "cpu/x86_64/znver4/1a2b3c4d": arch, cpu and a short stable hash
  // of the feature string. Two targets with the same key compile identical code.
  std::string Key() const;
  // Widest float vector the features allow: 512 (avx512f), 256 (avx2) or 128.
  int VectorBits() const;
  // VectorBits() / 32.
  int FloatLanes() const { return VectorBits() / 32; }
  // The width the FMA units execute at once: VectorBits() on CPUs with
  // full-width 512-bit units (Zen 5; Intel's server cores since Skylake-SP),
  // else at most 256 (Zen 4 runs a 512-bit operation as two 256-bit halves;
  // Intel's client cores have one 512-bit unit, the throughput of two 256).
  int NativeVectorBits() const;
  // One core's L2 cache, by CPU name: 256 KiB (Intel client cores to Skylake),
  // 512 KiB (Zen 1-3), 2 MiB (Sapphire Rapids and later Xeons); 1 MiB for Zen
  // 4 and 5, Skylake-SP to Ice Lake, and any name not listed (psABI levels
  // included), the size the cache-blocking defaults were first measured on.
  int64_t L2Bytes() const;
  // Architectural vector registers: 32 with AVX-512, else 16.
  int NumVectorRegisters() const { return VectorBits() == 512 ? 32 : 16; }
  bool HasFeature(const std::string& name) const;  // "avx512f" -> is "+avx512f" present

  bool operator==(const CpuTarget& o) const {
    return triple == o.triple && cpu == o.cpu && features == o.features;
  }
};

// The CPU name for a host whose CPUID reports `reported` (LLVM's name for its
// family and model) and whose features are `features` (CpuTarget::features).
// A virtual machine's model number may not be the cores it runs on: a KVM
// guest on Sapphire Rapids cores has read family 6 model 167, which LLVM names
// rocketlake (a client core: 512 KiB of L2, 512-bit operations in halves),
// with AMX tiles and AVX512-FP16 among its features. The features are the
// cores' own, and AMX exists only on Intel's server cores from Sapphire
// Rapids on: where they have AMX tiles and `reported` has none, the name is
// graniterapids (with AMX-FP16) or sapphirerapids, so that the defaults know
// the caches and FMA units (L2Bytes, NativeVectorBits) and the records the
// cores. Any other name is kept.
std::string CpuNameForFeatures(const std::string& reported, const std::string& features);

// A CUDA GPU, by compute capability: code generated for it (PTX for its
// sm_XY, cubin assembled for it) runs on that SM version; PTX also runs on
// newer ones, through the driver's JIT.
struct GpuTarget {
  int sm = 80;  // major * 10 + minor: 75, 80, 86, 87, 89, 90

  // "sm_90", "cuda:sm_90" or "cuda/sm_90". INVALID_ARGUMENT naming the SM
  // versions Kiln generates code for, for any other.
  static absl::StatusOr<GpuTarget> Named(const std::string& name);
  // "sm_90": the LLVM NVPTX CPU and ptxas's --gpu-name.
  std::string Arch() const;
  // "cuda/sm_90". Two targets with the same key compile identical code.
  std::string Key() const;

  bool operator==(const GpuTarget& o) const { return sm == o.sm; }
};

// What a compile, a schedule space or a measurement is for: a CPU or a CUDA
// GPU. Converts implicitly from either, so that code written for CPUs takes
// one unchanged.
class Target {
 public:
  Target() = default;  // an unnamed CPU (CpuTarget{})
  Target(CpuTarget cpu) : cpu_(std::move(cpu)) {}  // NOLINT(google-explicit-constructor)
  Target(GpuTarget gpu) : gpu_(gpu), is_gpu_(true) {}  // NOLINT(google-explicit-constructor)

  // A target by name, without a farm: "" or "cpu" (this host), "cpu:NAME"
  // or NAME (CpuTarget::Named), "cuda:sm_XY" (GpuTarget::Named).
  // INVALID_ARGUMENT for anything else, "cuda" alone included (which GPU
  // that is, only a farm knows).
  static absl::StatusOr<Target> Named(const std::string& name);

  bool is_gpu() const { return is_gpu_; }
  // The CPU (is_gpu() false) or the GPU (true); asking for the other is a
  // programming error (asserted).
  const CpuTarget& cpu() const;
  const GpuTarget& gpu() const;
  // CpuTarget::Key() or GpuTarget::Key().
  std::string Key() const;

  bool operator==(const Target& o) const {
    return is_gpu_ == o.is_gpu_ && (is_gpu_ ? gpu_ == o.gpu_ : cpu_ == o.cpu_);
  }

 private:
  CpuTarget cpu_;
  GpuTarget gpu_;
  bool is_gpu_ = false;
};

}  // namespace kiln
