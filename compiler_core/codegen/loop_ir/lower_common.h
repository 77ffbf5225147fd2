// Knob and form helpers shared by the loop-IR lowerings (internal to
// compiler_core/codegen/loop_ir).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/schedule_config.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/ir/graph.h"

namespace kiln::loop_ir {

// Tasks a default schedule makes at least, where its blocks allow: enough
// for the threads of a small host to share without one of two threads
// running twice the other's tasks (3 tasks on 2 threads).
inline constexpr int64_t kMinTasks = 4;

// How evenly `threads` threads share tasks of `work` (in task order) as
// runtime::ThreadPool::ParallelFor splits them: each thread a contiguous run
// of floor or ceil(tasks / threads) tasks, the longer runs first. The mean
// share over the largest: 1 is even; 7 equal tasks on 2 threads 0.875 (4
// against 3).
double EvenShare(const std::vector<int64_t>& work, int64_t threads);

// How a default ranks task splits (higher is better; then fewer tasks):
// 2 when 2 threads share `work` within 90% of evenly (EvenShare), plus 1
// when 4 threads do. Small hosts first: 7 tasks rank 0 (2 threads: 0.875),
// 8 rank 3, 25 rank 2 (4 threads: 0.89).
int EvenShareRank(const std::vector<int64_t>& work);

// a / b rounded up, for a >= 0 and b > 0 (0 when b is 0).
inline int64_t CeilDiv(int64_t a, int64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

// a / b rounded toward minus infinity, for b > 0 (any sign of a).
inline int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The shared workload check: at least one node and one output, no node
// domain (but `domain_node`'s, the one a lowering reads itself), every used
// value static, at most 2^31 elements and of a dtype `accepts` takes
// (UNIMPLEMENTED "value V is not a static <what>" otherwise).
absl::Status CheckWorkload(const Graph& g, const std::function<bool(const Value*)>& accepts,
                           const std::string& what, const Node* domain_node = nullptr);
// A small integer constant read at lowering time (shape, axes, k, ...).
bool IsStructuralInt(const Value* v);
// CheckWorkload for f32 values (and structural integer constants).
absl::Status CheckWorkloadBasics(const Graph& g, const Node* domain_node = nullptr);
// CheckWorkloadBasics for workloads of any Kiln dtype (the data-movement and
// elementwise lowering): every used value static with a known dtype.
absl::Status CheckWorkloadTypes(const Graph& g);
// Bytes of the widest element of any value of `g` (4 when all are narrower:
// lane counts stay those of f32 for narrow types).
int WidestElementBytes(const Graph& g);
// VectorWidths for elements of `elem_bytes` bytes: lanes filling at most the
// target's vector (8 for f64 on AVX-512), still 1, 4, 8, 16.
std::vector<int64_t> VectorWidthsFor(const CpuTarget& target, int64_t extent, int elem_bytes);
// The widest lane count VectorWidthsFor allows.
int64_t MaxLanesFor(const CpuTarget& target, int elem_bytes);
// 1, 4, 8, 16 up to the target's lanes, leaving out widths beyond the extent.
std::vector<int64_t> VectorWidths(const CpuTarget& target, int64_t extent);
// {1} or {1, 16} (parallel split when there is work to share).
std::vector<int64_t> TaskCounts(int64_t elements, bool can_parallelize);
// Widest vw, then most tasks.
ScheduleConfig PickDefault(const std::vector<ScheduleConfig>& space, const CpuTarget& target);
// The first point of `space` with the largest score(point) (any comparable
// key, e.g. a tuple); empty config for an empty space.
template <typename Score>
ScheduleConfig BestBy(const std::vector<ScheduleConfig>& space, Score score) {
  if (space.empty()) return {};
  ScheduleConfig best = space.front();
  for (const ScheduleConfig& c : space) {
    if (score(c) > score(best)) best = c;
  }
  return best;
}
// Only `known` knobs; vw a power of two <= lanes; tasks in [1, 1024].
absl::Status ValidateKnobs(const Graph& g, const ScheduleConfig& c, const CpuTarget& target,
                           const std::vector<std::string>& known);

// Where an anchor (conv, conv-transpose, pool, resize) stores its raw result,
// and in which order its epilogue then writes the workload's outputs: the raw
// result goes to the output that is the anchor's value, else to the last
// output (scratch that the epilogue overwrites last). Output `skip` (MaxPool's
// Indices) is written by the anchor itself.
struct AnchorOutputs {
  int raw = 0;             // the output the raw result is stored to
  std::vector<int> order;  // the outputs computed from it, in order
};
AnchorOutputs PlanAnchorOutputs(const Graph& g, const Value* anchor_value, int skip = -1);

// The stores of an anchor's result `value` at the output element `idx` (flat
// offset `oi`, the same in every output): the result itself where it is a
// workload output, then each output of `outs.order` through the epilogue,
// which reads the anchor's value as `value` (bound in `ge`), never a reload
// of what was just stored.
absl::StatusOr<Stmt> StoreThroughEpilogue(const Graph& g, GraphExpr& ge, const Value* anchor, const AnchorOutputs& outs,
                                          Expr value, const std::vector<Expr>& idx, Expr oi);

// `extent` elements in chunks of vw lanes: `for (outer, 0, extent / vw)
// vectorized for (inner, 0, vw) body(outer * vw + inner, nullptr)`, then, when
// vw does not divide extent, the last chunk alone, `vectorized for (inner, 0,
// vw) body(last * vw + inner, guard)` with guard `index < extent`. The whole
// chunks run unmasked, and the tail's mask is a constant that LLVM folds:
// plain stores of its lanes on AVX2 (masked_stores.h), where a masked store
// per chunk was a microcoded VMASKMOVPS on every chunk (Zen 3: 6.9 ns each,
// 36 a chunk in a Winograd input transform). body must return a new
// statement each call (it is built twice).
Stmt VectorChunks(const std::string& outer, const std::string& inner, int64_t extent, int64_t vw,
                  const std::function<Stmt(Expr index, Expr guard)>& body);

}  // namespace kiln::loop_ir
