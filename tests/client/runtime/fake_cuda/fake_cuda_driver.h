// A CUDA driver for the runtime's tests on machines without a GPU: every
// entry point of client/runtime/cuda_driver.h over host memory, where a
// device pointer is a host address and a launch runs the kernel's CPU
// emulation (compiler_core/codegen/loop_ir/gpu_emulation.h) registered under
// its symbol. It checks how it is used as the real driver would fail on
// misuse: calls that need a context without one current, launches whose grid,
// block or shared memory differ from the kernel's, arguments outside live
// device memory or misaligned, copies outside allocations, frees of unknown
// pointers. The real path is the same code against libcuda.so.1 on a GPU host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/runtime/cuda_driver.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"

namespace kiln::testing {

// One at a time per process (the driver API has no user data: the entry
// points reach the fake through a global).
class FakeCudaDriver {
 public:
  struct Options {
    int sm = 90;       // every device's compute capability, major * 10 + minor
    int devices = 1;
    // Refuse cubins as a driver older than the toolkit that made them does
    // (CUDA_ERROR_UNSUPPORTED_PTX_VERSION); PTX still loads.
    bool refuse_cubin = false;
  };
  explicit FakeCudaDriver(Options options);
  ~FakeCudaDriver();
  FakeCudaDriver(const FakeCudaDriver&) = delete;
  FakeCudaDriver& operator=(const FakeCudaDriver&) = delete;

  const runtime::CudaDriver* driver() const { return driver_.get(); }

  // The kernel `symbol`: its CPU emulation (one task per block), the launch
  // the package must give it, and the bytes of each argument.
  void AddKernel(const std::string& symbol, std::shared_ptr<const JitKernel> kernel, loop_ir::GpuLaunch launch,
                 std::vector<int64_t> arg_bytes);

  // Device memory for a test (as cuMemAlloc gives it: 256-byte aligned).
  uint64_t Allocate(size_t bytes);
  void Free(uint64_t ptr);
  // A stream the test owns, of device 0's context.
  void* CreateStream();
  void DestroyStream(void* stream);
  // The next cuMemAlloc fails with CUDA_ERROR_OUT_OF_MEMORY.
  void FailNextAllocation();

  // What happened.
  struct Counts {
    int modules_from_ptx = 0;
    int modules_from_cubin = 0;
    int launches = 0;
    int64_t bytes_to_device = 0;  // cuMemcpyHtoD*
    int64_t bytes_to_host = 0;    // cuMemcpyDtoH*
    std::vector<void*> launch_streams;
  };
  const Counts& counts() const;
  void ResetCounts();
  // Allocations, retained contexts and pushed contexts still live; what a
  // runtime that cleans up leaves is all zero.
  int live_allocations() const;
  int retained_contexts() const;
  int context_depth() const;
  // Every misuse seen, in order (empty: none).
  const std::vector<std::string>& misuse() const;

 private:
  std::unique_ptr<runtime::CudaDriver> driver_;
};

}  // namespace kiln::testing
