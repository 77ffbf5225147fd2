// JitKernel: kernel emission, O3 and ORC LLJIT materialization in one call.
#include "compiler_core/codegen/jit.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/llvm_pipeline.h"
#include "compiler_core/codegen/loop_ir/llvm_lowering.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/Error.h"
#include "llvm/Target/TargetMachine.h"

namespace kiln {
namespace {
constexpr char kJitSymbol[] = "kiln_kernel";

absl::Status FromLlvm(llvm::Error e, const std::string& context) {
  std::string msg = llvm::toString(std::move(e));
  return absl::InternalError(absl::StrCat(context, ": ", msg));
}
}  // namespace

struct JitKernel::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

JitKernel::~JitKernel() = default;

absl::StatusOr<std::unique_ptr<JitKernel>> JitCompile(const Graph& workload,
                                                      const ScheduleConfig& config,
                                                      const CpuTarget& target) {
  ASSIGN_OR_RETURN(loop_ir::LoopFunc f, LowerWorkload(workload, config, target));
  return JitCompile(f, target);
}

absl::StatusOr<std::unique_ptr<JitKernel>> JitCompile(const loop_ir::LoopFunc& f, const CpuTarget& target) {
  ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm, CreateTargetMachine(target));
  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = std::make_unique<llvm::Module>("kiln", *context);
  module->setSourceFileName("kiln");
  ASSIGN_OR_RETURN(loop_ir::LoweredFunction info, loop_ir::LowerToLlvm(f, target, kJitSymbol, module.get()));
  RETURN_IF_ERROR(OptimizeModule(*module, *tm));

  std::unique_ptr<JitKernel> kernel(new JitKernel());
  kernel->llvm_ir_ = ModuleToText(*module);
  kernel->num_tasks_ = info.num_tasks;
  kernel->num_args_ = info.num_args;

  llvm::orc::JITTargetMachineBuilder jtmb{llvm::Triple(target.triple)};
  jtmb.setCPU(target.cpu);
  std::vector<std::string> features;
  for (absl::string_view f : absl::StrSplit(target.features, ',', absl::SkipEmpty())) {
    features.emplace_back(f);
  }
  jtmb.addFeatures(features);
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  jtmb.setRelocationModel(llvm::Reloc::PIC_);
  jtmb.setCodeModel(llvm::CodeModel::Small);
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create();
  if (!jit) return FromLlvm(jit.takeError(), "creating the jit");
  kernel->impl_ = std::make_unique<JitKernel::Impl>();
  kernel->impl_->jit = std::move(*jit);
  llvm::orc::LLJIT& lljit = *kernel->impl_->jit;
  if (llvm::Error e = lljit.addIRModule(
          llvm::orc::ThreadSafeModule(std::move(module), std::move(context)))) {
    return FromLlvm(std::move(e), "adding the kernel module to the jit");
  }
  auto addr = lljit.lookup(kJitSymbol);
  if (!addr) return FromLlvm(addr.takeError(), "materializing the kernel");
  kernel->fn_ = addr->toPtr<JitKernel::Fn>();
  return kernel;
}

}  // namespace kiln
