// Measurement of candidate kernels on a CUDA GPU, in the worker's device
// process (device_process.h): the candidate's PTX generated here, assembled
// by ptxas when the worker has one (else JIT-compiled by the driver, as a
// PTX-only package would be), loaded into the device's primary context,
// checked against the reference interpreter, and timed with CUDA events:
// warm-up, then repeats to a minimum time, each run after the L2 was
// flushed (a memset larger than it), median and spread kept.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "client/runtime/cuda_driver.h"
#include "compiler_core/codegen/ptx_assembler.h"
#include "compiler_core/codegen/target.h"
#include "kiln/v1/worker.pb.h"

namespace kiln::worker {

class GpuMeasurer {
 public:
  // Opens CUDA device `ordinal` and describes it: kind "cuda", arch
  // "sm_XY", its name, memory and SMs (as cores), the driver's version and
  // the toolkit's (ptxas's release, or "driver JIT" without one). `ptxas`:
  // PtxAssembler::Find's argument; none found is not an error.
  // UNAVAILABLE "no CUDA driver ..." / "no CUDA device cuda:N ..." when the
  // device cannot be used.
  static absl::StatusOr<std::unique_ptr<GpuMeasurer>> Open(int ordinal, const std::string& ptxas);
  ~GpuMeasurer();
  GpuMeasurer(const GpuMeasurer&) = delete;
  GpuMeasurer& operator=(const GpuMeasurer&) = delete;

  const kiln::v1::DeviceInfo& device() const { return device_; }
  const GpuTarget& target() const { return target_; }

  // The candidate's result, as Measure (measurer.h) gives a CPU's: BUILD_ERROR
  // (PTX generation, ptxas or the driver's loader refused it, naming why),
  // WRONG_ANSWER, RUNTIME_ERROR (the launch failed; the context is then
  // lost: usable() turns false and the process must end), or MEASURE_OK.
  kiln::v1::MeasureResult Measure(const kiln::v1::MeasureTask& task);

  // False once a kernel faulted: the CUDA context is unusable.
  bool usable() const { return usable_; }

 private:
  GpuMeasurer() = default;
  absl::StatusOr<kiln::v1::MeasureResult> MeasureOrStatus(const kiln::v1::MeasureTask& task);

  const runtime::CudaDriver* driver_ = nullptr;
  runtime::cu::Device cu_device_ = 0;
  runtime::cu::Context context_ = nullptr;
  runtime::cu::Stream stream_ = nullptr;
  runtime::cu::DevicePtr flush_ = 0;  // L2-flushing scratch
  size_t flush_bytes_ = 0;
  std::optional<PtxAssembler> ptxas_;
  GpuTarget target_;
  kiln::v1::DeviceInfo device_;
  bool usable_ = true;
};

}  // namespace kiln::worker
