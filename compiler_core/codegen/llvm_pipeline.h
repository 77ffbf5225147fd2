// The LLVM side of CPU codegen shared by the JIT and the object emitter:
// one-time target registration, a TargetMachine for a CpuTarget, the O3
// pipeline and the textual IR dump. Internal to kiln_codegen; LLVM types only
// by forward declaration.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/target.h"

namespace llvm {
class Function;
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln {

// Registers the X86 target with LLVM once per process (std::call_once).
void InitializeLlvmX86();

// PIC, small code model, -O3 codegen, exact CPU and features. INVALID_ARGUMENT
// when the target is not x86-64 or LLVM does not know it.
absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateTargetMachine(const CpuTarget& target);

// Sets the module's triple and data layout from `tm`, verifies it and runs the
// new-pass-manager O3 pipeline (LLVM's own vectorizers off: kernels are
// vectorized explicitly by their schedule). INTERNAL if the module is broken.
absl::Status OptimizeModule(llvm::Module& module, llvm::TargetMachine& tm);

std::string ModuleToText(const llvm::Module& module);

// Declares a kernel with Kiln's ABI in `module`:
//   void symbol(void* const* args, int64_t task_begin, int64_t task_end)
// with the target's CPU and features, vector-width hints, and the argument
// table marked noalias/readonly/nocapture. Both the direct emitter and the
// loop-IR lowering create their kernels through it.
llvm::Function* DeclareKernelFunction(llvm::Module* module, const std::string& symbol,
                                      const CpuTarget& target);

}  // namespace kiln
