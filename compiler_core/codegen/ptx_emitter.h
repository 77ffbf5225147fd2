// Ahead-of-time compilation of workload kernels for a CUDA GPU: every kernel
// of a package in one NVPTX module, optimised at O3, emitted as PTX text (the
// portable form the driver can JIT for newer GPUs; ptx_assembler.h turns it
// into a cubin for the target's SM). Same input, same text.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/object_emitter.h"
#include "compiler_core/codegen/target.h"

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln {

struct GpuKernelInfo {
  std::string symbol;
  loop_ir::GpuLaunch launch;  // grid, block, static shared memory
  int num_args = 0;           // workload inputs + outputs, one pointer each
};

struct PtxCode {
  std::string ptx;                     // one PTX module holding every kernel
  std::vector<GpuKernelInfo> kernels;  // in request order
  std::string llvm_ir;                 // optimised IR of the whole module
};

// Registers the NVPTX target with LLVM once per process.
void InitializeLlvmNvptx();

// nvptx64-nvidia-cuda, CPU = target.Arch(), -O3, FMA contraction as the CPU
// back end does it (fmuladd only).
absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateNvptxTargetMachine(const GpuTarget& target);

// Sets the module's triple and data layout, verifies it, runs the O3
// pipeline and prints PTX. INTERNAL if the module is broken.
absl::StatusOr<std::string> EmitPtx(llvm::Module& module, llvm::TargetMachine& tm);

// Every kernel of `kernels` through the GPU lowerings (kernel_emitter.h) into
// one PTX module. UNIMPLEMENTED / INVALID_ARGUMENT as EmitKernel, prefixed
// with the kernel's symbol.
absl::StatusOr<PtxCode> CompileToPtx(const std::vector<KernelRequest>& kernels, const GpuTarget& target);

// One GPU LoopFunc alone into PTX (tests, `kiln inspect --ptx`).
absl::StatusOr<std::string> LoopFuncToPtx(const loop_ir::LoopFunc& f, const GpuTarget& target,
                                          const std::string& symbol = "kiln_kernel");

}  // namespace kiln
