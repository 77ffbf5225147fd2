// CompileToObject: all kernels in one LLVM module, O3, one ELF object.
#include "compiler_core/codegen/object_emitter.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/llvm_pipeline.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CodeGen.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

namespace kiln {

absl::StatusOr<ObjectCode> CompileToObject(const std::vector<KernelRequest>& kernels,
                                           const CpuTarget& target) {
  ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm, CreateTargetMachine(target));
  llvm::LLVMContext context;
  llvm::Module module("kiln", context);
  module.setSourceFileName("kiln");
  ObjectCode out;
  for (const KernelRequest& k : kernels) {
    if (k.workload == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("kernel ", k.symbol, ": no workload graph"));
    }
    absl::StatusOr<EmittedKernel> info = EmitKernel(*k.workload, k.config, target, k.symbol, &module);
    if (!info.ok()) {
      return absl::Status(info.status().code(),
                          absl::StrCat("kernel ", k.symbol, ": ", info.status().message()));
    }
    out.kernels.push_back(KernelInfo{k.symbol, info->num_tasks, info->num_args});
  }
  RETURN_IF_ERROR(OptimizeModule(module, *tm));
  out.llvm_ir = ModuleToText(module);
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
    return absl::InternalError(absl::StrCat("target ", target.Key(), " cannot emit object files"));
  }
  pm.run(module);
  out.elf.assign(buffer.begin(), buffer.end());
  return out;
}

}  // namespace kiln
