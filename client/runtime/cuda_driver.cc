// CudaDriver: dlopen, dlsym of every entry point, cuInit, error names.
#include "client/runtime/cuda_driver.h"

#include <dlfcn.h>

#include <type_traits>

namespace kiln::runtime {
namespace {

// Every entry point with the symbol it is resolved from: the names cuda.h's
// macros map the API to in CUDA 11 and later (cuMemAlloc -> cuMemAlloc_v2).
// cuEventElapsedTime is the original entry point: its _v2 is CUDA 12.8's.
template <typename Fn>
void ForEachEntryPoint(CudaEntryPoints& a, Fn&& fn) {
  fn("cuInit", a.cuInit);
  fn("cuDriverGetVersion", a.cuDriverGetVersion);
  fn("cuGetErrorName", a.cuGetErrorName);
  fn("cuGetErrorString", a.cuGetErrorString);
  fn("cuDeviceGetCount", a.cuDeviceGetCount);
  fn("cuDeviceGet", a.cuDeviceGet);
  fn("cuDeviceGetName", a.cuDeviceGetName);
  fn("cuDeviceGetAttribute", a.cuDeviceGetAttribute);
  fn("cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain);
  fn("cuDevicePrimaryCtxRelease_v2", a.cuDevicePrimaryCtxRelease);
  fn("cuCtxPushCurrent_v2", a.cuCtxPushCurrent);
  fn("cuCtxPopCurrent_v2", a.cuCtxPopCurrent);
  fn("cuCtxSynchronize", a.cuCtxSynchronize);
  fn("cuModuleLoadDataEx", a.cuModuleLoadDataEx);
  fn("cuModuleUnload", a.cuModuleUnload);
  fn("cuModuleGetFunction", a.cuModuleGetFunction);
  fn("cuMemAlloc_v2", a.cuMemAlloc);
  fn("cuMemFree_v2", a.cuMemFree);
  fn("cuMemAllocHost_v2", a.cuMemAllocHost);
  fn("cuMemFreeHost", a.cuMemFreeHost);
  fn("cuMemcpyHtoD_v2", a.cuMemcpyHtoD);
  fn("cuMemcpyHtoDAsync_v2", a.cuMemcpyHtoDAsync);
  fn("cuMemcpyDtoHAsync_v2", a.cuMemcpyDtoHAsync);
  fn("cuMemsetD8_v2", a.cuMemsetD8);
  fn("cuMemsetD8Async", a.cuMemsetD8Async);
  fn("cuPointerGetAttribute", a.cuPointerGetAttribute);
  fn("cuLaunchKernel", a.cuLaunchKernel);
  fn("cuStreamCreate", a.cuStreamCreate);
  fn("cuStreamDestroy_v2", a.cuStreamDestroy);
  fn("cuStreamSynchronize", a.cuStreamSynchronize);
  fn("cuEventCreate", a.cuEventCreate);
  fn("cuEventDestroy_v2", a.cuEventDestroy);
  fn("cuEventRecord", a.cuEventRecord);
  fn("cuEventSynchronize", a.cuEventSynchronize);
  fn("cuEventElapsedTime", a.cuEventElapsedTime);
}

}  // namespace

Result<const CudaDriver*> CudaDriver::Get() {
  // Leaked on purpose: kernels and sessions may still call the driver while
  // static destructors run.
  static const Result<std::unique_ptr<CudaDriver>>* const loaded =
      new Result<std::unique_ptr<CudaDriver>>(Load("libcuda.so.1"));
  if (!loaded->ok()) return loaded->status();
  return static_cast<const CudaDriver*>((**loaded).get());
}

Result<std::unique_ptr<CudaDriver>> CudaDriver::Load(const std::string& path) {
  dlerror();
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return FailedPreconditionError(Cat("no CUDA driver could be loaded: ", why != nullptr ? why : path));
  }
  CudaEntryPoints api;
  std::string missing;
  ForEachEntryPoint(api, [&](const char* symbol, auto& slot) {
    void* p = dlsym(library, symbol);
    if (p == nullptr && missing.empty()) missing = symbol;
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(p);
  });
  if (!missing.empty()) {
    dlclose(library);
    return FailedPreconditionError(
        Cat("the CUDA driver ", path, " has no ", missing, " (Kiln needs a driver of CUDA 11 or later)"));
  }
  // The library stays loaded: the driver keeps threads and handlers of its own.
  return FromEntryPoints(api, path);
}

Result<std::unique_ptr<CudaDriver>> CudaDriver::FromEntryPoints(const CudaEntryPoints& api, std::string name) {
  std::unique_ptr<CudaDriver> driver(new CudaDriver());
  driver->api_ = api;
  driver->name_ = std::move(name);
  RT_RETURN_IF_ERROR(driver->Initialize());
  return driver;
}

Status CudaDriver::Initialize() {
  std::string missing;
  ForEachEntryPoint(api_, [&](const char* symbol, auto& slot) {
    if (slot == nullptr && missing.empty()) missing = symbol;
  });
  if (!missing.empty()) return FailedPreconditionError(Cat("the CUDA driver ", name_, " has no ", missing));
  const cu::Result init = api_.cuInit(0);
  if (init != cu::kSuccess) {
    return FailedPreconditionError(Cat("the CUDA driver could not be initialised: cuInit: ", Describe(init)));
  }
  const cu::Result version = api_.cuDriverGetVersion(&version_);
  if (version != cu::kSuccess) {
    return FailedPreconditionError(Cat("the CUDA driver ", name_, ": cuDriverGetVersion: ", Describe(version)));
  }
  return OkStatus();
}

std::string CudaDriver::Describe(cu::Result result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.cuGetErrorName == nullptr || api_.cuGetErrorName(result, &name) != cu::kSuccess || name == nullptr) {
    return Cat("CUresult ", result);
  }
  if (api_.cuGetErrorString == nullptr || api_.cuGetErrorString(result, &text) != cu::kSuccess || text == nullptr) {
    return name;
  }
  return Cat(name, " (", text, ")");
}

Status CudaDriver::Check(cu::Result result, const std::string& call) const {
  if (result == cu::kSuccess) return OkStatus();
  const StatusCode code = result == cu::kErrorOutOfMemory ? StatusCode::kResourceExhausted : StatusCode::kInternal;
  return Status(code, Cat(call, ": ", Describe(result)));
}

ScopedCudaContext::ScopedCudaContext(const CudaDriver& driver, cu::Context context) : driver_(driver) {
  status_ = driver_.Check(driver_.api().cuCtxPushCurrent(context), "cuCtxPushCurrent");
}

ScopedCudaContext::~ScopedCudaContext() {
  if (!status_.ok()) return;
  cu::Context popped = nullptr;
  (void)driver_.api().cuCtxPopCurrent(&popped);
}

}  // namespace kiln::runtime
