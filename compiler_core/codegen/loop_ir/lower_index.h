// "index" workloads on loop IR: the indexing and data-rearranging operators
// (Gather, GatherElements, GatherND, DepthToSpace, SpaceToDepth, Trilu, Split, CumSum,
// ArgMax, ArgMin) with inlined elementwise/data-movement producers and
// consumers.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower.h"

namespace kiln::loop_ir {

// A workload is any number of index-expression nodes (Gather, GatherElements, GatherND,
// DepthToSpace, SpaceToDepth, Trilu, Split: each output element is one input
// element at computed coordinates) and at most one scan node (CumSum, ArgMax,
// ArgMin: a serial loop along one axis per output position) whose result must
// be a workload output, mixed with nodes GraphExpr inlines. Index expressions
// move data of any type (not i32/i64 computed in the workload); scans read f32;
// index operands (Gather/GatherElements/GatherND indices, Trilu k, CumSum axis) are i64
// graph inputs or constants; ArgMax/ArgMin write i64. Out-of-range gather
// indices are clamped into range (a kernel cannot report the error the
// interpreter raises). Knobs: vw (lanes of the innermost loop, masked tail),
// tasks (parallel split of the outermost loop when the kernel is one nest).
WorkloadLowering IndexLowering();

// ---- the kind's analysis and index rules, shared with its GPU lowering
// (loop_ir/gpu/lower_index.h) ----

// What an index workload holds besides inlined nodes.
struct IndexForm {
  const Node* scan = nullptr;  // CumSum / ArgMax / ArgMin, if any
  int expr_nodes = 0;          // index-expression nodes
};
// The kind's match: the form, or UNIMPLEMENTED / INVALID_ARGUMENT naming the
// node or value it cannot take.
absl::StatusOr<IndexForm> AnalyzeIndex(const Graph& g);

bool IsIndexScanOp(const std::string& op_type);
// The normalised axis of a scan node, or nullopt for a CumSum whose axis is
// a run-time input.
std::optional<int64_t> ScanAxis(const Node& scan);
// Loop dims of a scan along `axis`: its input's dims with the axis set to 1.
std::vector<int64_t> ScanDims(const Node& scan, int64_t axis);
class IndexExpr;
// A CumSum's run-time axis, normalised (the axis input read by `ie`).
absl::StatusOr<Expr> RuntimeScanAxis(IndexExpr& ie, const Node& scan);
// ArgMax/ArgMin (`arg`): whether element value `v` replaces the best so far
// `best`; the interpreter's comparisons (ties to the first index unless
// select_last_index; NaN never wins).
Expr ArgBetter(const Node& arg, const Expr& v, const Expr& best);

// Expressions for workload values, extending GraphExpr with the index
// operators: each index-expression node's output is bound to a marker buffer,
// and loads of a marker are rewritten into the node's own index arithmetic.
// Out-of-range gather indices are wrapped once if negative, then clamped
// into range (a kernel cannot report the interpreter's error).
class IndexExpr {
 public:
  explicit IndexExpr(const Graph& g);

  // Argument buffers, each typed as its value (index inputs i64 or i32,
  // ArgMax/ArgMin outputs i64).
  const std::vector<Buffer>& args() const { return args_; }
  const Buffer& output_buffer(int j) const { return args_[g_.inputs().size() + j]; }
  // Reads of `v` load from `b` from now on.
  void Bind(const Value* v, const Buffer& b);
  // The value `v` at a multi-dimensional index.
  absl::StatusOr<Expr> At(const Value* v, const std::vector<Expr>& idx);
  // Integer operand `v` (i64 or i32 graph input, or integer constant) at
  // flat index `flat`, as i64.
  absl::StatusOr<Expr> IntAt(const Value* v, const Expr& flat);

 private:
  absl::StatusOr<Expr> Rewrite(const Expr& e, const std::vector<Expr>& idx);
  absl::StatusOr<Expr> NodeAt(const Node& n, const std::vector<Expr>& idx);

  const Graph& g_;
  GraphExpr ge_;
  std::vector<Buffer> args_;
  std::map<const Value*, Buffer> int_inputs_;
  std::map<const Value*, Buffer> bound_;
  std::map<const BufferNode*, const Node*> markers_;
};

}  // namespace kiln::loop_ir
