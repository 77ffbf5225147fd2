// Target registration, TargetMachine construction and the O3 pass pipeline.
#include "compiler_core/codegen/llvm_pipeline.h"

#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/masked_stores.h"
#include "llvm/Analysis/CGSCCPassManager.h"
#include "llvm/Analysis/LoopAnalysisManager.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Triple.h"

namespace kiln {

void InitializeLlvmX86() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
  });
}

absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateTargetMachine(const CpuTarget& target) {
  InitializeLlvmX86();
  llvm::Triple triple(target.triple);
  if (triple.getArch() != llvm::Triple::x86_64) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu target ", target.Key(), ": triple ", target.triple, " is not x86-64"));
  }
  std::string error;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(target.triple, error);
  if (t == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cpu target ", target.Key(), ": ", error));
  }
  llvm::TargetOptions options;  // IEEE semantics: no unsafe fp math
  options.AllowFPOpFusion = llvm::FPOpFusion::Standard;
  std::unique_ptr<llvm::TargetMachine> tm(t->createTargetMachine(
      target.triple, target.cpu, target.features, options, llvm::Reloc::PIC_,
      llvm::CodeModel::Small, llvm::CodeGenOptLevel::Aggressive));
  if (tm == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu target ", target.Key(), ": llvm cannot create a target machine for cpu ",
                     target.cpu));
  }
  return tm;
}

absl::Status OptimizeModule(llvm::Module& module, llvm::TargetMachine& tm) {
  module.setTargetTriple(tm.getTargetTriple().str());
  module.setDataLayout(tm.createDataLayout());
  std::string errors;
  llvm::raw_string_ostream es(errors);
  if (llvm::verifyModule(module, &es)) {
    es.flush();
    return absl::InternalError(absl::StrCat("kernel module fails verification: ", errors));
  }
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = false;
  pto.SLPVectorization = false;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);
  // Last, when unrolling has made the masks of row tails constants. AVX-512
  // masked stores are plain stores under a mask register: left as they are.
  for (llvm::Function& fn : module) {
    if (fn.isDeclaration()) continue;
    const llvm::Attribute features = fn.getFnAttribute("target-features");
    if (features.isValid() && features.getValueAsString().contains("+avx512f")) continue;
    SplitConstantMaskedStores(fn);
  }
  return absl::OkStatus();
}

std::string ModuleToText(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  os.flush();
  return text;
}

llvm::Function* DeclareKernelFunction(llvm::Module* module, const std::string& symbol,
                                      const CpuTarget& target) {
  llvm::LLVMContext& ctx = module->getContext();
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  auto* fty = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, i64, i64}, false);
  llvm::Function* fn = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, symbol, module);
  fn->setDSOLocal(true);
  fn->setDoesNotThrow();
  fn->setAlignment(llvm::Align(64));
  fn->addFnAttr("target-cpu", target.cpu);
  fn->addFnAttr("target-features", target.features);
  fn->addFnAttr("min-legal-vector-width", std::to_string(target.VectorBits()));
  fn->addFnAttr("prefer-vector-width", std::to_string(target.VectorBits()));
  fn->addParamAttr(0, llvm::Attribute::NoAlias);
  fn->addParamAttr(0, llvm::Attribute::ReadOnly);
  fn->addParamAttr(0, llvm::Attribute::NoCapture);
  fn->getArg(0)->setName("args");
  fn->getArg(1)->setName("task_begin");
  fn->getArg(2)->setName("task_end");
  return fn;
}

}  // namespace kiln
