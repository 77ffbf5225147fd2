// "topk" workloads: TopK through a per-row insertion into a k-sized sorted
// temp (see lower_topk.h). The semantics are the interpreter's
// (compiler_core/frontend/ops/topk_ops.cc).
#include "compiler_core/codegen/loop_ir/lower_topk.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/schedule.h"
#include "compiler_core/frontend/ops/op_helpers.h"

namespace kiln::loop_ir {
namespace {

Expr I(int64_t v) { return IntImm(v); }

}  // namespace

absl::StatusOr<TopKForm> AnalyzeTopK(const Graph& g) {
  if (g.nodes().size() != 1 || g.nodes()[0]->op_type() != "TopK") {
    return absl::UnimplementedError(absl::StrCat("workload ", g.name(), " is not a single TopK"));
  }
  TopKForm f;
  f.topk = g.nodes()[0].get();
  const Node& t = *f.topk;
  if (!t.domain().empty()) return NodeError(t, "has a domain");
  if (t.num_outputs() != 2 || t.input(0) == nullptr) return NodeError(t, "unexpected operands");
  const Value* x = t.input(0);
  for (int i = 0; i < static_cast<int>(g.inputs().size()); ++i) {
    if (g.inputs()[i] == x) f.x_arg = i;
  }
  if (f.x_arg < 0 || g.inputs().size() != 1) return NodeError(t, "input is not the workload's only input");
  auto static_type = [&](const Value* v, DType want) {
    const TensorType& ty = v->type();
    return ty.known && ty.IsStatic() && ty.dtype == want && NumElements(ty.StaticDims()) <= (int64_t{1} << 31);
  };
  if (!static_type(x, DType::kFloat32)) return NodeError(t, "input is not a static f32 tensor");
  if (!static_type(t.output(0), DType::kFloat32) || !static_type(t.output(1), DType::kInt64)) {
    return NodeError(t, "outputs are not static f32 values and i64 indices");
  }
  f.dims = x->type().StaticDims();
  if (f.dims.empty()) return NodeError(t, "rank-0 input");
  ASSIGN_OR_RETURN(f.axis, ops::ResolveAxis(t.GetInt("axis", -1), static_cast<int64_t>(f.dims.size()),
                                            "attribute 'axis'"));
  ASSIGN_OR_RETURN(std::vector<int64_t> k, ops::ConstantIntInput(t, 1));
  if (k.size() != 1 || k[0] < 0 || k[0] > f.dims[f.axis]) return NodeError(t, "K out of range");
  f.k = k[0];
  f.largest = t.GetInt("largest", 1) != 0;
  for (int64_t i = 0; i < static_cast<int64_t>(f.dims.size()); ++i) {
    if (i < f.axis) f.outer *= f.dims[i];
    else if (i == f.axis) f.n = f.dims[i];
    else f.inner *= f.dims[i];
  }
  for (int j = 0; j < static_cast<int>(g.outputs().size()); ++j) {
    if (g.outputs()[j] == t.output(0)) f.values_out = j;
    else if (g.outputs()[j] == t.output(1)) f.indices_out = j;
    else return NodeError(t, "an output that is not TopK's");
  }
  if (f.values_out < 0 && f.indices_out < 0) return NodeError(t, "no outputs");
  return f;
}

namespace {

std::vector<ScheduleConfig> EnumerateTopK(const Graph& g, const CpuTarget&) {
  absl::StatusOr<TopKForm> f = AnalyzeTopK(g);
  if (!f.ok()) return {};
  std::vector<ScheduleConfig> out;
  const int64_t rows = f->outer * f->inner;
  for (int64_t tasks : TaskCounts(rows * f->n, rows > 1)) {
    ScheduleConfig c;
    c.Set("tasks", tasks);
    out.push_back(c);
  }
  return out;
}

absl::Status ValidateTopK(const Graph& g, const ScheduleConfig& c, const CpuTarget& target) {
  RETURN_IF_ERROR(AnalyzeTopK(g).status());
  return ValidateKnobs(g, c, target, {"tasks"});
}

absl::StatusOr<LoopFunc> LowerTopK(const Graph& g, const ScheduleConfig& config, const CpuTarget& target) {
  ASSIGN_OR_RETURN(TopKForm f, AnalyzeTopK(g));
  RETURN_IF_ERROR(ValidateKnobs(g, config, target, {"tasks"}));
  const int64_t tasks = config.Get("tasks", 1);
  std::vector<Buffer> args;
  args.push_back(MakeBuffer("in0", f.dims, BufferRole::kInput, 0));
  std::vector<int64_t> od = f.dims;
  od[f.axis] = f.k;
  Buffer outv, outi;
  for (int j = 0; j < static_cast<int>(g.outputs().size()); ++j) {
    bool is_idx = j == f.indices_out;
    Buffer b = MakeBuffer(absl::StrCat("out", j), od, BufferRole::kOutput, 1 + j,
                          is_idx ? ScalarType::kI64 : ScalarType::kF32);
    (is_idx ? outi : outv) = b;
    args.push_back(b);
  }
  const int64_t rows = f.outer * f.inner, k = f.k, n = f.n, inner = f.inner;
  if (rows == 0 || k == 0) return LoopFunc{"topk", args, Block({})};

  Buffer tv = MakeBuffer("tv", {k}, BufferRole::kTemp);
  Buffer ti = MakeBuffer("ti", {k}, BufferRole::kTemp, -1, ScalarType::kI64);
  Buffer tp = MakeBuffer("tpos", {1}, BufferRole::kTemp, -1, ScalarType::kI64);
  Expr r = Var("r_"), o = Var("ro_"), i = Var("ri_"), j = Var("j_"), v = Var("v_", ScalarType::kF32);
  Expr p = Var("p_"), q = Var("q_"), pos = Var("pos_");
  auto better = [&](Expr a, Expr b) { return f.largest ? Gt(a, b) : Lt(a, b); };

  Stmt init = For("z_", I(k), Block({Store(tv, Var("z_"), FloatImm(0)), Store(ti, Var("z_"), I(0))}));
  // pos = how many kept elements stay ahead of v (ties: the earlier index).
  Stmt count = Block({Store(tp, I(0), I(0)),
                      For("p_", I(k), IfThen(Lt(p, j), Store(tp, I(0), Add(Load(tp, I(0)),
                                                                           Select(better(v, Load(tv, p)), I(0), I(1))))))});
  Stmt shift = IfThen(Gt(q, pos),
                      Block({Store(tv, q, Load(tv, Max(Sub(q, I(1)), I(0)))),
                             Store(ti, q, Load(ti, Max(Sub(q, I(1)), I(0))))}),
                      IfThen(Eq(q, pos), Block({Store(tv, q, v), Store(ti, q, j)})));
  Stmt insert = Block({count, LetStmt("pos_", Load(tp, I(0)),
                                      For("qq_", I(k), LetStmt("q_", Sub(I(k - 1), Var("qq_")), shift)))});
  Stmt scan = For("j_", I(n),
                  LetStmt("v_", Load(args[0], Add(Mul(Add(Mul(o, I(n)), j), I(inner)), i)),
                          IfThen(Or(Lt(j, I(k)), better(v, Load(tv, I(k - 1)))), insert)));
  std::vector<Stmt> out_stores;
  Expr oi = Add(Mul(Add(Mul(o, I(k)), Var("w_")), I(inner)), i);
  if (outv) out_stores.push_back(Store(outv, oi, Load(tv, Var("w_"))));
  if (outi) out_stores.push_back(Store(outi, oi, Load(ti, Var("w_"))));
  Stmt write = For("w_", I(k), Block(out_stores));
  Stmt row = Allocate(tv, Allocate(ti, Allocate(tp, Block({init, scan, write}))));
  row = LetStmt("ro_", Div(r, I(inner)), LetStmt("ri_", Mod(r, I(inner)), row));
  Stmt nest = For("r_", I(rows), row);
  if (tasks > 1 && rows > 1) {
    int64_t per = (rows + tasks - 1) / tasks;
    if (per > 1) {
      ASSIGN_OR_RETURN(nest, Split(nest, "r_", per, "task", "r_t"));
      ASSIGN_OR_RETURN(nest, Parallel(nest, "task"));
    } else {
      ASSIGN_OR_RETURN(nest, Parallel(nest, "r_"));
    }
  }
  return LoopFunc{"topk", args, nest};
}

}  // namespace

WorkloadLowering TopKLowering() {
  WorkloadLowering l;
  l.kind = "topk";
  l.match = [](const Graph& g) { return AnalyzeTopK(g).status(); };
  l.enumerate = EnumerateTopK;
  l.default_schedule = [](const Graph& g, const CpuTarget& t) { return PickDefault(EnumerateTopK(g, t), t); };
  l.validate = ValidateTopK;
  l.lower = LowerTopK;
  return l;
}

}  // namespace kiln::loop_ir
