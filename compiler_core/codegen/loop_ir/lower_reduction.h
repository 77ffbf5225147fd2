// "reduction" workloads: Reduce* (any axes, keepdims), Softmax, LogSoftmax,
// LayerNormalization, GlobalAveragePool and GlobalMaxPool, with elementwise
// and data-movement producers inlined into their inputs and consumers
// computed from their (materialized) results. Each reduction is one stage:
// loops over the kept index, per-lane accumulators (rfactor; 4 unrolled
// vector accumulators when the extent allows) when the innermost input axis
// is reduced and vw > 1, a guarded vectorized inner loop (masked tail), then
// the horizontal combine. Softmax writes exp(x - max) in its sum pass and
// only scales it after; per-row factors (1/sum, 1/stddev) are bound once.
// Knobs: vw, tasks (parallel split of the outermost kept loop of a
// single-stage kernel; for a multi-stage kernel whose stages and outputs
// keep rows (the first axis of more than one element, data movement
// included where it neither moves nor cuts them), all stages fused per
// block of rows, one block per task).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower.h"

namespace kiln::loop_ir {

WorkloadLowering ReductionLowering();

// ---- what a reduction workload is, shared with the GPU lowering
// (loop_ir/gpu/lower_reduction.cc) ---------------------------------------

// The operators that are stages of a reduction workload.
bool IsReductionOp(const std::string& op);
// LayerNormalization, InstanceNormalization: the mean over the reduced axes,
// then the centred sum of squares.
bool IsNormOp(const std::string& op);
// Softmax, LogSoftmax and the norms: reduce, then write a result of the
// input's shape.
bool IsRowWiseOp(const std::string& op);

// The axes of a stage's input (input(0)) that it reduces over.
absl::StatusOr<std::vector<bool>> ReductionMask(const Node& n);

// OK when the reduction lowering takes the workload.
absl::Status MatchReduction(const Graph& g);

// The number of leading axes along which every stage and output of a
// multi-node reduction workload is row-local: every computed value has the
// same rank and the same extents on those axes, no stage reduces one of
// them, no data movement reorders them and no output is a workload input.
// Then the slice of every result at one index of those axes depends only on
// the same slice of the computed values, and slices can run independently.
// 0 when there is no such axis.
int RowLocalAxes(const Graph& g);

// How a Reduce* or global pool node folds its elements: acc = init, then
// acc = combine(acc, ReduceElement(x)) over the reduced elements, then
// ReduceResult(acc).
struct ReduceCombine {
  ExprKind kind = ExprKind::kAdd;  // kAdd, kMul, or kMax/kMin (NaN-propagating fmax/fmin)
  double init = 0;
  // kMax only: a plain compare-and-select max (one vmaxps) that may drop a
  // NaN, for softmax's row max, whose NaN reaches the output through the
  // sum of exp(x - max) anyway.
  bool nan_free = false;
};
ReduceCombine ReduceCombineOf(const std::string& op);
Expr ApplyCombine(const ReduceCombine& c, Expr a, Expr b);
// The element as the fold takes it: x * x (L2, SumSquare), |x| (L1), x.
Expr ReduceElement(const std::string& op, Expr x);
// The result from the folded value over `count` elements: the mean, sqrt
// (L2), log (LogSum), else the fold itself.
Expr ReduceResult(const std::string& op, Expr acc, int64_t count);

// A row-wise node's statistics: `first` is the row's max (Softmax,
// LogSoftmax) or mean (norms), `second` the sum of exp(x - max) or the
// centred sum of squares over `count` elements. RowFactor is the per-row
// factor of the output (1/sum, max + log(sum), 1/sqrt(variance + epsilon));
// RowOutput the output element from x, exp(x - max) (Softmax only) and the
// factor, with a norm's scale and bias read at the kept index `kidx` and
// the reduced index `ridx` (one expression per reduced axis).
Expr RowFactor(const Node& n, Expr first, Expr second, int64_t count);
absl::StatusOr<Expr> RowOutput(const Node& n, GraphExpr& ge, Expr x, Expr exp_shifted, Expr first, Expr factor,
                               const std::vector<Expr>& kidx, const std::vector<Expr>& ridx);

}  // namespace kiln::loop_ir
