// A CUDA package made resident on one GPU: its kernels loaded into the
// device's primary context and its weights copied to device memory, once,
// for every session of the package on that device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/runtime/cuda_driver.h"
#include "client/runtime/manifest.h"
#include "client/runtime/status.h"

namespace kiln::runtime {

// Loads the cubin when the device's SM is the package's, else the PTX (the
// driver JIT-compiles it: a newer GPU, or a driver older than the toolkit
// that made the cubin, which refuses it); a GPU of an older SM than the
// package's cannot run it (FAILED_PRECONDITION, naming both). Looks up every
// step's kernel, and uploads the weights section as it lies in the file, so
// CONSTANT buffers keep the plan's alignment. Uses the device's primary
// context, the one the CUDA runtime API (cudaMalloc, cudaStream_t) uses, so
// that a caller's device pointers and streams work with the package's
// sessions. Thread-safe after Load; unloads and releases on destruction.
class CudaModule {
 public:
  // `ptx`, `cubin` (empty: none) and `weights` are the package's sections;
  // `name` stands for the package in messages.
  static Result<std::unique_ptr<CudaModule>> Load(const CudaDriver& driver, const Manifest& manifest,
                                                  std::string_view ptx, std::string_view cubin,
                                                  const uint8_t* weights, int ordinal, const std::string& name);
  ~CudaModule();
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;

  const CudaDriver& driver() const { return driver_; }
  cu::Context context() const { return context_; }
  int ordinal() const { return ordinal_; }
  // "CUDA device 0 (NVIDIA H100 80GB HBM3, sm_90)": for messages.
  const std::string& description() const { return description_; }
  // The device's compute capability as the package writes it (90 for 9.0).
  int device_sm() const { return device_sm_; }
  // Whether the module came from the PTX (no cubin for this device's SM).
  bool from_ptx() const { return from_ptx_; }
  // Step `index`'s kernel.
  cu::Function function(int index) const { return functions_[static_cast<size_t>(index)]; }
  // The weights section on the device (0 when the package has none).
  cu::DevicePtr weights() const { return weights_; }

 private:
  explicit CudaModule(const CudaDriver& driver) : driver_(driver) {}

  const CudaDriver& driver_;
  int ordinal_ = 0;
  cu::Device device_ = 0;
  cu::Context context_ = nullptr;  // retained primary context; null until retained
  cu::Module module_ = nullptr;
  cu::DevicePtr weights_ = 0;
  std::vector<cu::Function> functions_;
  std::string description_;
  int device_sm_ = 0;
  bool from_ptx_ = false;
};

// A kernel argument's bytes in device memory: [begin, end) in address space
// `space` (a package's plan has two, its arena and its weights; a session's
// buffers have one, the device's addresses).
struct DeviceRange {
  int space = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// The first two ranges that share a byte, as indices; {-1, -1} when none do.
// The NVPTX kernels mark their pointer arguments noalias, so no two of one
// step's arguments may overlap.
std::pair<int, int> FirstOverlap(const std::vector<DeviceRange>& ranges);

}  // namespace kiln::runtime
