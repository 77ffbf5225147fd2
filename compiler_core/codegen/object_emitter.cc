// CompileToObject: all kernels in one LLVM module, O3, one ELF object;
// CompileToAssembly: the same module as assembly text.
#include "compiler_core/codegen/object_emitter.h"

#include <cstring>
#include <set>
#include <string>
#include <vector>

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
  const std::vector<absl::string_view> lines = absl::StrSplit(assembly, '\n');
  // A block label: ".LBB0_7:", or "# %bb.8:" for a block without one.
  auto is_label = [](absl::string_view line) {
    return (absl::StartsWith(line, ".LBB") || absl::StartsWith(line, "# %bb.")) &&
           line.find(':') != absl::string_view::npos;
  };
  // The name other blocks' comments give a labelled block: "BB0_7" of ".LBB0_7:".
  auto block_name = [](absl::string_view label) { return std::string(label.substr(2, label.find(':') - 2)); };
  // The comment lines after a label say which loop the block is in:
  // "=>  This Inner Loop Header: Depth=2" on an innermost loop's header,
  // "in Loop: Header=BB0_3 Depth=2" on its other blocks (the body after a
  // header that only tests the bound, the latch), naming the innermost loop
  // that holds them. Pass 1: the innermost loops' headers.
  std::set<std::string> inner_headers;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!absl::StartsWith(lines[i], ".LBB")) continue;
    for (size_t j = i + 1; j < lines.size() && absl::StartsWith(absl::StripLeadingAsciiWhitespace(lines[j]), "#");
         ++j) {
      if (absl::StrContains(lines[j], "Inner Loop Header")) {
        inner_headers.insert(block_name(lines[i]));
        break;
      }
    }
  }
  InnerLoopCounts c;
  c.loops = static_cast<int>(inner_headers.size());
  // Pass 2: count the instructions of every block in one of those loops.
  bool inside = false, heading = false;
  for (absl::string_view line : lines) {
    if (is_label(line)) {
      inside = absl::StartsWith(line, ".LBB") && inner_headers.count(block_name(line)) != 0;
      heading = true;
      continue;
    }
    const size_t comment = line.find('#');
    const absl::string_view code = absl::StripAsciiWhitespace(line.substr(0, comment));
    if (heading && code.empty() && comment != absl::string_view::npos) {
      const size_t at = line.find("in Loop: Header=");
      if (at != absl::string_view::npos) {
        absl::string_view header = line.substr(at + std::strlen("in Loop: Header="));
        header = header.substr(0, header.find(' '));
        inside = inner_headers.count(std::string(header)) != 0;
      }
      continue;
    }
    heading = false;
    if (!inside || code.empty()) continue;
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
