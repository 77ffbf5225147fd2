// The CUDA driver API, loaded at run time: dlopen("libcuda.so.1") and the
// entry points the runtime uses, so libkiln_runtime links no CUDA library and
// a host without a GPU or driver still loads and runs CPU packages.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "client/runtime/status.h"

// The driver's opaque handle types, under cuda.h's own names, so that these
// declarations and the toolkit's are the same types (the runtime builds
// without the toolkit; tests/client/runtime/cuda_driver_test.cc checks the
// values below against cuda.h where there is one).
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;

namespace kiln::runtime {

namespace cu {
using Result = int;                    // CUresult (an enum of int)
using Device = int;                    // CUdevice
using DevicePtr = unsigned long long;  // CUdeviceptr (64-bit)
using Context = CUctx_st*;             // CUcontext
using Module = CUmod_st*;              // CUmodule
using Function = CUfunc_st*;           // CUfunction
using Stream = CUstream_st*;           // CUstream
using Event = CUevent_st*;             // CUevent

inline constexpr Result kSuccess = 0;                 // CUDA_SUCCESS
inline constexpr Result kErrorOutOfMemory = 2;        // CUDA_ERROR_OUT_OF_MEMORY
inline constexpr Result kErrorNoDevice = 100;         // CUDA_ERROR_NO_DEVICE
inline constexpr int kComputeCapabilityMajor = 75;    // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
inline constexpr int kComputeCapabilityMinor = 76;    // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
inline constexpr int kJitErrorLogBuffer = 5;          // CU_JIT_ERROR_LOG_BUFFER
inline constexpr int kJitErrorLogBufferSizeBytes = 6; // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
inline constexpr unsigned kStreamNonBlocking = 0x1;   // CU_STREAM_NON_BLOCKING
inline constexpr unsigned kEventDefault = 0x0;        // CU_EVENT_DEFAULT
inline constexpr unsigned kEventDisableTiming = 0x2;  // CU_EVENT_DISABLE_TIMING
inline constexpr int kPointerAttributeDeviceOrdinal = 9;   // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
inline constexpr int kPointerAttributeRangeStartAddr = 11; // CU_POINTER_ATTRIBUTE_RANGE_START_ADDR
inline constexpr int kPointerAttributeRangeSize = 12;      // CU_POINTER_ATTRIBUTE_RANGE_SIZE
}  // namespace cu

// The entry points, by the exported symbol each is resolved from (the
// versioned names cuda.h's macros select: cuMemAlloc is cuMemAlloc_v2).
// Enum arguments (CUdevice_attribute, CUjit_option, CUpointer_attribute)
// are ints, as the C ABI passes them.
struct CudaEntryPoints {
  cu::Result (*cuInit)(unsigned flags) = nullptr;
  cu::Result (*cuDriverGetVersion)(int* version) = nullptr;
  cu::Result (*cuGetErrorName)(cu::Result error, const char** name) = nullptr;
  cu::Result (*cuGetErrorString)(cu::Result error, const char** text) = nullptr;
  cu::Result (*cuDeviceGetCount)(int* count) = nullptr;
  cu::Result (*cuDeviceGet)(cu::Device* device, int ordinal) = nullptr;
  cu::Result (*cuDeviceGetName)(char* name, int length, cu::Device device) = nullptr;
  cu::Result (*cuDeviceGetAttribute)(int* value, int attribute, cu::Device device) = nullptr;
  cu::Result (*cuDevicePrimaryCtxRetain)(cu::Context* context, cu::Device device) = nullptr;
  cu::Result (*cuDevicePrimaryCtxRelease)(cu::Device device) = nullptr;  // _v2
  cu::Result (*cuCtxPushCurrent)(cu::Context context) = nullptr;         // _v2
  cu::Result (*cuCtxPopCurrent)(cu::Context* context) = nullptr;         // _v2
  cu::Result (*cuCtxSynchronize)() = nullptr;
  cu::Result (*cuModuleLoadDataEx)(cu::Module* module, const void* image, unsigned num_options, int* options,
                                   void** option_values) = nullptr;
  cu::Result (*cuModuleUnload)(cu::Module module) = nullptr;
  cu::Result (*cuModuleGetFunction)(cu::Function* function, cu::Module module, const char* name) = nullptr;
  cu::Result (*cuMemAlloc)(cu::DevicePtr* ptr, size_t bytes) = nullptr;  // _v2
  cu::Result (*cuMemFree)(cu::DevicePtr ptr) = nullptr;                  // _v2
  cu::Result (*cuMemAllocHost)(void** ptr, size_t bytes) = nullptr;      // _v2
  cu::Result (*cuMemFreeHost)(void* ptr) = nullptr;
  cu::Result (*cuMemcpyHtoD)(cu::DevicePtr dst, const void* src, size_t bytes) = nullptr;  // _v2
  cu::Result (*cuMemcpyHtoDAsync)(cu::DevicePtr dst, const void* src, size_t bytes,
                                  cu::Stream stream) = nullptr;  // _v2
  cu::Result (*cuMemcpyDtoHAsync)(void* dst, cu::DevicePtr src, size_t bytes,
                                  cu::Stream stream) = nullptr;  // _v2
  cu::Result (*cuMemsetD8)(cu::DevicePtr dst, unsigned char value, size_t bytes) = nullptr;  // _v2
  cu::Result (*cuMemsetD8Async)(cu::DevicePtr dst, unsigned char value, size_t bytes, cu::Stream stream) = nullptr;
  cu::Result (*cuPointerGetAttribute)(void* data, int attribute, cu::DevicePtr ptr) = nullptr;
  cu::Result (*cuLaunchKernel)(cu::Function function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                               unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                               cu::Stream stream, void** params, void** extra) = nullptr;
  cu::Result (*cuStreamCreate)(cu::Stream* stream, unsigned flags) = nullptr;
  cu::Result (*cuStreamDestroy)(cu::Stream stream) = nullptr;  // _v2
  cu::Result (*cuStreamSynchronize)(cu::Stream stream) = nullptr;
  cu::Result (*cuEventCreate)(cu::Event* event, unsigned flags) = nullptr;
  cu::Result (*cuEventDestroy)(cu::Event event) = nullptr;  // _v2
  cu::Result (*cuEventRecord)(cu::Event event, cu::Stream stream) = nullptr;
  cu::Result (*cuEventSynchronize)(cu::Event event) = nullptr;
  cu::Result (*cuEventElapsedTime)(float* ms, cu::Event start, cu::Event end) = nullptr;
};

// A loaded and initialised CUDA driver. Thread-safe (the driver API is).
class CudaDriver {
 public:
  // The process's driver: libcuda.so.1 loaded, its entry points resolved and
  // cuInit(0) called on first use, then shared and never unloaded (the
  // outcome, failure included, is kept). FAILED_PRECONDITION whose message
  // says what is missing, phrased to follow "this package is for a CUDA GPU
  // (sm_90) and ": "no CUDA driver could be loaded: <dlerror>", "the CUDA
  // driver libcuda.so.1 has no cuLaunchKernel (...)", "the CUDA driver could
  // not be initialised: cuInit: CUDA_ERROR_NO_DEVICE (...)".
  static Result<const CudaDriver*> Get();
  // The driver in the library at `path` (a test's stub or fake, or a driver
  // outside the loader's search path); the library stays loaded for the
  // process's life. Errors as Get().
  static Result<std::unique_ptr<CudaDriver>> Load(const std::string& path);
  // A driver made of the given entry points, none null (tests: a fake
  // driver); cuInit is called as for a loaded one.
  static Result<std::unique_ptr<CudaDriver>> FromEntryPoints(const CudaEntryPoints& api, std::string name);

  const CudaEntryPoints& api() const { return api_; }
  // What it was loaded from ("libcuda.so.1") and the version it reports
  // (cuDriverGetVersion: 12040 for CUDA 12.4).
  const std::string& name() const { return name_; }
  int version() const { return version_; }

  // OK for CUDA_SUCCESS; otherwise the error, named: "cuMemAlloc (4096
  // bytes): CUDA_ERROR_OUT_OF_MEMORY (out of memory)". Out of memory is
  // RESOURCE_EXHAUSTED, anything else INTERNAL.
  Status Check(cu::Result result, const std::string& call) const;
  // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", or "CUresult 2" when the
  // driver names no such code.
  std::string Describe(cu::Result result) const;

 private:
  CudaDriver() = default;
  // Resolves nothing: checks every entry point is set, calls cuInit(0) and
  // cuDriverGetVersion.
  Status Initialize();

  CudaEntryPoints api_;
  std::string name_;
  int version_ = 0;
};

// Pushes `context` onto the calling thread's context stack for the scope,
// as every driver call of the runtime needs: a session may move between
// threads, and the caller's own current context must survive the call.
class ScopedCudaContext {
 public:
  ScopedCudaContext(const CudaDriver& driver, cu::Context context);
  ~ScopedCudaContext();
  ScopedCudaContext(const ScopedCudaContext&) = delete;
  ScopedCudaContext& operator=(const ScopedCudaContext&) = delete;
  // Whether the push succeeded; every call in the scope needs it.
  const Status& status() const { return status_; }

 private:
  const CudaDriver& driver_;
  Status status_;
};

}  // namespace kiln::runtime
