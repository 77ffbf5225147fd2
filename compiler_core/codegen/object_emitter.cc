// CompileToObject: all kernels in one LLVM module, O3, one ELF object;
// CompileToAssembly: the same module as assembly text.
#include "compiler_core/codegen/object_emitter.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
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

namespace {

// Every kernel of the request list in one module, optimized at O3.
absl::Status BuildModule(const std::vector<KernelRequest>& kernels, const CpuTarget& target, llvm::TargetMachine& tm,
                         llvm::Module* module, std::vector<KernelInfo>* infos) {
  for (const KernelRequest& k : kernels) {
    if (k.workload == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("kernel ", k.symbol, ": no workload graph"));
    }
    absl::StatusOr<EmittedKernel> info = EmitKernel(*k.workload, k.config, target, k.symbol, module);
    if (!info.ok()) {
      return absl::Status(info.status().code(),
                          absl::StrCat("kernel ", k.symbol, ": ", info.status().message()));
    }
    infos->push_back(KernelInfo{k.symbol, info->num_tasks, info->num_args});
  }
  return OptimizeModule(*module, tm);
}

// The module's machine code as `type` (an object file or assembly text).
absl::StatusOr<std::string> EmitFile(llvm::Module& module, llvm::TargetMachine& tm, llvm::CodeGenFileType type,
                                     const CpuTarget& target) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type)) {
    return absl::InternalError(absl::StrCat("target ", target.Key(), " cannot emit ",
                                            type == llvm::CodeGenFileType::ObjectFile ? "object files" : "assembly"));
  }
  pm.run(module);
  return std::string(buffer.begin(), buffer.end());
}

}  // namespace

absl::StatusOr<ObjectCode> CompileToObject(const std::vector<KernelRequest>& kernels,
                                           const CpuTarget& target) {
  ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm, CreateTargetMachine(target));
  llvm::LLVMContext context;
  llvm::Module module("kiln", context);
  module.setSourceFileName("kiln");
  ObjectCode out;
  RETURN_IF_ERROR(BuildModule(kernels, target, *tm, &module, &out.kernels));
  out.llvm_ir = ModuleToText(module);
  ASSIGN_OR_RETURN(out.elf, EmitFile(module, *tm, llvm::CodeGenFileType::ObjectFile, target));
  return out;
}

absl::StatusOr<std::string> CompileToAssembly(const std::vector<KernelRequest>& kernels, const CpuTarget& target) {
  ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm, CreateTargetMachine(target));
  tm->Options.MCOptions.AsmVerbose = true;
  llvm::LLVMContext context;
  llvm::Module module("kiln", context);
  module.setSourceFileName("kiln");
  std::vector<KernelInfo> infos;
  RETURN_IF_ERROR(BuildModule(kernels, target, *tm, &module, &infos));
  return EmitFile(module, *tm, llvm::CodeGenFileType::AssemblyFile, target);
}

InnerLoopCounts CountInnerLoops(const std::string& assembly) {
  InnerLoopCounts c;
  bool inside = false;
  for (absl::string_view line : absl::StrSplit(assembly, '\n')) {
    // A block label (".LBB0_7:", or "# %bb.8:" for a block without one)
    // ends the loop body before it; the header's comment lines follow it.
    const bool label = (absl::StartsWith(line, ".LBB") || absl::StartsWith(line, "# %bb.")) &&
                       line.find(':') != absl::string_view::npos;
    if (label) {
      inside = false;
      continue;
    }
    if (absl::StrContains(line, "Inner Loop Header")) {
      inside = true;
      ++c.loops;
      continue;
    }
    if (!inside) continue;
    const size_t comment = line.find('#');
    const absl::string_view code = absl::StripAsciiWhitespace(line.substr(0, comment));
    if (code.empty()) continue;
    if (absl::StartsWith(code, "vfmadd") || absl::StartsWith(code, "vfnmadd") || absl::StartsWith(code, "vfmsub") ||
        absl::StartsWith(code, "vfnmsub")) {
      ++c.multiply_adds;
    }
    if (comment == absl::string_view::npos) continue;
    const absl::string_view note = line.substr(comment);
    if (absl::StrContains(note, "Spill")) ++c.spills;
    if (absl::StrContains(note, "Reload")) ++c.reloads;
  }
  return c;
}

}  // namespace kiln
