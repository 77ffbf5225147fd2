// GpuMeasurer: PTX, module, device buffers, check, CUDA-event timing.
#include "worker/gpu_measurer.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/runtime/absl_interop.h"
#include "compiler_core/codegen/ptx_emitter.h"
#include "compiler_core/frontend/graph_proto.h"
#include "worker/device_info.h"
#include "worker/measurer.h"

namespace kiln::worker {
namespace {

namespace cu = runtime::cu;

constexpr int kAttrL2CacheSize = 38;  // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
constexpr char kSymbol[] = "kiln_candidate";

kiln::v1::MeasureResult Failure(const kiln::v1::MeasureTask& task, kiln::v1::MeasureError error,
                                std::string message) {
  return FailedMeasurement(task.task_id(), error, std::move(message));
}

// Device memory freed on scope exit.
class DeviceBuffers {
 public:
  explicit DeviceBuffers(const runtime::CudaDriver& driver) : driver_(driver) {}
  ~DeviceBuffers() {
    for (cu::DevicePtr p : ptrs_) driver_.api().cuMemFree(p);
  }
  absl::StatusOr<cu::DevicePtr> Allocate(size_t bytes) {
    cu::DevicePtr p = 0;
    RETURN_IF_ERROR(runtime::ToAbsl(driver_.Check(driver_.api().cuMemAlloc(&p, std::max<size_t>(bytes, 1)),
                                                  absl::StrCat("cuMemAlloc (", bytes, " bytes)"))));
    ptrs_.push_back(p);
    return p;
  }

 private:
  const runtime::CudaDriver& driver_;
  std::vector<cu::DevicePtr> ptrs_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GpuMeasurer>> GpuMeasurer::Open(int ordinal, const std::string& ptxas) {
  ASSIGN_OR_RETURN(kiln::v1::DeviceInfo info, DescribeCuda(ordinal));
  runtime::Result<const runtime::CudaDriver*> driver = runtime::CudaDriver::Get();
  if (!driver.ok()) return absl::UnavailableError(driver.status().message());
  std::unique_ptr<GpuMeasurer> m(new GpuMeasurer());
  m->driver_ = *driver;
  const runtime::CudaEntryPoints& api = m->driver_->api();
  auto check = [&](cu::Result r, const std::string& call) {
    return runtime::ToAbsl(m->driver_->Check(r, call));
  };
  RETURN_IF_ERROR(check(api.cuDeviceGet(&m->cu_device_, ordinal), "cuDeviceGet"));
  RETURN_IF_ERROR(check(api.cuDevicePrimaryCtxRetain(&m->context_, m->cu_device_), "cuDevicePrimaryCtxRetain"));
  RETURN_IF_ERROR(check(api.cuCtxPushCurrent(m->context_), "cuCtxPushCurrent"));
  RETURN_IF_ERROR(check(api.cuStreamCreate(&m->stream_, cu::kStreamNonBlocking), "cuStreamCreate"));
  int l2 = 0;
  RETURN_IF_ERROR(check(api.cuDeviceGetAttribute(&l2, kAttrL2CacheSize, m->cu_device_), "cuDeviceGetAttribute"));
  // Twice the L2: whatever a kernel left there is gone after the memset.
  m->flush_bytes_ = static_cast<size_t>(std::max(l2, 1 << 20)) * 2;
  RETURN_IF_ERROR(check(api.cuMemAlloc(&m->flush_, m->flush_bytes_), "cuMemAlloc (L2 flush buffer)"));
  absl::StatusOr<GpuTarget> target = GpuTarget::Named(info.arch());
  if (!target.ok()) {
    return absl::UnavailableError(absl::StrCat("cuda:", ordinal, " (", info.device_model(), ") is ", info.arch(),
                                               ", which Kiln generates no code for: ", target.status().message()));
  }
  m->target_ = *target;
  absl::StatusOr<PtxAssembler> assembler = PtxAssembler::Find(ptxas);
  if (assembler.ok()) {
    m->ptxas_ = *assembler;
    absl::StatusOr<std::string> version = assembler->Version();
    info.set_toolkit_version(version.ok() ? *version : assembler->path());
  } else {
    info.set_toolkit_version(absl::StrCat("driver JIT (", assembler.status().message(), ")"));
  }
  info.set_space_version(kScheduleSpaceVersion);
  m->device_ = info;
  return m;
}

GpuMeasurer::~GpuMeasurer() {
  if (driver_ == nullptr) return;
  const runtime::CudaEntryPoints& api = driver_->api();
  if (flush_ != 0) api.cuMemFree(flush_);
  if (stream_ != nullptr) api.cuStreamDestroy(stream_);
  if (context_ != nullptr) {
    cu::Context popped = nullptr;
    api.cuCtxPopCurrent(&popped);
    api.cuDevicePrimaryCtxRelease(cu_device_);
  }
}

kiln::v1::MeasureResult GpuMeasurer::Measure(const kiln::v1::MeasureTask& task) {
  absl::StatusOr<kiln::v1::MeasureResult> r = MeasureOrStatus(task);
  if (r.ok()) return *std::move(r);
  return Failure(task, kiln::v1::BUILD_ERROR, absl::StrCat("invalid workload: ", r.status().message()));
}

absl::StatusOr<kiln::v1::MeasureResult> GpuMeasurer::MeasureOrStatus(const kiln::v1::MeasureTask& task) {
  if (!usable_) return Failure(task, kiln::v1::RUNTIME_ERROR, "the CUDA context was lost to an earlier fault");
  const MeasureSettings settings = MeasureSettings::FromProto(task.options());
  MeasureSetup setup;
  ASSIGN_OR_RETURN(std::optional<kiln::v1::MeasureResult> refused, SetUpMeasurement(task, Target(target_), &setup));
  if (refused) return *refused;
  const Graph& graph = *setup.graph;
  const runtime::CudaEntryPoints& api = driver_->api();

  // Build: PTX, then a cubin when there is a ptxas, then the module.
  absl::StatusOr<PtxCode> code = CompileToPtx({KernelRequest{&graph, setup.config, kSymbol}}, target_);
  if (!code.ok()) {
    return Failure(task, kiln::v1::BUILD_ERROR,
                   absl::StrCat("PTX generation of \"", task.schedule_config(), "\" failed: ", code.status().message()));
  }
  std::string cubin;
  if (ptxas_) {
    absl::StatusOr<std::string> assembled = ptxas_->Assemble(code->ptx, target_);
    if (!assembled.ok()) {
      return Failure(task, kiln::v1::BUILD_ERROR, std::string(assembled.status().message()));
    }
    cubin = *std::move(assembled);
  }
  const std::string ptx = code->ptx;  // a C string for the driver
  char log[4096] = {0};
  int options[] = {cu::kJitErrorLogBuffer, cu::kJitErrorLogBufferSizeBytes};
  void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(log)))};
  cu::Module module = nullptr;
  cu::Result rc = cubin.empty() ? cu::kErrorNoDevice : api.cuModuleLoadDataEx(&module, cubin.data(), 2, options, values);
  if (rc != cu::kSuccess) {
    // No ptxas, or a cubin this driver is too old for: its own JIT, as a
    // package's runtime would load it.
    log[0] = '\0';
    rc = api.cuModuleLoadDataEx(&module, ptx.c_str(), 2, options, values);
  }
  if (rc != cu::kSuccess) {
    return Failure(task, kiln::v1::BUILD_ERROR,
                   absl::StrCat("the driver refused the kernel: ", driver_->Describe(rc), log[0] ? ": " : "", log));
  }
  struct ModuleGuard {
    const runtime::CudaEntryPoints& api;
    cu::Module module;
    ~ModuleGuard() { api.cuModuleUnload(module); }
  } guard{api, module};
  cu::Function function = nullptr;
  if (cu::Result rc = api.cuModuleGetFunction(&function, module, kSymbol); rc != cu::kSuccess) {
    return Failure(task, kiln::v1::BUILD_ERROR, absl::StrCat("cuModuleGetFunction: ", driver_->Describe(rc)));
  }
  const loop_ir::GpuLaunch launch = code->kernels.front().launch;

  // Buffers: inputs copied in, outputs poisoned (all-ones bytes: NaN for
  // floats) so that elements a kernel fails to write are caught.
  DeviceBuffers buffers(*driver_);
  std::vector<cu::DevicePtr> args;
  auto check = [&](cu::Result r, const std::string& call) { return runtime::ToAbsl(driver_->Check(r, call)); };
  for (const Value* v : graph.inputs()) {
    const Tensor& t = setup.inputs.at(v->name());
    ASSIGN_OR_RETURN(cu::DevicePtr p, buffers.Allocate(static_cast<size_t>(t.size_bytes())));
    if (t.size_bytes() > 0) {
      RETURN_IF_ERROR(check(api.cuMemcpyHtoD(p, t.raw(), static_cast<size_t>(t.size_bytes())), "cuMemcpyHtoD"));
    }
    args.push_back(p);
  }
  const size_t first_output = args.size();
  for (const Tensor& t : setup.outputs) {
    ASSIGN_OR_RETURN(cu::DevicePtr p, buffers.Allocate(static_cast<size_t>(t.size_bytes())));
    if (t.size_bytes() > 0) {
      RETURN_IF_ERROR(check(api.cuMemsetD8(p, 0xff, static_cast<size_t>(t.size_bytes())), "cuMemsetD8"));
    }
    args.push_back(p);
  }
  std::vector<void*> params;
  for (cu::DevicePtr& p : args) params.push_back(&p);
  // A launch or kernel failure loses the context: the result says so and
  // the process ends after reporting it (usable_).
  auto run = [&]() -> absl::Status {
    cu::Result rc = api.cuLaunchKernel(function, static_cast<unsigned>(launch.blocks), 1, 1,
                                       static_cast<unsigned>(launch.threads), 1, 1, 0, stream_, params.data(),
                                       nullptr);
    if (rc == cu::kSuccess) rc = api.cuStreamSynchronize(stream_);
    if (rc != cu::kSuccess) {
      usable_ = false;
      return absl::InternalError(absl::StrCat("kernel launch (", launch.blocks, " blocks of ", launch.threads,
                                              " threads) failed: ", driver_->Describe(rc)));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = run(); !s.ok()) return Failure(task, kiln::v1::RUNTIME_ERROR, std::string(s.message()));
  for (size_t i = 0; i < setup.outputs.size(); ++i) {
    Tensor& t = setup.outputs[i];
    if (t.size_bytes() == 0) continue;
    RETURN_IF_ERROR(check(api.cuMemcpyDtoHAsync(t.raw(), args[first_output + i], static_cast<size_t>(t.size_bytes()),
                                                stream_),
                          "cuMemcpyDtoHAsync"));
  }
  RETURN_IF_ERROR(check(api.cuStreamSynchronize(stream_), "cuStreamSynchronize"));
  double max_abs_error = 0.0;
  if (std::optional<kiln::v1::MeasureResult> wrong = CheckOutputs(task, setup, settings, &max_abs_error)) {
    return *wrong;
  }

  // Time: warm-up, then each run between two events after an L2 flush.
  for (int i = 0; i < settings.warmup_runs; ++i) {
    if (absl::Status s = run(); !s.ok()) return Failure(task, kiln::v1::RUNTIME_ERROR, std::string(s.message()));
  }
  cu::Event start = nullptr, end = nullptr;
  RETURN_IF_ERROR(check(api.cuEventCreate(&start, cu::kEventDefault), "cuEventCreate"));
  RETURN_IF_ERROR(check(api.cuEventCreate(&end, cu::kEventDefault), "cuEventCreate"));
  absl::Status failure;
  std::vector<double> times = TimeRuns(settings, [&]() -> double {
    if (!failure.ok()) return 1e9;  // ends the loop at its cap
    api.cuMemsetD8(flush_, 0, flush_bytes_);
    api.cuEventRecord(start, stream_);
    cu::Result rc = api.cuLaunchKernel(function, static_cast<unsigned>(launch.blocks), 1, 1,
                                       static_cast<unsigned>(launch.threads), 1, 1, 0, stream_, params.data(),
                                       nullptr);
    api.cuEventRecord(end, stream_);
    if (rc == cu::kSuccess) rc = api.cuEventSynchronize(end);
    float ms = 0;
    if (rc == cu::kSuccess) rc = api.cuEventElapsedTime(&ms, start, end);
    if (rc != cu::kSuccess) {
      usable_ = false;
      failure = absl::InternalError(absl::StrCat("timed run failed: ", driver_->Describe(rc)));
      return 1e9;
    }
    return static_cast<double>(ms);
  });
  api.cuEventDestroy(start);
  api.cuEventDestroy(end);
  if (!failure.ok()) return Failure(task, kiln::v1::RUNTIME_ERROR, std::string(failure.message()));
  return TimedResult(task, times, max_abs_error);
}

}  // namespace kiln::worker
