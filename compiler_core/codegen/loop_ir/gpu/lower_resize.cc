// GPU lowering of the resize kind (see gpu/lower_resize.h); the semantics
// are the interpreter's (compiler_core/frontend/ops/resize_plan.cc).
#include "compiler_core/codegen/loop_ir/gpu/lower_resize.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_resize.h"

namespace kiln::loop_ir::gpu {
namespace {

Expr I(int64_t v) { return IntImm(v); }
Expr D(double v) { return Const(ScalarType::kF64, v); }

int64_t LastExtent(const std::vector<int64_t>& dims) { return dims.empty() ? 1 : dims.back(); }

std::vector<ScheduleConfig> Enumerate(const Graph& g, const GpuTarget&) {
  absl::StatusOr<ResizeForm> f = AnalyzeResize(g);
  if (!f.ok()) return {};
  return FlatSpace(4, LastExtent(f->out_dims), {1, 2});
}

// The widest vw that divides the output rows (whole vector stores), 256
// threads, one item per thread.
ScheduleConfig Default(const Graph& g, const GpuTarget& t) {
  std::vector<ScheduleConfig> space = Enumerate(g, t);
  absl::StatusOr<ResizeForm> f = AnalyzeResize(g);
  if (!f.ok() || space.empty()) return {};
  const int64_t inner = LastExtent(f->out_dims);
  int64_t vw = 1;
  while (vw * 2 <= std::min<int64_t>(4, inner) && inner % (vw * 2) == 0) vw *= 2;
  ScheduleConfig c;
  c.Set("vw", vw);
  c.Set("bt", 256);
  c.Set("un", 1);
  return std::find(space.begin(), space.end(), c) != space.end() ? c : space.front();
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  RETURN_IF_ERROR(AnalyzeResize(g).status());
  RETURN_IF_ERROR(ValidateGpuKnobs(g, c, {"vw", "bt", "un"}));
  const int64_t vw = c.Get("vw", 1), un = c.Get("un", 1);
  if (vw != 1 && vw != 2 && vw != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule ", c.ToString(), ": knob vw=", vw, " is not 1, 2 or 4 for workload ", g.name()));
  }
  if (un < 1 || un > 8) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob un=", un, " is not in [1, 8]"));
  }
  return absl::OkStatus();
}

// The taps of one resized axis at output index `o`: per slot the clamped
// source index and (weighted modes) its f32 weight; `inside` is false where
// the coordinate falls outside a tf_crop_and_resize crop (null otherwise).
struct AxisTaps {
  std::vector<Expr> index, weight;
  Expr inside;
};

// ops::ResizeSourceCoord, operation for operation, in f64.
Expr SourceCoord(const ops::ResizePlan& p, int axis, const Expr& o, int64_t in) {
  const double s = p.scale[axis];
  const double out = static_cast<double>(in) * s;
  const std::string& c = p.coord;
  const Expr od = Cast(ScalarType::kF64, o);
  if (c == "half_pixel") return Sub(Div(Add(od, D(0.5)), D(s)), D(0.5));
  if (c == "pytorch_half_pixel") return out > 1 ? Sub(Div(Add(od, D(0.5)), D(s)), D(0.5)) : D(0.0);
  if (c == "align_corners") return out == 1 ? D(0.0) : Div(Mul(od, D(static_cast<double>(in - 1))), D(out - 1));
  if (c == "asymmetric") return Div(od, D(s));
  if (c == "tf_half_pixel_for_nn") return Div(Add(od, D(0.5)), D(s));
  // tf_crop_and_resize
  const double a = p.roi_start[axis], b = p.roi_end[axis];
  if (!(out > 1)) return D(0.5 * (a + b) * static_cast<double>(in - 1));
  return Add(D(a * static_cast<double>(in - 1)),
             Div(Mul(Mul(od, D(b - a)), D(static_cast<double>(in - 1))), D(out - 1)));
}

// ops::ResizeTaps in f64: slot k of a table holds tap k (excluded cubic
// taps weigh 0 where the CPU lowering's packed tables hold 0 too).
AxisTaps Taps(const ops::ResizePlan& p, const AxisTable& t, const Expr& o, int64_t in) {
  AxisTaps taps;
  const Expr x = SourceCoord(p, t.axis, o, in);
  if (p.coord == "tf_crop_and_resize") {
    taps.inside = Not(Or(Lt(x, D(0)), Gt(x, D(static_cast<double>(in - 1)))));
  }
  auto clamp = [in](const Expr& i) { return Min(Max(i, I(0)), I(in - 1)); };
  auto to_index = [](const Expr& v) { return Cast(ScalarType::kI64, v); };
  const Expr f = Call("floor", {x}, ScalarType::kF64);
  if (p.mode == "nearest") {
    Expr i;
    if (p.nearest == "floor") {
      i = f;
    } else if (p.nearest == "ceil") {
      i = Call("ceil", {x}, ScalarType::kF64);
    } else {
      // Where x is not halfway std::round and round-half-even agree.
      const Expr halfway = p.nearest == "round_prefer_ceil" ? Add(f, D(1)) : f;
      i = Select(Eq(Sub(x, f), D(0.5)), halfway, Call("round", {x}, ScalarType::kF64));
    }
    taps.index.push_back(clamp(to_index(i)));
    return taps;
  }
  const Expr x0 = to_index(f);
  const Expr tt = Sub(x, Cast(ScalarType::kF64, x0));
  auto weight = [](const Expr& w) { return Cast(ScalarType::kF32, w); };
  if (p.mode == "linear") {
    taps.index = {clamp(x0), clamp(Add(x0, I(1)))};
    taps.weight = {weight(Sub(D(1.0), tt)), weight(tt)};
    return taps;
  }
  const double A = p.cubic_a;
  const Expr t1 = Add(tt, D(1)), u = Sub(D(1), tt), t2 = Sub(D(2), tt);
  const Expr w[4] = {
      Sub(Mul(Add(Mul(Sub(Mul(D(A), t1), D(5 * A)), t1), D(8 * A)), t1), D(4 * A)),
      Add(Mul(Mul(Sub(Mul(D(A + 2), tt), D(A + 3)), tt), tt), D(1)),
      Add(Mul(Mul(Sub(Mul(D(A + 2), u), D(A + 3)), u), u), D(1)),
      Sub(Mul(Add(Mul(Sub(Mul(D(A), t2), D(5 * A)), t2), D(8 * A)), t2), D(4 * A))};
  std::vector<Expr> ws(w, w + 4);
  if (p.exclude_outside) {
    Expr total = D(0);
    for (int64_t k = 0; k < 4; ++k) {
      const Expr i = Add(x0, I(k - 1));
      ws[k] = Select(And(Ge(i, I(0)), Lt(i, I(in))), w[k], D(0));
      total = Add(total, ws[k]);
    }
    for (Expr& wk : ws) wk = Select(Ne(total, D(0)), Div(wk, total), wk);
  }
  for (int64_t k = 0; k < 4; ++k) {
    taps.index.push_back(clamp(Add(x0, I(k - 1))));
    taps.weight.push_back(weight(ws[k]));
  }
  return taps;
}

// The resized value at output index `idx`: every combination of the axes'
// taps (the first axis's slot fastest), as the CPU lowering sums them.
absl::StatusOr<Expr> Resized(const ResizeForm& f, GraphExpr& ge, const std::vector<Expr>& idx) {
  std::vector<AxisTaps> taps;
  std::vector<Expr> inside;
  for (const AxisTable& t : f.tables) {
    taps.push_back(Taps(f.plan, t, idx[t.axis], f.in_dims[t.axis]));
    if (taps.back().inside) inside.push_back(taps.back().inside);
  }
  Expr sum;
  std::vector<size_t> slot(taps.size(), 0);
  while (true) {
    std::vector<Expr> in_idx = idx;
    Expr w;
    for (size_t a = 0; a < taps.size(); ++a) {
      in_idx[f.tables[a].axis] = taps[a].index[slot[a]];
      if (!taps[a].weight.empty()) w = w ? Mul(w, taps[a].weight[slot[a]]) : taps[a].weight[slot[a]];
    }
    ASSIGN_OR_RETURN(Expr xv, ge.At(f.x, in_idx));
    Expr term = w ? Mul(xv, w) : xv;
    sum = sum ? Add(sum, term) : term;
    size_t a = 0;
    for (; a < taps.size(); ++a) {
      if (++slot[a] < taps[a].index.size()) break;
      slot[a] = 0;
    }
    if (a == taps.size()) break;
  }
  if (!inside.empty()) {
    Expr all = inside[0];
    for (size_t i = 1; i < inside.size(); ++i) all = And(all, inside[i]);
    sum = Select(all, sum, FloatImm(f.plan.extrapolation));
  }
  return sum;
}

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& c, const GpuTarget& target) {
  RETURN_IF_ERROR(Validate(g, c, target));
  ASSIGN_OR_RETURN(ResizeForm f, AnalyzeResize(g));
  GraphExpr ge(g);
  const Value* resized = f.resize->output(0);
  const AnchorOutputs outs = PlanAnchorOutputs(g, resized);
  const int64_t vw = c.Get("vw", 1), bt = c.Get("bt", 256), un = c.Get("un", 1);
  const std::vector<int64_t>& dims = f.out_dims;
  const int rank = static_cast<int>(dims.size());
  const int64_t inner = LastExtent(dims);
  const int64_t per_row = CeilDiv(inner, vw);
  const int64_t items = NumElements(dims) / std::max<int64_t>(inner, 1) * per_row;
  if (items == 0) return LoopFunc{"resize", ge.args(), For("blk", I(1), Block({}), ForKind::kGpuBlock)};
  absl::Status err = absl::OkStatus();
  auto item_body = [&](Expr item) -> Stmt {
    // The item's row split into the outer indices, its lane's column.
    Expr col = Add(Mul(Mod(item, I(per_row)), I(vw)), Var("v"));
    std::vector<Expr> idx(rank);
    Expr rest = Var("row");
    for (int d = rank - 2; d >= 0; --d) {
      idx[d] = d == 0 ? rest : Mod(rest, I(dims[d]));
      rest = Div(rest, I(dims[d]));
    }
    idx[rank - 1] = col;
    absl::StatusOr<Expr> v = Resized(f, ge, idx);
    absl::StatusOr<Stmt> stores =
        v.ok() ? StoreThroughEpilogue(g, ge, resized, outs, *v, idx, FlatIndex(dims, idx)) : v.status();
    if (!stores.ok()) {
      if (err.ok()) err = stores.status();
      return Block({});
    }
    Stmt s = *stores;
    if (inner % vw != 0) s = IfThen(Lt(col, I(inner)), s);
    Stmt lanes = For("v", I(vw), s, vw > 1 ? ForKind::kVectorized : ForKind::kSerial);
    return LetStmt("row", Div(item, I(per_row)), lanes);
  };
  Stmt body = FlatKernel({{items, item_body}}, bt, un);
  RETURN_IF_ERROR(err);
  return LoopFunc{"resize", ge.args(), body};
}

}  // namespace

GpuWorkloadLowering GpuResizeLowering() {
  return GpuWorkloadLowering{"resize", Enumerate, Default, Validate, Lower};
}

}  // namespace kiln::loop_ir::gpu
