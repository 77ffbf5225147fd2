// The registry of GPU lowerings and the flat-grid helpers they share.
#include "compiler_core/codegen/loop_ir/gpu/lower.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/loop_ir/gpu/lower_conv.h"
#include "compiler_core/codegen/loop_ir/gpu/lower_conv_pair.h"
#include "compiler_core/codegen/loop_ir/gpu/lower_elementwise.h"
#include "compiler_core/codegen/loop_ir/gpu/lower_index.h"
#include "compiler_core/codegen/loop_ir/gpu/lower_matmul.h"
#include "compiler_core/codegen/loop_ir/gpu/lower_pool.h"
#include "compiler_core/codegen/loop_ir/gpu/lower_recurrence.h"
#include "compiler_core/codegen/loop_ir/gpu/lower_reduction.h"
#include "compiler_core/codegen/loop_ir/gpu/lower_resize.h"
#include "compiler_core/codegen/loop_ir/gpu/lower_topk.h"
#include "compiler_core/codegen/loop_ir/gpu/lower_winograd.h"
#include "compiler_core/codegen/loop_ir/lower.h"

namespace kiln::loop_ir::gpu {

const std::vector<GpuWorkloadLowering>& AllGpuLowerings() {
  static const std::vector<GpuWorkloadLowering>* all =
      new std::vector<GpuWorkloadLowering>{GpuElementwiseLowering(), GpuDataMovementLowering(), GpuMatMulLowering(),
                                           GpuReductionLowering(), GpuPoolLowering(), GpuTopKLowering(),
                                           GpuIndexLowering(), GpuResizeLowering(), GpuRecurrenceLowering(),
                                           GpuConvLowering(), GpuConvTransposeLowering(), GpuConvPairLowering(),
                                           GpuWinogradInputLowering(), GpuWinogradOutputLowering()};
  return *all;
}

const GpuWorkloadLowering* FindGpuLowering(const Graph& workload, absl::Status* why) {
  absl::Status refusal;
  const WorkloadLowering* cpu = FindLowering(workload, &refusal);
  if (cpu == nullptr) {
    if (why != nullptr) *why = refusal;
    return nullptr;
  }
  for (const GpuWorkloadLowering& l : AllGpuLowerings()) {
    if (l.kind == cpu->kind) return &l;
  }
  if (why != nullptr) {
    *why = absl::UnimplementedError(absl::StrCat("no GPU lowering for kind ", cpu->kind, " (workload ",
                                                 workload.name(), ")"));
  }
  return nullptr;
}

std::vector<int64_t> GpuBlockSizes() { return {128, 256, 512}; }

std::vector<ScheduleConfig> FlatSpace(int64_t max_vw, int64_t inner, const std::vector<int64_t>& unrolls) {
  std::vector<ScheduleConfig> out;
  for (int64_t vw = 1; vw <= max_vw; vw *= 2) {
    if (vw > 1 && vw > inner) break;
    for (int64_t bt : GpuBlockSizes()) {
      for (int64_t un : unrolls) {
        ScheduleConfig c;
        c.Set("vw", vw);
        c.Set("bt", bt);
        c.Set("un", un);
        out.push_back(c);
      }
    }
  }
  return out;
}

int64_t FlatGrid::blocks() const {
  const int64_t per_block = threads * unroll;
  return std::max<int64_t>(1, (items + per_block - 1) / per_block);
}

Stmt FlatKernel(const std::vector<std::pair<int64_t, std::function<Stmt(Expr item)>>>& bodies, int64_t threads,
                int64_t unroll) {
  int64_t blocks = 1;
  for (const auto& [items, body] : bodies) blocks = std::max(blocks, FlatGrid{items, threads, unroll}.blocks());
  const int64_t per_block = threads * unroll;
  std::vector<Stmt> stmts;
  for (const auto& [items, body] : bodies) {
    if (items <= 0) continue;
    Expr item = Var("item");
    Stmt one = body(item);
    if (items != blocks * per_block) one = IfThen(Lt(item, IntImm(items)), one);
    Expr first = Add(Mul(Add(Mul(Var("blk"), IntImm(unroll)), Var("u")), IntImm(threads)), Var("tid"));
    Stmt per_thread = For("u", IntImm(unroll), LetStmt("item", first, one), ForKind::kUnrolled);
    stmts.push_back(For("tid", IntImm(threads), per_thread, ForKind::kGpuThread));
  }
  return For("blk", IntImm(blocks), Block(std::move(stmts)), ForKind::kGpuBlock);
}

absl::Status ValidateGpuKnobs(const Graph& g, const ScheduleConfig& c, const std::vector<std::string>& known) {
  for (const auto& [k, v] : c.knobs) {
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule ", c.ToString(), ": knob ", k, " does not apply to workload ", g.name(), " on a GPU"));
    }
    if (k == "bt" && (v < 32 || v > kMaxGpuThreads || v % 32 != 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule ", c.ToString(), ": knob bt=", v, " is not a multiple of 32 in [32, ", kMaxGpuThreads,
                       "]"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::loop_ir::gpu
