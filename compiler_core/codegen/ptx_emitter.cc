// CompileToPtx: all kernels in one NVPTX module, O3, PTX text.
#include "compiler_core/codegen/ptx_emitter.h"

#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/llvm_pipeline.h"
#include "compiler_core/codegen/loop_ir/llvm_lowering.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CodeGen.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"

namespace kiln {
namespace {

constexpr char kNvptxTriple[] = "nvptx64-nvidia-cuda";

}  // namespace

void InitializeLlvmNvptx() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateNvptxTargetMachine(const GpuTarget& target) {
  InitializeLlvmNvptx();
  std::string error;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(kNvptxTriple, error);
  if (t == nullptr) return absl::InternalError(absl::StrCat("gpu target ", target.Key(), ": ", error));
  llvm::TargetOptions options;  // IEEE semantics: no approximate division or sqrt
  options.AllowFPOpFusion = llvm::FPOpFusion::Standard;
  std::unique_ptr<llvm::TargetMachine> tm(t->createTargetMachine(kNvptxTriple, target.Arch(), "", options,
                                                                 std::nullopt, std::nullopt,
                                                                 llvm::CodeGenOptLevel::Aggressive));
  if (tm == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("gpu target ", target.Key(), ": llvm has no NVPTX ", target.Arch()));
  }
  return tm;
}

absl::StatusOr<std::string> EmitPtx(llvm::Module& module, llvm::TargetMachine& tm) {
  RETURN_IF_ERROR(OptimizeModule(module, tm));
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile)) {
    return absl::InternalError("the NVPTX target cannot emit PTX");
  }
  pm.run(module);
  return std::string(buffer.begin(), buffer.end());
}

absl::StatusOr<PtxCode> CompileToPtx(const std::vector<KernelRequest>& kernels, const GpuTarget& target) {
  ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm, CreateNvptxTargetMachine(target));
  llvm::LLVMContext context;
  llvm::Module module("kiln", context);
  module.setSourceFileName("kiln");
  PtxCode out;
  for (const KernelRequest& k : kernels) {
    if (k.workload == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("kernel ", k.symbol, ": no workload graph"));
    }
    absl::StatusOr<EmittedGpuKernel> info = EmitKernel(*k.workload, k.config, target, k.symbol, &module);
    if (!info.ok()) {
      return absl::Status(info.status().code(), absl::StrCat("kernel ", k.symbol, ": ", info.status().message()));
    }
    out.kernels.push_back(GpuKernelInfo{k.symbol, info->launch, info->num_args});
  }
  ASSIGN_OR_RETURN(out.ptx, EmitPtx(module, *tm));
  out.llvm_ir = ModuleToText(module);
  return out;
}

absl::StatusOr<std::string> LoopFuncToPtx(const loop_ir::LoopFunc& f, const GpuTarget& target,
                                          const std::string& symbol) {
  ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm, CreateNvptxTargetMachine(target));
  llvm::LLVMContext context;
  llvm::Module module("kiln", context);
  RETURN_IF_ERROR(loop_ir::LowerToNvptx(f, symbol, &module).status());
  return EmitPtx(module, *tm);
}

}  // namespace kiln
