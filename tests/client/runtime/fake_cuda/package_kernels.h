// The kernels of a CUDA package as the fake driver (fake_cuda_driver.h) runs
// them: each step's workload lowered for the package's SM at the schedule its
// group records, rewritten by gpu_emulation.h and JIT-compiled for this CPU.
// For tests that run a package from the writer through the runtime
// (cuda_session_test, the conformance runner's `--target cuda:sm_XY`).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/fusion/workload.h"
#include "tests/client/runtime/fake_cuda/fake_cuda_driver.h"

namespace kiln::testing {

// One kernel, as FakeCudaDriver::AddKernel takes it.
struct EmulatedKernel {
  std::string symbol;
  std::shared_ptr<const JitKernel> emulation;  // one task per block
  loop_ir::GpuLaunch launch;                   // the lowering's, not the package's
  std::vector<int64_t> arg_bytes;              // the workload's inputs, then its outputs
};

// Every step of the CUDA package `package` (the writer's bytes):
// workloads[g] for the step of group g, at the configuration the package
// records for g (PackageGroup.schedule_config), for the package's SM. Steps
// whose workloads share a key and configuration share one emulation.
// INVALID_ARGUMENT for a CPU package, or when the package's groups and
// `workloads` disagree (count, workload key); the lowering's, the
// emulation's or the JIT's error naming the step otherwise.
absl::StatusOr<std::vector<EmulatedKernel>> EmulatePackageKernels(std::string_view package,
                                                                  const std::vector<Workload>& workloads);

// AddKernel for each of `kernels`.
void RegisterKernels(FakeCudaDriver& fake, const std::vector<EmulatedKernel>& kernels);

}  // namespace kiln::testing
