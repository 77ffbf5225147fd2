// Emits one workload's kernel as an LLVM function with Kiln's kernel ABI:
//   extern "C" void SYMBOL(void* const* args, int64_t task_begin, int64_t task_end)
// args: the workload's inputs then outputs (dense row-major arrays of their
// dtypes). The kernel computes tasks [task_begin, task_end) of [0, num_tasks);
// tasks write disjoint output regions. Every kind lowers through the loop IR
// (compiler_core/codegen/loop_ir); MatMul/Gemm: a task is (batch, block of rows, block
// of columns) (loop_ir::TileMatMul). Shared by jit and object_emitter.
//
// GPU kernels (a GpuTarget): the workload lowers through its kind's GPU
// lowering (loop_ir/gpu/lower.h) to GPU loop IR and from there to an NVPTX
// kernel with one pointer argument per buffer, launched as its GpuLaunch.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/ir/graph.h"

namespace llvm {
class Module;
}  // namespace llvm

#include "compiler_core/codegen/loop_ir/loop_ir.h"

namespace kiln {

struct EmittedKernel {
  int64_t num_tasks = 0;
  int num_args = 0;
};

// The workload at `config` as verified loop IR: the lowering that takes it,
// after the workload's declared types are re-checked and `config` validated.
// What EmitKernel compiles; cheap (no LLVM), so the compile driver checks
// every group with it before anything is tuned. UNIMPLEMENTED when no
// lowering takes the workload, INVALID_ARGUMENT for a bad workload or config.
absl::StatusOr<loop_ir::LoopFunc> LowerWorkload(const Graph& workload, const ScheduleConfig& config,
                                                const CpuTarget& target);

// Adds the external function `symbol` to `module` (whose context it uses).
// UNIMPLEMENTED for unsupported operators, INVALID_ARGUMENT for a bad workload,
// config or symbol name, or a symbol already defined in the module.
absl::StatusOr<EmittedKernel> EmitKernel(const Graph& workload, const ScheduleConfig& config,
                                         const CpuTarget& target, const std::string& symbol,
                                         llvm::Module* module);

struct EmittedGpuKernel {
  loop_ir::GpuLaunch launch;
  int num_args = 0;
};

// The workload at `config` as verified GPU loop IR, as LowerWorkload does for
// the CPU; UNIMPLEMENTED also for a kind without a GPU lowering.
absl::StatusOr<loop_ir::LoopFunc> LowerWorkload(const Graph& workload, const ScheduleConfig& config,
                                                const GpuTarget& target);

// Either kind of target.
absl::StatusOr<loop_ir::LoopFunc> LowerWorkload(const Graph& workload, const ScheduleConfig& config,
                                                const Target& target);

// Adds the NVPTX kernel `symbol` to `module` (an NVPTX module).
absl::StatusOr<EmittedGpuKernel> EmitKernel(const Graph& workload, const ScheduleConfig& config,
                                            const GpuTarget& target, const std::string& symbol,
                                            llvm::Module* module);

}  // namespace kiln
