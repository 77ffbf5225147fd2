// "resize" workloads: Resize/Upsample lowered through compile-time per-axis
// tap tables (see lower_resize.h). The semantics are the interpreter's
// (compiler_core/frontend/ops/resize_ops.cc, resize_plan.h).
#include "compiler_core/codegen/loop_ir/lower_resize.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/schedule.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/ops/resize_plan.h"

namespace kiln::loop_ir {
namespace {

// Table entries (indices plus weights) a resize kernel may keep on the stack
// and fill with straight-line stores.
constexpr int64_t kMaxTableEntries = 16384;
// Input reads per output element (product of the taps of the resized axes).
constexpr int64_t kMaxTapProduct = 64;
// Floats of the separable variant's row buffer (per task, on the stack).
constexpr int64_t kMaxRowBufferFloats = 64 * 1024;

Expr I(int64_t v) { return IntImm(v); }

// ---- Resize: the interpreter's plan, for static shapes -------------------------

using ops::ResizePlan;
using ops::ResizeTap;

// The interpreter's plan for static extents; a refusal names the node.
absl::StatusOr<ResizePlan> MakePlan(const Node& node, const std::vector<int64_t>& dims) {
  std::vector<Dim> static_dims;
  for (int64_t d : dims) static_dims.push_back(Dim::Static(d));
  absl::StatusOr<ResizePlan> p = ops::MakeResizePlan(node, static_dims, node.op_type() == "Upsample");
  if (!p.ok()) return NodeError(node, std::string(p.status().message()));
  return p;
}

// True when every output index of the axis reads exactly its own input index
// with weight 1 (all other taps weigh 0): tf_crop_and_resize over the full
// extent of an axis that keeps its size, for example.
bool IsIdentityAxis(const ResizePlan& p, int axis, int64_t n_in, int64_t n_out) {
  if (n_in != n_out) return false;
  for (int64_t o = 0; o < n_out; ++o) {
    std::vector<ResizeTap> taps = ops::ResizeTaps(p, axis, o, n_in);
    int ones = 0;
    for (const ResizeTap& t : taps) {
      if (t.weight == 0.0) continue;
      if (t.weight != 1.0 || t.index != o) return false;
      ++ones;
    }
    if (ones != 1) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<ResizeForm> AnalyzeResize(const Graph& g) {
  RETURN_IF_ERROR(CheckWorkloadBasics(g));
  ResizeForm f;
  for (const auto& n : g.nodes()) {
    if (n->op_type() == "Resize" || n->op_type() == "Upsample") {
      if (f.resize != nullptr) return NodeError(*n, "a second resize in one workload");
      f.resize = n.get();
    }
  }
  if (f.resize == nullptr) return absl::UnimplementedError(absl::StrCat("workload ", g.name(), " has no resize"));
  const Node& r = *f.resize;
  if (r.num_outputs() != 1 || r.input(0) == nullptr) return NodeError(r, "unexpected operands");
  f.x = r.input(0);
  f.in_dims = DimsOf(f.x);
  f.out_dims = DimsOf(r.output(0));
  // Nodes downstream of the resize form its epilogue: elementwise, of its shape.
  std::set<const Value*> downstream = {r.output(0)};
  for (const auto& n : g.nodes()) {
    if (n.get() == f.resize) continue;
    RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
    bool down = false;
    for (const Value* in : n->inputs()) down = down || downstream.count(in) > 0;
    if (!down) continue;
    if (!IsInlinableElementwise(n->op_type())) return NodeError(*n, "not an elementwise epilogue operator");
    if (DimsOf(n->output(0)) != f.out_dims) return NodeError(*n, "epilogue value does not have the resize's shape");
    downstream.insert(n->output(0));
  }
  for (const Value* v : g.outputs()) {
    if (downstream.count(v) == 0) return NodeError(r, absl::StrCat("output ", v->name(), " is not downstream"));
  }
  ASSIGN_OR_RETURN(f.plan, MakePlan(r, f.in_dims));
  if (f.plan.out != f.out_dims) return NodeError(r, "output shape disagrees with the plan");
  const ResizePlan& p = f.plan;
  int64_t entries = 0, product = 1;
  for (int axis = 0; axis < static_cast<int>(f.in_dims.size()); ++axis) {
    const int64_t n_in = f.in_dims[axis], n_out = p.out[axis];
    if (p.scale[axis] == 1.0 && n_in == n_out && p.coord != "tf_crop_and_resize") continue;
    if (n_out == 0) continue;
    if (n_in == 0) return NodeError(r, "resizing an empty axis");
    if (IsIdentityAxis(p, axis, n_in, n_out)) continue;
    AxisTable t;
    t.axis = axis;
    t.out = n_out;
    t.weighted = p.mode != "nearest";
    t.taps = p.mode == "nearest" ? 1 : p.mode == "linear" ? 2 : 4;
    entries += t.taps * n_out * (t.weighted ? 2 : 1);
    product *= t.taps;
    if (entries > kMaxTableEntries) return NodeError(r, "the per-axis tap tables are too large");
    if (product > kMaxTapProduct) return NodeError(r, "too many taps per output element");
    t.index.assign(t.taps * n_out, 0);
    t.weight.assign(t.taps * n_out, 0.0);
    for (int64_t o = 0; o < n_out; ++o) {
      std::vector<ResizeTap> taps = ops::ResizeTaps(p, axis, o, n_in);
      if (taps.empty()) {
        t.has_outside = true;
        for (int64_t k = 0; k < t.taps; ++k) t.index[k * n_out + o] = -1;
        continue;
      }
      for (size_t k = 0; k < taps.size(); ++k) {
        t.index[k * n_out + o] = taps[k].index;
        t.weight[k * n_out + o] = taps[k].weight;
      }
    }
    f.tables.push_back(std::move(t));
  }
  return f;
}

namespace {

// The innermost and outermost non-unit extents of `dims` (1 when none).
int64_t InnerExtent(const std::vector<int64_t>& dims) {
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] != 1) return dims[d];
  }
  return 1;
}

std::vector<ScheduleConfig> EnumerateResize(const Graph& g, const CpuTarget& target) {
  absl::StatusOr<ResizeForm> f = AnalyzeResize(g);
  if (!f.ok()) return {};
  std::vector<ScheduleConfig> out;
  for (int64_t vw : VectorWidths(target, InnerExtent(f->out_dims))) {
    for (int64_t tasks : TaskCounts(NumElements(f->out_dims), true)) {
      ScheduleConfig c;
      c.Set("vw", vw);
      c.Set("tasks", tasks);
      out.push_back(c);
    }
  }
  return out;
}

absl::Status ValidateResize(const Graph& g, const ScheduleConfig& c, const CpuTarget& target) {
  RETURN_IF_ERROR(AnalyzeResize(g).status());
  return ValidateKnobs(g, c, target, {"vw", "tasks"});
}

// Rebuilds `nest` with wrap() applied inside its parallel loop (or around it
// when it has none), so per-task temps stay inside the outermost parallel loop.
Stmt WrapInsideParallel(const Stmt& nest, const std::function<Stmt(Stmt)>& wrap) {
  if (nest->kind == StmtKind::kFor && nest->for_kind == ForKind::kParallel) {
    return For(nest->var, nest->extent, wrap(nest->body[0]), ForKind::kParallel);
  }
  return wrap(nest);
}

// The tap tables of the resized axes as stack buffers (index and weight
// per slot and output index), filled by straight-line stores.
struct TapTables {
  std::vector<Buffer> itab, wtab;  // wtab[a] null for an unweighted (nearest) axis
  std::vector<Stmt> fills;
  // `inner` after the fills, inside the tables' allocations.
  Stmt Around(Stmt inner) const {
    if (fills.empty()) return inner;
    std::vector<Stmt> seq = fills;
    seq.push_back(std::move(inner));
    Stmt s = Block(seq);
    for (size_t a = itab.size(); a-- > 0;) {
      if (wtab[a]) s = Allocate(wtab[a], s);
      s = Allocate(itab[a], s);
    }
    return s;
  }
};

TapTables MakeTapTables(const ResizeForm& f) {
  TapTables t;
  t.itab.resize(f.tables.size());
  t.wtab.resize(f.tables.size());
  for (size_t a = 0; a < f.tables.size(); ++a) {
    const AxisTable& at = f.tables[a];
    t.itab[a] = MakeBuffer(absl::StrCat("ridx", at.axis), {at.taps * at.out}, BufferRole::kTemp, -1, ScalarType::kI64);
    for (size_t e = 0; e < at.index.size(); ++e) t.fills.push_back(Store(t.itab[a], I(e), I(at.index[e])));
    if (at.weighted) {
      t.wtab[a] = MakeBuffer(absl::StrCat("rw", at.axis), {at.taps * at.out}, BufferRole::kTemp);
      for (size_t e = 0; e < at.weight.size(); ++e) t.fills.push_back(Store(t.wtab[a], I(e), FloatImm(at.weight[e])));
    }
  }
  return t;
}

// Whether the separable variant applies: the last two axes (H, W) are the
// only resized ones, every output position is inside the input (no
// extrapolation), rows are not shrunk (each input row is resized along W at
// most once per output row that reads it) and one plane's W-resized rows fit
// the row buffer.
bool Separable(const ResizeForm& f) {
  const int64_t rank = static_cast<int64_t>(f.in_dims.size());
  if (f.tables.size() != 2 || rank < 2 || f.tables[0].axis != rank - 2 || f.tables[1].axis != rank - 1) return false;
  if (f.tables[0].has_outside || f.tables[1].has_outside) return false;
  const int64_t in_h = f.in_dims[rank - 2], out_h = f.out_dims[rank - 2], out_w = f.out_dims[rank - 1];
  return in_h <= out_h && in_h * out_w <= kMaxRowBufferFloats;
}

// The separable variant: a task takes whole planes (an index of the axes
// before H and W). Per plane it resizes every input row along W once into a
// row buffer (the W taps are gathers, in_h * out_w of them), then writes each
// output row as the weighted sum of its H taps' buffered rows: contiguous
// loads, multiply-adds and stores, no gathers. Instead of the taps' product
// per output element (4 gathers for bilinear), an upsampling by s in H
// gathers 2/s per element.
absl::StatusOr<Stmt> LowerSeparable(const Graph& g, const ResizeForm& f, GraphExpr& ge, const AnchorOutputs& outs,
                                    const TapTables& tables, int64_t vw, int64_t tasks) {
  const int64_t rank = static_cast<int64_t>(f.in_dims.size());
  const int64_t in_h = f.in_dims[rank - 2], out_h = f.out_dims[rank - 2], out_w = f.out_dims[rank - 1];
  const std::vector<int64_t> outer(f.out_dims.begin(), f.out_dims.end() - 2);
  const int64_t planes = NumElements(outer);
  const int64_t per = (planes + std::min(tasks, planes) - 1) / std::min(tasks, planes);
  const int64_t ntasks = (planes + per - 1) / per;
  const AxisTable &th = f.tables[0], &tw = f.tables[1];
  Buffer hb = MakeBuffer("hrows", {in_h * out_w}, BufferRole::kTemp);

  // The plane's index over the outer axes, from its flat number.
  Expr plane = Add(Mul(Var("task"), I(per)), Var("pl"));
  std::vector<Expr> oidx(outer.size());
  {
    int64_t stride = 1;
    for (size_t d = outer.size(); d-- > 0;) {
      oidx[d] = outer[d] == 1 ? I(0) : Mod(Div(plane, I(stride)), I(outer[d]));
      stride *= outer[d];
    }
  }
  auto tap = [&](const AxisTable& t, size_t a, int64_t k, Expr o, std::vector<std::pair<std::string, Expr>>* lets,
                 Expr* weight) {
    Expr at = Add(I(k * t.out), o);
    std::string iv = absl::StrCat("ri", t.axis, "_", k);
    lets->push_back({iv, Load(tables.itab[a], at)});
    *weight = nullptr;
    if (t.weighted) {
      std::string wv = absl::StrCat("rw", t.axis, "_", k);
      lets->push_back({wv, Load(tables.wtab[a], at)});
      *weight = Var(wv, ScalarType::kF32);
    }
    return Var(iv);
  };
  auto wrap = [](Stmt body, const std::vector<std::pair<std::string, Expr>>& lets) {
    for (size_t i = lets.size(); i-- > 0;) body = LetStmt(lets[i].first, lets[i].second, body);
    return body;
  };
  absl::Status err = absl::OkStatus();
  // Pass 1: hrows[r, o3] = sum_j x[plane, r, ri3_j[o3]] * rw3_j[o3].
  Stmt rows = ForEachIndex({in_h, out_w}, "h", [&](const std::vector<Expr>& i) -> Stmt {
    std::vector<std::pair<std::string, Expr>> lets;
    Expr sum;
    for (int64_t k = 0; k < tw.taps; ++k) {
      Expr w;
      Expr src = tap(tw, 1, k, i[1], &lets, &w);
      std::vector<Expr> xi = oidx;
      xi.push_back(i[0]);
      xi.push_back(src);
      absl::StatusOr<Expr> xv = ge.At(f.x, xi);
      if (!xv.ok()) {
        err = xv.status();
        return Block({});
      }
      Expr term = w ? Mul(*xv, w) : *xv;
      sum = sum ? Add(sum, term) : term;
    }
    return wrap(Store(hb, Add(Mul(i[0], I(out_w)), i[1]), sum), lets);
  });
  RETURN_IF_ERROR(err);
  ASSIGN_OR_RETURN(rows, ScheduleNest(rows, {in_h, out_w}, "h", vw, 1));
  // Pass 2: out[plane, o2, o3] = sum_k hrows[ri2_k[o2], o3] * rw2_k[o2].
  const Value* resized = f.resize->output(0);
  Stmt blend = ForEachIndex({out_h, out_w}, "o", [&](const std::vector<Expr>& i) -> Stmt {
    std::vector<std::pair<std::string, Expr>> lets;
    Expr sum;
    for (int64_t k = 0; k < th.taps; ++k) {
      Expr w;
      Expr src = tap(th, 0, k, i[0], &lets, &w);
      Expr term = Load(hb, Add(Mul(src, I(out_w)), i[1]));
      if (w) term = Mul(term, w);
      sum = sum ? Add(sum, term) : term;
    }
    std::vector<Expr> idx = oidx;
    idx.push_back(i[0]);
    idx.push_back(i[1]);
    absl::StatusOr<Stmt> st = StoreThroughEpilogue(g, ge, resized, outs, sum, idx, FlatIndex(f.out_dims, idx));
    if (!st.ok()) {
      err = st.status();
      return Block({});
    }
    return wrap(*st, lets);
  });
  RETURN_IF_ERROR(err);
  ASSIGN_OR_RETURN(blend, ScheduleNest(blend, {out_h, out_w}, "o", vw, 1));
  Stmt one = Block({rows, blend});
  if (planes % ntasks != 0) one = IfThen(Lt(plane, I(planes)), one);
  Stmt s = tables.Around(Allocate(hb, For("pl", I(per), one)));
  return For("task", I(ntasks), s, ntasks > 1 ? ForKind::kParallel : ForKind::kSerial);
}

absl::StatusOr<LoopFunc> LowerResize(const Graph& g, const ScheduleConfig& config, const CpuTarget& target) {
  ASSIGN_OR_RETURN(ResizeForm f, AnalyzeResize(g));
  RETURN_IF_ERROR(ValidateKnobs(g, config, target, {"vw", "tasks"}));
  const int64_t vw = config.Get("vw", 1), tasks = config.Get("tasks", 1);
  GraphExpr ge(g);
  const Value* resized = f.resize->output(0);
  const AnchorOutputs outs = PlanAnchorOutputs(g, resized);
  Buffer raw = ge.output_buffer(outs.raw);
  if (NumElements(f.out_dims) == 0) return LoopFunc{"resize", ge.args(), Block({})};

  const TapTables tables = MakeTapTables(f);
  const std::vector<Buffer>&itab = tables.itab, &wtab = tables.wtab;
  if (Separable(f)) {
    ASSIGN_OR_RETURN(Stmt planes, LowerSeparable(g, f, ge, outs, tables, vw, tasks));
    return LoopFunc{"resize", ge.args(), planes};
  }
  absl::Status err = absl::OkStatus();
  const std::string prefix = "o";
  Stmt nest = ForEachIndex(f.out_dims, prefix, [&](const std::vector<Expr>& idx) -> Stmt {
    // Lets: per resized axis and slot, the source index and the weight.
    std::vector<std::pair<std::string, Expr>> lets;
    std::vector<std::vector<Expr>> src(f.tables.size()), wt(f.tables.size());
    std::vector<Expr> valid;
    for (size_t a = 0; a < f.tables.size(); ++a) {
      const AxisTable& t = f.tables[a];
      for (int64_t k = 0; k < t.taps; ++k) {
        Expr at = Add(I(k * t.out), idx[t.axis]);
        std::string iv = absl::StrCat("ri", t.axis, "_", k);
        lets.push_back({iv, Load(itab[a], at)});
        if (k == 0 && t.has_outside) valid.push_back(Ge(Var(iv), I(0)));
        src[a].push_back(t.has_outside ? Max(Var(iv), I(0)) : Var(iv));
        if (t.weighted) {
          std::string wv = absl::StrCat("rw", t.axis, "_", k);
          lets.push_back({wv, Load(wtab[a], at)});
          wt[a].push_back(Var(wv, ScalarType::kF32));
        }
      }
    }
    // Sum over every combination of taps.
    Expr sum;
    std::vector<int64_t> slot(f.tables.size(), 0);
    while (true) {
      std::vector<Expr> in_idx = idx;
      Expr w;
      for (size_t a = 0; a < f.tables.size(); ++a) {
        in_idx[f.tables[a].axis] = src[a][slot[a]];
        if (f.tables[a].weighted) w = w ? Mul(w, wt[a][slot[a]]) : wt[a][slot[a]];
      }
      absl::StatusOr<Expr> xv = ge.At(f.x, in_idx);
      if (!xv.ok()) {
        err = xv.status();
        return Block({});
      }
      Expr term = w ? Mul(*xv, w) : *xv;
      sum = sum ? Add(sum, term) : term;
      size_t a = 0;
      for (; a < f.tables.size(); ++a) {
        if (++slot[a] < f.tables[a].taps) break;
        slot[a] = 0;
      }
      if (a == f.tables.size()) break;
    }
    if (!valid.empty()) {
      Expr all = valid[0];
      for (size_t i = 1; i < valid.size(); ++i) all = And(all, valid[i]);
      sum = Select(all, sum, FloatImm(f.plan.extrapolation));
    }
    absl::StatusOr<Stmt> stores = StoreThroughEpilogue(g, ge, resized, outs, sum, idx, FlatIndex(f.out_dims, idx));
    if (!stores.ok()) {
      err = stores.status();
      return Block({});
    }
    Stmt body = *stores;
    for (size_t i = lets.size(); i-- > 0;) body = LetStmt(lets[i].first, lets[i].second, body);
    return body;
  });
  RETURN_IF_ERROR(err);
  ASSIGN_OR_RETURN(nest, ScheduleNest(nest, f.out_dims, prefix, vw, tasks));
  Stmt body = WrapInsideParallel(nest, [&](Stmt inner) { return tables.Around(std::move(inner)); });
  return LoopFunc{"resize", ge.args(), body};
}

}  // namespace

WorkloadLowering ResizeLowering() {
  WorkloadLowering l;
  l.kind = "resize";
  l.match = [](const Graph& g) { return AnalyzeResize(g).status(); };
  l.enumerate = EnumerateResize;
  l.default_schedule = [](const Graph& g, const CpuTarget& t) { return PickDefault(EnumerateResize(g, t), t); };
  l.validate = ValidateResize;
  l.lower = LowerResize;
  return l;
}

}  // namespace kiln::loop_ir
