// FakeCudaDriver: the driver API over host memory, kernels by CPU emulation.
#include "tests/client/runtime/fake_cuda/fake_cuda_driver.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"

namespace kiln::testing {
namespace {

using runtime::cu::DevicePtr;
using Result = runtime::cu::Result;

constexpr Result kSuccess = 0;
constexpr Result kInvalidValue = 1;       // CUDA_ERROR_INVALID_VALUE
constexpr Result kOutOfMemory = 2;        // CUDA_ERROR_OUT_OF_MEMORY
constexpr Result kInvalidDevice = 101;    // CUDA_ERROR_INVALID_DEVICE
constexpr Result kInvalidImage = 200;     // CUDA_ERROR_INVALID_IMAGE
constexpr Result kUnsupportedPtxVersion = 222;  // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
constexpr Result kInvalidContext = 201;   // CUDA_ERROR_INVALID_CONTEXT
constexpr Result kInvalidHandle = 400;    // CUDA_ERROR_INVALID_HANDLE
constexpr Result kNotFound = 500;         // CUDA_ERROR_NOT_FOUND
constexpr Result kLaunchFailed = 719;     // CUDA_ERROR_LAUNCH_FAILED

struct Kernel {
  std::shared_ptr<const JitKernel> kernel;
  loop_ir::GpuLaunch launch;
  std::vector<int64_t> arg_bytes;
};

struct State {
  FakeCudaDriver::Options options;
  std::map<DevicePtr, size_t> device;  // allocation start -> bytes
  std::set<void*> pinned;
  std::vector<std::string> function_names;  // a CUfunction is its index + 1
  std::map<std::string, Kernel> kernels;
  std::set<void*> streams, events, modules;
  int depth = 0;
  int retained = 0;
  bool fail_next_allocation = false;
  FakeCudaDriver::Counts counts;
  std::vector<std::string> misuse;
};

State* g = nullptr;

void Misuse(std::string what) { g->misuse.push_back(std::move(what)); }

bool NeedContext(const char* call) {
  if (g->depth > 0) return true;
  Misuse(absl::StrCat(call, " without a current context"));
  return false;
}

runtime::cu::Context ContextOf(int device) {
  return reinterpret_cast<runtime::cu::Context>(static_cast<uintptr_t>(0x1000 + device));
}

// Whether [ptr, ptr + bytes) lies inside one live device allocation.
bool InDeviceMemory(DevicePtr ptr, int64_t bytes) {
  auto it = g->device.upper_bound(ptr);
  if (it == g->device.begin()) return false;
  --it;
  return ptr >= it->first && ptr + static_cast<DevicePtr>(bytes) <= it->first + it->second;
}

void* NewHandle() { return std::malloc(1); }

Result Init(unsigned flags) { return flags == 0 ? kSuccess : kInvalidValue; }
Result DriverGetVersion(int* v) {
  *v = 13000;
  return kSuccess;
}

const char* ErrorName(Result e) {
  switch (e) {
    case kSuccess: return "CUDA_SUCCESS";
    case kInvalidValue: return "CUDA_ERROR_INVALID_VALUE";
    case kOutOfMemory: return "CUDA_ERROR_OUT_OF_MEMORY";
    case kInvalidDevice: return "CUDA_ERROR_INVALID_DEVICE";
    case kInvalidImage: return "CUDA_ERROR_INVALID_IMAGE";
    case kUnsupportedPtxVersion: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case kInvalidContext: return "CUDA_ERROR_INVALID_CONTEXT";
    case kInvalidHandle: return "CUDA_ERROR_INVALID_HANDLE";
    case kNotFound: return "CUDA_ERROR_NOT_FOUND";
    case kLaunchFailed: return "CUDA_ERROR_LAUNCH_FAILED";
    default: return nullptr;
  }
}
Result GetErrorName(Result e, const char** s) {
  *s = ErrorName(e);
  return *s != nullptr ? kSuccess : kInvalidValue;
}
Result GetErrorString(Result e, const char** s) {
  *s = ErrorName(e) != nullptr ? "as the fake driver says" : nullptr;
  return *s != nullptr ? kSuccess : kInvalidValue;
}

Result DeviceGetCount(int* n) {
  *n = g->options.devices;
  return kSuccess;
}
Result DeviceGet(runtime::cu::Device* d, int ordinal) {
  if (ordinal < 0 || ordinal >= g->options.devices) return kInvalidDevice;
  *d = ordinal;
  return kSuccess;
}
Result DeviceGetName(char* name, int length, runtime::cu::Device d) {
  std::snprintf(name, static_cast<size_t>(length), "Kiln fake GPU");
  return kSuccess;
}
Result DeviceGetAttribute(int* value, int attribute, runtime::cu::Device d) {
  if (attribute == runtime::cu::kComputeCapabilityMajor) {
    *value = g->options.sm / 10;
  } else if (attribute == runtime::cu::kComputeCapabilityMinor) {
    *value = g->options.sm % 10;
  } else {
    return kInvalidValue;
  }
  return kSuccess;
}
Result PrimaryCtxRetain(runtime::cu::Context* c, runtime::cu::Device d) {
  if (d < 0 || d >= g->options.devices) return kInvalidDevice;
  ++g->retained;
  *c = ContextOf(d);
  return kSuccess;
}
Result PrimaryCtxRelease(runtime::cu::Device d) {
  if (--g->retained < 0) Misuse("cuDevicePrimaryCtxRelease without a retain");
  return kSuccess;
}
Result CtxPush(runtime::cu::Context c) {
  if (c != ContextOf(0) && c != ContextOf(1)) return kInvalidContext;
  ++g->depth;
  return kSuccess;
}
Result CtxPop(runtime::cu::Context* c) {
  if (g->depth == 0) {
    Misuse("cuCtxPopCurrent with no context pushed");
    return kInvalidContext;
  }
  --g->depth;
  *c = ContextOf(0);
  return kSuccess;
}

Result ModuleLoadDataEx(runtime::cu::Module* m, const void* image, unsigned n, int* options, void** values) {
  if (!NeedContext("cuModuleLoadDataEx")) return kInvalidContext;
  const char* bytes = static_cast<const char*>(image);
  if (std::memcmp(bytes, "\x7f" "ELF", 4) == 0) {
    if (g->options.refuse_cubin) return kUnsupportedPtxVersion;
    ++g->counts.modules_from_cubin;
  } else if (std::strstr(bytes, ".version") != nullptr && std::strstr(bytes, ".target") != nullptr) {
    // PTX: every module starts with .version and .target. A module without
    // a kernel (a package whose outputs are all constants has no steps) is
    // valid PTX: ptxas assembles it, and the driver loads it.
    ++g->counts.modules_from_ptx;
  } else {
    return kInvalidImage;
  }
  *m = static_cast<runtime::cu::Module>(NewHandle());
  g->modules.insert(*m);
  return kSuccess;
}
Result ModuleUnload(runtime::cu::Module m) {
  if (!NeedContext("cuModuleUnload")) return kInvalidContext;
  if (g->modules.erase(m) == 0) return kInvalidHandle;
  std::free(m);
  return kSuccess;
}
Result ModuleGetFunction(runtime::cu::Function* f, runtime::cu::Module m, const char* name) {
  if (g->modules.count(m) == 0) return kInvalidHandle;
  if (g->kernels.count(name) == 0) return kNotFound;
  for (size_t i = 0; i < g->function_names.size(); ++i) {
    if (g->function_names[i] == name) {
      *f = reinterpret_cast<runtime::cu::Function>(i + 1);
      return kSuccess;
    }
  }
  g->function_names.push_back(name);
  *f = reinterpret_cast<runtime::cu::Function>(g->function_names.size());
  return kSuccess;
}

Result MemAlloc(DevicePtr* p, size_t bytes) {
  if (!NeedContext("cuMemAlloc")) return kInvalidContext;
  if (bytes == 0) return kInvalidValue;
  if (g->fail_next_allocation) {
    g->fail_next_allocation = false;
    return kOutOfMemory;
  }
  void* mem = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  // Device memory starts as garbage: what the runtime reads without writing shows.
  std::memset(mem, 0xA5, bytes);
  *p = reinterpret_cast<DevicePtr>(mem);
  g->device[*p] = bytes;
  return kSuccess;
}
Result MemFree(DevicePtr p) {
  if (!NeedContext("cuMemFree")) return kInvalidContext;
  if (g->device.erase(p) == 0) {
    Misuse(absl::StrCat("cuMemFree of ", p, ", which is not an allocation"));
    return kInvalidValue;
  }
  std::free(reinterpret_cast<void*>(p));
  return kSuccess;
}
Result MemAllocHost(void** p, size_t bytes) {
  if (!NeedContext("cuMemAllocHost")) return kInvalidContext;
  *p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  g->pinned.insert(*p);
  return kSuccess;
}
Result MemFreeHost(void* p) {
  if (!NeedContext("cuMemFreeHost")) return kInvalidContext;
  if (g->pinned.erase(p) == 0) {
    Misuse("cuMemFreeHost of memory it did not allocate");
    return kInvalidValue;
  }
  std::free(p);
  return kSuccess;
}
Result MemcpyHtoD(DevicePtr dst, const void* src, size_t bytes) {
  if (!NeedContext("cuMemcpyHtoD")) return kInvalidContext;
  if (!InDeviceMemory(dst, static_cast<int64_t>(bytes)) || src == nullptr) {
    Misuse(absl::StrCat("cuMemcpyHtoD of ", bytes, " bytes outside device memory"));
    return kInvalidValue;
  }
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  g->counts.bytes_to_device += static_cast<int64_t>(bytes);
  return kSuccess;
}
bool KnownStream(runtime::cu::Stream s, const char* call) {
  if (g->streams.count(s) > 0) return true;
  Misuse(absl::StrCat(call, " on an unknown stream"));
  return false;
}
Result MemcpyHtoDAsync(DevicePtr dst, const void* src, size_t bytes, runtime::cu::Stream s) {
  if (!KnownStream(s, "cuMemcpyHtoDAsync")) return kInvalidHandle;
  return MemcpyHtoD(dst, src, bytes);
}
Result MemcpyDtoHAsync(void* dst, DevicePtr src, size_t bytes, runtime::cu::Stream s) {
  if (!NeedContext("cuMemcpyDtoHAsync")) return kInvalidContext;
  if (!KnownStream(s, "cuMemcpyDtoHAsync")) return kInvalidHandle;
  if (!InDeviceMemory(src, static_cast<int64_t>(bytes)) || dst == nullptr) {
    Misuse(absl::StrCat("cuMemcpyDtoHAsync of ", bytes, " bytes outside device memory"));
    return kInvalidValue;
  }
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  g->counts.bytes_to_host += static_cast<int64_t>(bytes);
  return kSuccess;
}
Result MemsetD8(DevicePtr dst, unsigned char value, size_t bytes) {
  if (!NeedContext("cuMemsetD8")) return kInvalidContext;
  if (!InDeviceMemory(dst, static_cast<int64_t>(bytes))) {
    Misuse("cuMemsetD8 outside device memory");
    return kInvalidValue;
  }
  std::memset(reinterpret_cast<void*>(dst), value, bytes);
  return kSuccess;
}
Result CtxSynchronize() { return NeedContext("cuCtxSynchronize") ? kSuccess : kInvalidContext; }
Result MemsetD8Async(DevicePtr dst, unsigned char value, size_t bytes, runtime::cu::Stream s) {
  if (!NeedContext("cuMemsetD8Async")) return kInvalidContext;
  if (!KnownStream(s, "cuMemsetD8Async")) return kInvalidHandle;
  if (!InDeviceMemory(dst, static_cast<int64_t>(bytes))) {
    Misuse("cuMemsetD8Async outside device memory");
    return kInvalidValue;
  }
  std::memset(reinterpret_cast<void*>(dst), value, bytes);
  return kSuccess;
}
Result PointerGetAttribute(void* data, int attribute, DevicePtr ptr) {
  auto it = g->device.upper_bound(ptr);
  if (it == g->device.begin()) return kInvalidValue;
  --it;
  if (ptr >= it->first + it->second) return kInvalidValue;
  switch (attribute) {
    case runtime::cu::kPointerAttributeRangeStartAddr:
      *static_cast<DevicePtr*>(data) = it->first;
      return kSuccess;
    case runtime::cu::kPointerAttributeRangeSize:
      *static_cast<size_t*>(data) = it->second;
      return kSuccess;
    case runtime::cu::kPointerAttributeDeviceOrdinal:
      *static_cast<int*>(data) = 0;
      return kSuccess;
    default:
      return kInvalidValue;
  }
}

Result LaunchKernel(runtime::cu::Function f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                    unsigned bz, unsigned shared, runtime::cu::Stream s, void** params, void** extra) {
  if (!NeedContext("cuLaunchKernel")) return kInvalidContext;
  if (!KnownStream(s, "cuLaunchKernel")) return kInvalidHandle;
  const size_t index = reinterpret_cast<size_t>(f);
  if (index == 0 || index > g->function_names.size()) return kInvalidHandle;
  const std::string& name = g->function_names[index - 1];
  const Kernel& k = g->kernels.at(name);
  if (gx != static_cast<unsigned>(k.launch.blocks) || gy != 1 || gz != 1 ||
      bx != static_cast<unsigned>(k.launch.threads) || by != 1 || bz != 1 || shared != 0 || extra != nullptr) {
    Misuse(absl::StrCat(name, ": launched as ", gx, "x", gy, "x", gz, " blocks of ", bx, "x", by, "x", bz,
                        " threads with ", shared, " dynamic shared bytes; the kernel is ", k.launch.blocks,
                        " blocks of ", k.launch.threads));
    return kInvalidValue;
  }
  if (gx != static_cast<unsigned>(k.kernel->num_tasks())) {
    Misuse(absl::StrCat(name, ": ", gx, " blocks but its emulation has ", k.kernel->num_tasks(), " tasks"));
    return kInvalidValue;
  }
  std::vector<void*> args;
  for (size_t a = 0; a < k.arg_bytes.size(); ++a) {
    const DevicePtr p = *static_cast<const DevicePtr*>(params[a]);
    if (!InDeviceMemory(p, k.arg_bytes[a]) || p % 16 != 0) {
      Misuse(absl::StrCat(name, ": argument ", a, " (", k.arg_bytes[a], " bytes at ", p,
                          ") is not aligned device memory"));
      return kLaunchFailed;
    }
    args.push_back(reinterpret_cast<void*>(p));
  }
  k.kernel->Run(args.data(), 0, gx);
  ++g->counts.launches;
  g->counts.launch_streams.push_back(s);
  return kSuccess;
}

Result StreamCreate(runtime::cu::Stream* s, unsigned flags) {
  if (!NeedContext("cuStreamCreate")) return kInvalidContext;
  *s = static_cast<runtime::cu::Stream>(NewHandle());
  g->streams.insert(*s);
  return kSuccess;
}
Result StreamDestroy(runtime::cu::Stream s) {
  if (!NeedContext("cuStreamDestroy")) return kInvalidContext;
  if (g->streams.erase(s) == 0) {
    Misuse("cuStreamDestroy of an unknown stream");
    return kInvalidHandle;
  }
  std::free(s);
  return kSuccess;
}
Result StreamSynchronize(runtime::cu::Stream s) {
  if (!NeedContext("cuStreamSynchronize")) return kInvalidContext;
  return KnownStream(s, "cuStreamSynchronize") ? kSuccess : kInvalidHandle;
}
Result EventCreate(runtime::cu::Event* e, unsigned flags) {
  if (!NeedContext("cuEventCreate")) return kInvalidContext;
  *e = static_cast<runtime::cu::Event>(NewHandle());
  g->events.insert(*e);
  return kSuccess;
}
Result EventDestroy(runtime::cu::Event e) {
  if (!NeedContext("cuEventDestroy")) return kInvalidContext;
  if (g->events.erase(e) == 0) return kInvalidHandle;
  std::free(e);
  return kSuccess;
}
Result EventRecord(runtime::cu::Event e, runtime::cu::Stream s) {
  if (!NeedContext("cuEventRecord")) return kInvalidContext;
  if (g->events.count(e) == 0) return kInvalidHandle;
  return KnownStream(s, "cuEventRecord") ? kSuccess : kInvalidHandle;
}
Result EventSynchronize(runtime::cu::Event e) {
  if (!NeedContext("cuEventSynchronize")) return kInvalidContext;
  return g->events.count(e) > 0 ? kSuccess : kInvalidHandle;
}
Result EventElapsedTime(float* ms, runtime::cu::Event a, runtime::cu::Event b) {
  if (!NeedContext("cuEventElapsedTime")) return kInvalidContext;
  if (g->events.count(a) == 0 || g->events.count(b) == 0) return kInvalidHandle;
  *ms = 0.5f;
  return kSuccess;
}

runtime::CudaEntryPoints EntryPoints() {
  runtime::CudaEntryPoints a;
  a.cuInit = Init;
  a.cuDriverGetVersion = DriverGetVersion;
  a.cuGetErrorName = GetErrorName;
  a.cuGetErrorString = GetErrorString;
  a.cuDeviceGetCount = DeviceGetCount;
  a.cuDeviceGet = DeviceGet;
  a.cuDeviceGetName = DeviceGetName;
  a.cuDeviceGetAttribute = DeviceGetAttribute;
  a.cuDevicePrimaryCtxRetain = PrimaryCtxRetain;
  a.cuDevicePrimaryCtxRelease = PrimaryCtxRelease;
  a.cuCtxPushCurrent = CtxPush;
  a.cuCtxPopCurrent = CtxPop;
  a.cuCtxSynchronize = CtxSynchronize;
  a.cuModuleLoadDataEx = ModuleLoadDataEx;
  a.cuModuleUnload = ModuleUnload;
  a.cuModuleGetFunction = ModuleGetFunction;
  a.cuMemAlloc = MemAlloc;
  a.cuMemFree = MemFree;
  a.cuMemAllocHost = MemAllocHost;
  a.cuMemFreeHost = MemFreeHost;
  a.cuMemcpyHtoD = MemcpyHtoD;
  a.cuMemcpyHtoDAsync = MemcpyHtoDAsync;
  a.cuMemcpyDtoHAsync = MemcpyDtoHAsync;
  a.cuMemsetD8 = MemsetD8;
  a.cuMemsetD8Async = MemsetD8Async;
  a.cuPointerGetAttribute = PointerGetAttribute;
  a.cuLaunchKernel = LaunchKernel;
  a.cuStreamCreate = StreamCreate;
  a.cuStreamDestroy = StreamDestroy;
  a.cuStreamSynchronize = StreamSynchronize;
  a.cuEventCreate = EventCreate;
  a.cuEventDestroy = EventDestroy;
  a.cuEventRecord = EventRecord;
  a.cuEventSynchronize = EventSynchronize;
  a.cuEventElapsedTime = EventElapsedTime;
  return a;
}

}  // namespace

FakeCudaDriver::FakeCudaDriver(Options options) {
  if (g != nullptr) std::abort();  // one at a time
  g = new State();
  g->options = options;
  auto driver = runtime::CudaDriver::FromEntryPoints(EntryPoints(), "fake libcuda");
  if (!driver.ok()) std::abort();
  driver_ = std::move(*driver);
}

FakeCudaDriver::~FakeCudaDriver() {
  for (const auto& [p, bytes] : g->device) std::free(reinterpret_cast<void*>(p));
  for (void* p : g->pinned) std::free(p);
  for (void* p : g->streams) std::free(p);
  for (void* p : g->events) std::free(p);
  for (void* p : g->modules) std::free(p);
  delete g;
  g = nullptr;
}

void FakeCudaDriver::AddKernel(const std::string& symbol, std::shared_ptr<const JitKernel> kernel,
                               loop_ir::GpuLaunch launch, std::vector<int64_t> arg_bytes) {
  g->kernels[symbol] = Kernel{std::move(kernel), launch, std::move(arg_bytes)};
}

uint64_t FakeCudaDriver::Allocate(size_t bytes) {
  ++g->depth;
  DevicePtr p = 0;
  (void)MemAlloc(&p, bytes);
  --g->depth;
  return p;
}

void FakeCudaDriver::Free(uint64_t ptr) {
  ++g->depth;
  (void)MemFree(ptr);
  --g->depth;
}

void* FakeCudaDriver::CreateStream() {
  ++g->depth;
  runtime::cu::Stream s = nullptr;
  (void)StreamCreate(&s, runtime::cu::kStreamNonBlocking);
  --g->depth;
  return s;
}

void FakeCudaDriver::DestroyStream(void* stream) {
  ++g->depth;
  (void)StreamDestroy(static_cast<runtime::cu::Stream>(stream));
  --g->depth;
}

void FakeCudaDriver::FailNextAllocation() { g->fail_next_allocation = true; }
const FakeCudaDriver::Counts& FakeCudaDriver::counts() const { return g->counts; }
void FakeCudaDriver::ResetCounts() { g->counts = Counts(); }
int FakeCudaDriver::live_allocations() const {
  return static_cast<int>(g->device.size() + g->pinned.size() + g->modules.size() + g->events.size() +
                          g->streams.size());
}
int FakeCudaDriver::retained_contexts() const { return g->retained; }
int FakeCudaDriver::context_depth() const { return g->depth; }
const std::vector<std::string>& FakeCudaDriver::misuse() const { return g->misuse; }

}  // namespace kiln::testing
