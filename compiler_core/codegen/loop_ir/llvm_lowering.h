// Loop IR -> LLVM IR: one CPU LoopFunc becomes one function with Kiln's kernel ABI
//   extern "C" void SYMBOL(void* const* args, int64_t task_begin, int64_t task_end)
// and one GPU LoopFunc (IsGpuKernel) one NVPTX kernel (LowerToNvptx).
// The outermost parallel loop's iterations are the tasks; vectorized loops
// become LLVM vector operations (an If inside one becomes a lane mask: masked
// loads and stores, gathers/scatters for non-unit strides); unrolled loops are
// replicated; math calls are inline polynomials (compiler_core/codegen/vector_math.h),
// never libm.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/target.h"

namespace llvm {
class Module;
}  // namespace llvm

namespace kiln::loop_ir {

struct LoweredFunction {
  int64_t num_tasks = 0;
  int num_args = 0;
};

// Verifies `f`, then adds the external function `symbol` to `module`.
// INVALID_ARGUMENT for a function that does not verify or that the lowering
// cannot express (a store to a loop-invariant index inside a vectorized loop).
absl::StatusOr<LoweredFunction> LowerToLlvm(const LoopFunc& f, const CpuTarget& target,
                                            const std::string& symbol, llvm::Module* module);

struct GpuLoweredFunction {
  GpuLaunch launch;
  int num_args = 0;
};

// Verifies the GPU kernel `f`, then adds the CUDA kernel
//   __global__ void symbol(T0* __restrict__ a0, T1* __restrict__ a1, ...)
// (one pointer per argument buffer, in order) to `module`, an NVPTX module,
// with its nvvm.annotations (kernel, maxntidx). Its launch is f's GpuLaunch.
// INVALID_ARGUMENT as LowerToLlvm, and for a CPU kernel.
absl::StatusOr<GpuLoweredFunction> LowerToNvptx(const LoopFunc& f, const std::string& symbol, llvm::Module* module);

// The function lowered alone into a fresh module, unoptimized, as text (the
// loop IR -> LLVM IR dump).
absl::StatusOr<std::string> LowerToLlvmText(const LoopFunc& f, const CpuTarget& target);

}  // namespace kiln::loop_ir
