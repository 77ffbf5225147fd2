// Kernel emission: every workload lowers to loop IR through the lowering
// loop_ir::FindLowering picks, and from there to an LLVM function with Kiln's
// kernel ABI.
#include "compiler_core/codegen/kernel_emitter.h"

#include <cctype>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/gpu/lower.h"
#include "compiler_core/codegen/loop_ir/index_simplify.h"
#include "compiler_core/codegen/loop_ir/llvm_lowering.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "compiler_core/frontend/shape_inference.h"
#include "llvm/IR/Module.h"

namespace kiln {
namespace {

bool ValidSymbol(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// The loop-IR lowerings trust the workload's value types: re-infer them on a
// copy and refuse a workload whose declared types disagree (INVALID_ARGUMENT
// naming the value).
absl::Status CheckDeclaredTypes(const Graph& workload) {
  std::unique_ptr<Graph> copy = workload.Clone();
  absl::Status inferred = InferShapes(*copy);
  if (!inferred.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("workload ", workload.name(), ": ", inferred.message()));
  }
  for (const Value* v : workload.values()) {
    const Value* c = copy->FindValue(v->name());
    if (c == nullptr || v->is_constant()) continue;
    if (!(c->type() == v->type())) {
      return absl::InvalidArgumentError(absl::StrCat("workload ", workload.name(), ": value '", v->name(),
                                                     "' is declared ", v->type().ToString(), " but computes ",
                                                     c->type().ToString()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSymbol(const std::string& symbol, llvm::Module* module) {
  if (!ValidSymbol(symbol)) {
    return absl::InvalidArgumentError(absl::StrCat("kernel symbol \"", symbol, "\" is not a C identifier"));
  }
  if (module->getNamedValue(symbol) != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("kernel symbol ", symbol, " is defined twice"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<loop_ir::LoopFunc> LowerWorkload(const Graph& workload, const ScheduleConfig& config,
                                                const CpuTarget& target) {
  absl::Status why;
  const loop_ir::WorkloadLowering* lowering = loop_ir::FindLowering(workload, &why);
  if (lowering == nullptr) return why;
  RETURN_IF_ERROR(CheckDeclaredTypes(workload));
  RETURN_IF_ERROR(lowering->validate(workload, config, target));
  ASSIGN_OR_RETURN(loop_ir::LoopFunc f, lowering->lower(workload, config, target));
  RETURN_IF_ERROR(loop_ir::Verify(f));
  f = loop_ir::SimplifyIndices(f);
  RETURN_IF_ERROR(loop_ir::Verify(f));
  return f;
}

absl::StatusOr<EmittedKernel> EmitKernel(const Graph& workload, const ScheduleConfig& config,
                                         const CpuTarget& target, const std::string& symbol,
                                         llvm::Module* module) {
  RETURN_IF_ERROR(CheckSymbol(symbol, module));
  ASSIGN_OR_RETURN(loop_ir::LoopFunc f, LowerWorkload(workload, config, target));
  ASSIGN_OR_RETURN(loop_ir::LoweredFunction lf, loop_ir::LowerToLlvm(f, target, symbol, module));
  return EmittedKernel{lf.num_tasks, lf.num_args};
}

absl::StatusOr<loop_ir::LoopFunc> LowerWorkload(const Graph& workload, const ScheduleConfig& config,
                                                const GpuTarget& target) {
  absl::Status why;
  const loop_ir::gpu::GpuWorkloadLowering* lowering = loop_ir::gpu::FindGpuLowering(workload, &why);
  if (lowering == nullptr) return why;
  RETURN_IF_ERROR(CheckDeclaredTypes(workload));
  RETURN_IF_ERROR(lowering->validate(workload, config, target));
  ASSIGN_OR_RETURN(loop_ir::LoopFunc f, lowering->lower(workload, config, target));
  RETURN_IF_ERROR(loop_ir::Verify(f));
  if (!loop_ir::IsGpuKernel(f)) {
    return absl::InternalError(absl::StrCat("GPU lowering of kind ", lowering->kind, " gave a CPU kernel"));
  }
  f = loop_ir::SimplifyIndices(f);
  RETURN_IF_ERROR(loop_ir::Verify(f));
  return f;
}

absl::StatusOr<loop_ir::LoopFunc> LowerWorkload(const Graph& workload, const ScheduleConfig& config,
                                                const Target& target) {
  return target.is_gpu() ? LowerWorkload(workload, config, target.gpu()) : LowerWorkload(workload, config, target.cpu());
}

absl::StatusOr<EmittedGpuKernel> EmitKernel(const Graph& workload, const ScheduleConfig& config,
                                            const GpuTarget& target, const std::string& symbol,
                                            llvm::Module* module) {
  RETURN_IF_ERROR(CheckSymbol(symbol, module));
  ASSIGN_OR_RETURN(loop_ir::LoopFunc f, LowerWorkload(workload, config, target));
  ASSIGN_OR_RETURN(loop_ir::GpuLoweredFunction lf, loop_ir::LowerToNvptx(f, symbol, module));
  return EmittedGpuKernel{lf.launch, lf.num_args};
}

}  // namespace kiln
