// CudaModule: device checks, module load (cubin or PTX), kernels, weights.
#include "client/runtime/cuda_module.h"

#include <algorithm>
#include <cstring>

namespace kiln::runtime {
namespace {

// The driver's JIT error log, kept for the message when the PTX is refused.
constexpr unsigned kJitLogBytes = 8192;

}  // namespace

Result<std::unique_ptr<CudaModule>> CudaModule::Load(const CudaDriver& driver, const Manifest& manifest,
                                                     std::string_view ptx, std::string_view cubin,
                                                     const uint8_t* weights, int ordinal, const std::string& name) {
  const CudaEntryPoints& cu = driver.api();
  const std::string ctx = Cat("package '", name, "'");
  int count = 0;
  RT_RETURN_IF_ERROR(driver.Check(cu.cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (ordinal < 0 || ordinal >= count) {
    return InvalidArgumentError(Cat(ctx, ": there is no CUDA device ", ordinal, " (this host has ", count,
                                    count == 1 ? " device)" : " devices)"));
  }
  std::unique_ptr<CudaModule> m(new CudaModule(driver));
  m->ordinal_ = ordinal;
  RT_RETURN_IF_ERROR(driver.Check(cu.cuDeviceGet(&m->device_, ordinal), "cuDeviceGet"));
  char device_name[256] = {};
  RT_RETURN_IF_ERROR(
      driver.Check(cu.cuDeviceGetName(device_name, sizeof(device_name) - 1, m->device_), "cuDeviceGetName"));
  int major = 0, minor = 0;
  RT_RETURN_IF_ERROR(driver.Check(cu.cuDeviceGetAttribute(&major, cu::kComputeCapabilityMajor, m->device_),
                                  "cuDeviceGetAttribute (compute capability major)"));
  RT_RETURN_IF_ERROR(driver.Check(cu.cuDeviceGetAttribute(&minor, cu::kComputeCapabilityMinor, m->device_),
                                  "cuDeviceGetAttribute (compute capability minor)"));
  m->device_sm_ = major * 10 + minor;
  m->description_ = Cat("CUDA device ", ordinal, " (", device_name, ", sm_", m->device_sm_, ")");
  const int package_sm = manifest.cuda.sm;
  if (m->device_sm_ < package_sm) {
    return FailedPreconditionError(Cat(ctx, " is for sm_", package_sm, ": ", m->description_,
                                       " is older and cannot run it; compile for cuda:sm_", m->device_sm_));
  }
  m->from_ptx_ = cubin.empty() || m->device_sm_ != package_sm;

  // Handles are kept only once made: the destructor releases what is kept.
  cu::Context context = nullptr;
  RT_RETURN_IF_ERROR(driver.Check(cu.cuDevicePrimaryCtxRetain(&context, m->device_), "cuDevicePrimaryCtxRetain"));
  m->context_ = context;
  ScopedCudaContext scope(driver, m->context_);
  RT_RETURN_IF_ERROR(scope.status());

  // The driver reads PTX as a NUL-terminated string; the section has no NUL.
  const std::string ptx_text(ptx);
  const void* image = m->from_ptx_ ? static_cast<const void*>(ptx_text.c_str()) : cubin.data();
  std::string log(kJitLogBytes, '\0');
  int options[] = {cu::kJitErrorLogBuffer, cu::kJitErrorLogBufferSizeBytes};
  void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(kJitLogBytes))};
  cu::Module module = nullptr;
  cu::Result loaded = cu.cuModuleLoadDataEx(&module, image, 2, options, values);
  if (loaded != cu::kSuccess && loaded != cu::kErrorOutOfMemory && !m->from_ptx_ && !ptx.empty()) {
    // A cubin from a newer toolkit than this driver knows: the PTX, which
    // the driver compiles itself, still runs.
    std::fill(log.begin(), log.end(), '\0');
    loaded = cu.cuModuleLoadDataEx(&module, ptx_text.c_str(), 2, options, values);
    m->from_ptx_ = loaded == cu::kSuccess;
  }
  if (loaded != cu::kSuccess) {
    log.resize(std::strlen(log.c_str()));
    return Status(loaded == cu::kErrorOutOfMemory ? StatusCode::kResourceExhausted : StatusCode::kInternal,
                  Cat(ctx, ": loading its ", m->from_ptx_ ? "PTX" : "cubin", " on ", m->description_,
                      ": cuModuleLoadDataEx: ", driver.Describe(loaded), log.empty() ? "" : "; ", log));
  }
  m->module_ = module;
  for (size_t i = 0; i < manifest.steps.size(); ++i) {
    const std::string& symbol = manifest.steps[i].symbol;
    cu::Function f = nullptr;
    const cu::Result found = cu.cuModuleGetFunction(&f, m->module_, symbol.c_str());
    if (found != cu::kSuccess) {
      return InvalidArgumentError(Cat(ctx, ": step ", i, ": kernel '", symbol, "' is not in the package's ",
                                      m->from_ptx_ ? "PTX" : "cubin", " (", driver.Describe(found), ")"));
    }
    m->functions_.push_back(f);
  }
  const auto weights_bytes = static_cast<size_t>(manifest.weights_size);
  if (weights_bytes > 0) {
    cu::DevicePtr device_weights = 0;
    RT_RETURN_IF_ERROR(driver.Check(cu.cuMemAlloc(&device_weights, weights_bytes),
                                    Cat(ctx, ": cuMemAlloc of its ", weights_bytes, " bytes of weights on ",
                                        m->description_)));
    m->weights_ = device_weights;
    RT_RETURN_IF_ERROR(driver.Check(cu.cuMemcpyHtoD(m->weights_, weights, weights_bytes),
                                    Cat(ctx, ": copying its weights to ", m->description_)));
    // cuMemcpyHtoD from pageable memory may return before its DMA is done,
    // and sessions run on streams that do not wait for the default one.
    RT_RETURN_IF_ERROR(driver.Check(cu.cuCtxSynchronize(), Cat(ctx, ": copying its weights to ", m->description_,
                                                               ": cuCtxSynchronize")));
  }
  return m;
}

CudaModule::~CudaModule() {
  if (context_ == nullptr) return;
  const CudaEntryPoints& cu = driver_.api();
  {
    ScopedCudaContext scope(driver_, context_);
    if (scope.status().ok()) {
      if (weights_ != 0) (void)cu.cuMemFree(weights_);
      if (module_ != nullptr) (void)cu.cuModuleUnload(module_);
    }
  }
  (void)cu.cuDevicePrimaryCtxRelease(device_);
}

std::pair<int, int> FirstOverlap(const std::vector<DeviceRange>& ranges) {
  for (size_t a = 0; a < ranges.size(); ++a) {
    for (size_t b = a + 1; b < ranges.size(); ++b) {
      const DeviceRange& x = ranges[a];
      const DeviceRange& y = ranges[b];
      if (x.space == y.space && x.begin < y.end && y.begin < x.end) {
        return {static_cast<int>(a), static_cast<int>(b)};
      }
    }
  }
  return {-1, -1};
}

}  // namespace kiln::runtime
