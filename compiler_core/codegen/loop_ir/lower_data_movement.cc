// "elementwise" workloads (DAGs of elementwise operators, broadcasting) and
// "data_movement" workloads (such DAGs mixed with Transpose, Reshape, Flatten,
// (Un)Squeeze, Identity, Slice, Concat, Pad, Expand), lowered as one loop nest
// per output whose body is the inlined index arithmetic. Any Kiln dtype. Knobs: vw (lanes of the innermost loop, masked tail; at most a
// vector of the widest element), tasks (parallel split of the outermost loop;
// 1 = serial).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "base/status_macros.h"

namespace kiln::loop_ir {
namespace {

// OK when every node inlines and the workload has data movement (or has
// none, for the elementwise kind).
absl::Status Match(const Graph& g, bool want_movement) {
  RETURN_IF_ERROR(CheckWorkloadTypes(g));
  bool movement = false;
  for (const auto& n : g.nodes()) {
    RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
    movement = movement || IsInlinableDataMovement(n->op_type());
  }
  if (movement != want_movement) {
    return absl::UnimplementedError(absl::StrCat("workload ", g.name(), movement ? " moves data" : " only computes"));
  }
  return absl::OkStatus();
}

std::vector<int64_t> OutDims(const Graph& g) { return DimsOf(g.outputs()[0]); }

std::vector<ScheduleConfig> Enumerate(const Graph& g, const CpuTarget& target) {
  std::vector<int64_t> d = OutDims(g);
  int64_t inner = d.empty() ? 1 : d.back();
  std::vector<ScheduleConfig> out;
  for (int64_t vw : VectorWidthsFor(target, inner, WidestElementBytes(g))) {
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
  RETURN_IF_ERROR(CheckWorkloadTypes(g));
  for (const auto& n : g.nodes()) RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
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
      const Buffer& out = ge.output_buffer(static_cast<int>(j));
      return Store(out, idx, Cast(out->dtype, *v));
    });
    RETURN_IF_ERROR(err);
    ASSIGN_OR_RETURN(nest, ScheduleNest(nest, dims, prefix, vw, tasks));
    stmts.push_back(nest);
  }
  return LoopFunc{"data_movement", ge.args(), Block(stmts)};
}

WorkloadLowering InlinedLowering(bool movement) {
  WorkloadLowering l;
  l.kind = movement ? "data_movement" : "elementwise";
  l.match = [movement](const Graph& g) { return Match(g, movement); };
  l.enumerate = Enumerate;
  l.default_schedule = [](const Graph& g, const CpuTarget& t) {
    return PickDefault(Enumerate(g, t), t);
  };
  l.validate = [](const Graph& g, const ScheduleConfig& c, const CpuTarget& t) {
    RETURN_IF_ERROR(ValidateKnobs(g, c, t, {"vw", "tasks"}));
    int64_t lanes = MaxLanesFor(t, WidestElementBytes(g));
    if (c.Get("vw", 1) > lanes) {
      return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob vw=", c.Get("vw", 1),
                                                     " is wider than ", lanes, " lanes of workload ", g.name()));
    }
    return absl::OkStatus();
  };
  l.lower = Lower;
  return l;
}

}  // namespace

WorkloadLowering ElementwiseLowering() { return InlinedLowering(false); }
WorkloadLowering DataMovementLowering() { return InlinedLowering(true); }

}  // namespace kiln::loop_ir
