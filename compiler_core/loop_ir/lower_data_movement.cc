// "data_movement" workloads: elementwise DAGs mixed with Transpose, Reshape,
// Flatten, (Un)Squeeze, Identity, Slice, Concat and Pad, lowered as one loop
// nest per output whose body is the inlined index arithmetic. Knobs: vw
// (lanes of the innermost loop, masked tail), tasks (parallel split of the
// outermost loop; 1 = serial).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "compiler_core/loop_ir/graph_expr.h"
#include "compiler_core/loop_ir/lower.h"
#include "compiler_core/loop_ir/lower_common.h"
#include "compiler_core/status_macros.h"

namespace kiln::loop_ir {
namespace {

absl::Status Match(const Graph& g) {
  RETURN_IF_ERROR(CheckWorkloadBasics(g));
  bool movement = false;
  for (const auto& n : g.nodes()) {
    RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
    movement = movement || IsInlinableDataMovement(n->op_type());
  }
  if (!movement) return absl::UnimplementedError("no data-movement operator (the elementwise emitter takes it)");
  return absl::OkStatus();
}

std::vector<int64_t> OutDims(const Graph& g) { return DimsOf(g.outputs()[0]); }

std::vector<ScheduleConfig> Enumerate(const Graph& g, const CpuTarget& target) {
  std::vector<int64_t> d = OutDims(g);
  int64_t inner = d.empty() ? 1 : d.back();
  std::vector<ScheduleConfig> out;
  for (int64_t vw : VectorWidths(target, inner)) {
    for (int64_t tasks : TaskCounts(NumElements(d), g.outputs().size() == 1)) {
      ScheduleConfig c;
      c.Set("vw", vw);
      c.Set("tasks", tasks);
      out.push_back(c);
    }
  }
  return out;
}

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& config, const CpuTarget& target) {
  RETURN_IF_ERROR(Match(g));
  GraphExpr ge(g);
  int64_t vw = config.Get("vw", 1);
  int64_t tasks = g.outputs().size() == 1 ? config.Get("tasks", 1) : 1;
  std::vector<Stmt> stmts;
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    std::vector<int64_t> dims = DimsOf(g.outputs()[j]);
    if (NumElements(dims) == 0) continue;
    absl::Status err = absl::OkStatus();
    std::string prefix = absl::StrCat("o", j, "_");
    Stmt nest = ForEachIndex(dims, prefix, [&](const std::vector<Expr>& idx) -> Stmt {
      absl::StatusOr<Expr> v = ge.At(g.outputs()[j], idx);
      if (!v.ok()) {
        err = v.status();
        return Block({});
      }
      return Store(ge.output_buffer(static_cast<int>(j)), idx, *v);
    });
    RETURN_IF_ERROR(err);
    ASSIGN_OR_RETURN(nest, ScheduleNest(nest, dims, prefix, vw, tasks));
    stmts.push_back(nest);
  }
  return LoopFunc{"data_movement", ge.args(), Block(stmts)};
}

}  // namespace

WorkloadLowering DataMovementLowering() {
  WorkloadLowering l;
  l.kind = "data_movement";
  l.match = Match;
  l.enumerate = Enumerate;
  l.default_schedule = [](const Graph& g, const CpuTarget& t) {
    return PickDefault(Enumerate(g, t), t);
  };
  l.validate = [](const Graph& g, const ScheduleConfig& c, const CpuTarget& t) {
    return ValidateKnobs(g, c, t, {"vw", "tasks"});
  };
  l.lower = Lower;
  return l;
}

}  // namespace kiln::loop_ir
