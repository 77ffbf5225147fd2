// "pool" workloads: MaxPool/AveragePool + elementwise epilogue lowered to a
// packed loop nest vectorized along the output width (see lower_pool.h).
#include "compiler_core/codegen/loop_ir/lower_pool.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_conv.h"
#include "compiler_core/codegen/loop_ir/phase_rows.h"
#include "compiler_core/codegen/loop_ir/substitute.h"

namespace kiln::loop_ir {
namespace {

constexpr int64_t kMaxPackFloats = 128 * 1024;

// CheckWorkloadBasics, with MaxPool's Indices value (a static i64 workload
// output that nothing inside the workload reads) allowed.
absl::Status CheckBasics(const Graph& g, const Value* indices) {
  if (indices == nullptr) return CheckWorkloadBasics(g);
  if (!indices->users().empty()) return absl::UnimplementedError("the Indices output is read inside the workload");
  const TensorType& t = indices->type();
  if (!t.known || !t.IsStatic() || t.dtype != DType::kInt64) {
    return absl::UnimplementedError(absl::StrCat("value ", indices->name(), " is not a static i64 tensor"));
  }
  return CheckWorkload(
      g,
      [indices](const Value* v) {
        return v == indices || IsStructuralInt(v) || v->type().dtype == DType::kFloat32;
      },
      "f32 tensor");
}

}  // namespace

absl::StatusOr<PoolForm> AnalyzePool(const Graph& g) {
  if (g.nodes().empty() || g.outputs().empty()) return CheckWorkloadBasics(g);
  PoolForm f;
  for (const auto& n : g.nodes()) {
    if (n->op_type() == "MaxPool" || n->op_type() == "AveragePool") {
      if (f.pool != nullptr) return NodeError(*n, "a second pool in one workload");
      f.pool = n.get();
    }
  }
  if (f.pool != nullptr && f.pool->op_type() == "MaxPool" && f.pool->num_outputs() > 1) {
    f.indices = f.pool->output(1);
  }
  RETURN_IF_ERROR(CheckBasics(g, f.indices));
  for (const auto& n : g.nodes()) {
    if (n.get() == f.pool) continue;
    if (!IsInlinableElementwise(n->op_type())) return NodeError(*n, "not an elementwise epilogue operator");
    RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
  }
  if (f.pool == nullptr) return absl::UnimplementedError(absl::StrCat("workload ", g.name(), " has no pool"));
  const Node& p = *f.pool;
  f.is_max = p.op_type() == "MaxPool";
  if (p.num_outputs() > 2) return NodeError(p, "more than two outputs");
  if (f.indices != nullptr) {
    for (size_t j = 0; j < g.outputs().size(); ++j) {
      if (g.outputs()[j] == f.indices) f.indices_out = static_cast<int>(j);
    }
    if (f.indices_out < 0) {
      f.indices = nullptr;  // computed by nobody: the pool is single-output here
    } else if (g.outputs().size() < 2) {
      return NodeError(p, "the Indices output without a value output");
    }
    f.col_major = p.GetInt("storage_order", 0) != 0;
  }
  for (int i = 0; i < static_cast<int>(g.inputs().size()); ++i) {
    if (g.inputs()[i] == p.input(0)) f.x_arg = i;
  }
  if (f.x_arg < 0) return NodeError(p, "input computed inside the workload");
  ASSIGN_OR_RETURN(f.geo, ResolveWindow(p, p.GetInts("kernel_shape", {})));
  f.include_pad = p.GetInt("count_include_pad", 0) != 0;
  if (!f.is_max && (f.geo.dd != 1 || f.geo.dh != 1 || f.geo.dw != 1)) return NodeError(p, "dilated AveragePool");
  std::vector<int64_t> od = DimsOf(p.output(0));
  for (const auto& n : g.nodes()) {
    if (DimsOf(n->output(0)) != od) return NodeError(*n, "epilogue value does not have the pool's shape");
  }
  for (const Value* v : g.outputs()) {
    if (DimsOf(v) != od) return NodeError(p, absl::StrCat("output ", v->name(), " is not of the pool's shape"));
  }
  int64_t rin = (f.geo.kh - 1) * f.geo.dh + 1, din = (f.geo.kd - 1) * f.geo.dd + 1;
  if (din * rin * (f.geo.ow * f.geo.sw + f.geo.kw * f.geo.dw + 16) > kMaxPackFloats) {
    return NodeError(p, "one output row reads more input than the stack pack holds");
  }
  return f;
}

namespace {

void PackDims(const PoolForm& f, int64_t vw, int64_t rows, int64_t* rin, int64_t* wq, int64_t* owr) {
  const WindowGeometry& s = f.geo;
  *rin = (rows - 1) * s.sh + (s.kh - 1) * s.dh + 1;
  *owr = CeilDiv(s.ow, vw) * vw;
  *wq = CeilDiv(*owr + ((s.kw - 1) * s.dw) / s.sw, vw) * vw;
}

absl::Status CheckKnobs(const PoolForm& f, int64_t vw, int64_t rows, const CpuTarget& target) {
  bool ok = vw >= 1 && vw <= target.FloatLanes() && (vw & (vw - 1)) == 0 && rows >= 1 &&
            rows <= std::max<int64_t>(f.geo.oh, 1);
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("pool ", f.pool->name(), ": knobs out of range"));
  int64_t rin, wq, owr;
  PackDims(f, vw, rows, &rin, &wq, &owr);
  if (((f.geo.kd - 1) * f.geo.dd + 1) * rin * f.geo.sw * wq > kMaxPackFloats) {
    return absl::InvalidArgumentError(absl::StrCat("pool ", f.pool->name(), ": rows=", rows, " overflow the pack"));
  }
  return absl::OkStatus();
}

std::vector<ScheduleConfig> Enumerate(const Graph& g, const CpuTarget& target) {
  absl::StatusOr<PoolForm> f = AnalyzePool(g);
  if (!f.ok()) return {};
  std::vector<int64_t> vws = VectorWidths(target, f->geo.ow);
  if (vws.size() > 2) vws.erase(vws.begin(), vws.end() - 2);
  std::vector<ScheduleConfig> out;
  for (int64_t vw : vws) {
    for (int64_t rows : {1, 2, 4, 8}) {
      if (rows > 1 && rows / 2 >= f->geo.oh) break;
      if (!CheckKnobs(*f, vw, rows, target).ok()) continue;
      ScheduleConfig c;
      c.Set("vw", vw);
      c.Set("rows", rows);
      out.push_back(c);
    }
  }
  return out;
}

// Widest vectors; about 8 output rows per task (fewer tasks and input rows
// packed twice: 3x3 stride-2 max pools of 64x112x112 0.22 -> 0.19 ms and
// 256x27x27 0.020 -> 0.018 ms against 4 rows, tuned on Zen 5).
ScheduleConfig Default(const Graph& g, const CpuTarget& target) {
  return BestBy(Enumerate(g, target), [](const ScheduleConfig& c) {
    return std::make_pair(c.Get("vw", 1), -std::abs(c.Get("rows", 1) - 8));
  });
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const CpuTarget& target) {
  ASSIGN_OR_RETURN(PoolForm f, AnalyzePool(g));
  for (const auto& [key, v] : c.knobs) {
    if (key != "vw" && key != "rows") {
      return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob ", key,
                                                     " does not apply to pool ", f.pool->name()));
    }
  }
  return CheckKnobs(f, c.Get("vw", 1), c.Get("rows", 1), target);
}

Expr I(int64_t v) { return IntImm(v); }

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& config, const CpuTarget& target) {
  ASSIGN_OR_RETURN(PoolForm f, AnalyzePool(g));
  const int64_t vw = config.Get("vw", 1), rows = config.Get("rows", 1);
  RETURN_IF_ERROR(CheckKnobs(f, vw, rows, target));
  const WindowGeometry& s = f.geo;
  int64_t rin, wq, owr;
  PackDims(f, vw, rows, &rin, &wq, &owr);
  const int64_t ohb = CeilDiv(s.oh, rows);
  const int64_t planes = s.n * s.c;
  const int64_t din = (s.kd - 1) * s.dd + 1;  // input depth slices per output slice
  const double identity = f.is_max ? -std::numeric_limits<double>::infinity() : 0.0;

  GraphExpr ge(g);
  Buffer x = ge.args()[f.x_arg];
  std::vector<Buffer> args = ge.args();
  Buffer ib;  // the Indices output, as i64 whatever GraphExpr made of it
  if (f.indices != nullptr) {
    const Buffer& o = ge.output_buffer(f.indices_out);
    ib = MakeBuffer(o->name, o->shape, BufferRole::kOutput, o->arg, ScalarType::kI64);
    args[o->arg] = ib;
  }
  const Value* pool_out = f.pool->output(0);
  const AnchorOutputs outs = PlanAnchorOutputs(g, pool_out, f.indices_out);
  Buffer raw = ge.output_buffer(outs.raw);
  ge.Bind(pool_out, raw);

  Expr p = Var("p_"), hb = Var("hb_"), odv = s.three_d ? Var("od_") : I(0);
  // xp[z][r][phase][q] = x[p, od*sd + z - pf, hb*rows*sh + r - pt, q*sw + phase - pl] or the identity
  Buffer xp = MakeBuffer("xp", {din * rin * s.sw * wq}, BufferRole::kTemp);
  Stmt pack;
  {
    Expr z = s.three_d ? Var("pz_") : I(0), r = Var("pr_");
    Expr id = Sub(Add(Mul(odv, I(s.sd)), z), I(s.pad_front));
    Expr ih = Sub(Add(Mul(hb, I(rows * s.sh)), r), I(s.pad_top));
    Expr row_inside = And(Ge(ih, I(0)), Lt(ih, I(s.h)));
    if (s.three_d) row_inside = And(And(Ge(id, I(0)), Lt(id, I(s.d))), row_inside);
    Expr plane = s.three_d ? Add(Mul(p, I(s.d)), id) : p;
    PhaseRowPack row{.x = x,
                     .xp = xp,
                     .x_row = Mul(Add(Mul(plane, I(s.h)), ih), I(s.w)),
                     .row_inside = row_inside,
                     .prow = s.three_d ? Add(Mul(z, I(rin)), r) : r,
                     .w = s.w,
                     .sw = s.sw,
                     .pad_left = s.pad_left,
                     .wq = wq,
                     .vw = vw,
                     .fill = identity};
    pack = For("pr_", I(rin), PackPhaseRow(row));
    if (s.three_d) pack = For("pz_", I(din), pack);
  }
  Buffer acc = MakeBuffer("acc", {vw}, BufferRole::kTemp);
  Expr rr = Var("rr_"), owo = Var("owo_"), v = Var("v_"), kd = s.three_d ? Var("kd_") : I(0), kh = Var("kh_"),
       kw = Var("kw_");
  Expr oh = Add(Mul(hb, I(rows)), rr);
  Expr ow = Add(Mul(owo, I(vw)), v);
  // The tap (kd, kh, kw) of the window at (odv, oh, ow): its place in xp,
  // its input position and whether that is inside the input.
  auto tap_xp = [&](const Expr& tkd, const Expr& tkh, const Expr& tkw) {
    Expr off = Mul(tkw, I(s.dw));
    Expr row = Add(Mul(rr, I(s.sh)), Mul(tkh, I(s.dh)));
    if (s.three_d) row = Add(Mul(Mul(tkd, I(s.dd)), I(rin)), row);
    return Add(Mul(Add(Mul(row, I(s.sw)), Mod(off, I(s.sw))), I(wq)), Add(ow, Div(off, I(s.sw))));
  };
  auto tap_in = [&](const Expr& tkd, const Expr& tkh, const Expr& tkw) {
    std::vector<Expr> at = {Add(Sub(Mul(odv, I(s.sd)), I(s.pad_front)), Mul(tkd, I(s.dd))),
                            Add(Sub(Mul(oh, I(s.sh)), I(s.pad_top)), Mul(tkh, I(s.dh))),
                            Add(Sub(Mul(ow, I(s.sw)), I(s.pad_left)), Mul(tkw, I(s.dw)))};
    return at;
  };
  // MaxPool takes the window's first tap inside the input, then any that is
  // strictly greater, as the reference does: a NaN first tap stays, a window
  // of -inf gives its first tap's index, and a window entirely in the padding
  // keeps -inf and index plane_base - 1 (nothing taken). So the accumulator
  // starts at the first tap inside (a scalar per output row along H and D;
  // per lane along W only where the window starts in the left padding), and
  // every tap then replaces it only when strictly greater: padding holds
  // -inf, which never is.
  auto first_inside = [&](const Expr& start, int64_t pad, int64_t dil, int64_t k) -> Expr {
    if (pad == 0) return I(0);  // a window never starts before the input
    return Min(Select(Lt(start, I(0)), Div(Sub(I(dil - 1), start), I(dil)), I(0)), I(k - 1));
  };
  const Expr kd0 = s.three_d ? first_inside(Sub(Mul(odv, I(s.sd)), I(s.pad_front)), s.pad_front, s.dd, s.kd) : I(0);
  const Expr kh0 = first_inside(Sub(Mul(oh, I(s.sh)), I(s.pad_top)), s.pad_top, s.dh, s.kh);
  const Expr kw0 = first_inside(Sub(Mul(ow, I(s.sw)), I(s.pad_left)), s.pad_left, s.dw, s.kw);
  const Expr plane_base = Mul(p, I(s.d * s.h * s.w));
  auto input_position = [&](const std::vector<Expr>& in) {
    const Expr &id = in[0], &ih = in[1], &iw = in[2];
    Expr at = f.col_major ? Add(Mul(Add(Mul(iw, I(s.h)), ih), I(s.d)), id) : Add(Mul(Add(Mul(id, I(s.h)), ih), I(s.w)), iw);
    return Add(plane_base, at);
  };
  Buffer acc_i = MakeBuffer("acc_i", {vw}, BufferRole::kTemp, -1, ScalarType::kI64);
  // The accumulator's start, the window's first tap along W being `kw_first`.
  auto init_at = [&](const Expr& kw_first) -> Stmt {
    if (!f.is_max) return For("v_", I(vw), Store(acc, v, FloatImm(identity)), ForKind::kVectorized);
    std::vector<Stmt> st = {Store(acc, v, Load(xp, tap_xp(kd0, kh0, kw_first)))};
    if (ib) {
      const std::vector<Expr> in = tap_in(kd0, kh0, kw_first);
      Expr inside = And(And(Ge(in[1], I(0)), Lt(in[1], I(s.h))), And(Ge(in[2], I(0)), Lt(in[2], I(s.w))));
      if (s.three_d) inside = And(And(Ge(in[0], I(0)), Lt(in[0], I(s.d))), inside);
      st.push_back(Store(acc_i, v, Select(inside, input_position(in), Sub(plane_base, I(1)))));
    }
    return For("v_", I(vw), Block(st), ForKind::kVectorized);
  };
  Stmt red;
  {
    Expr val = Load(xp, tap_xp(kd, kh, kw));
    Expr cur = Load(acc, v);
    Stmt upd = Store(acc, v, Add(cur, val));  // AveragePool: padding packed as 0
    if (f.is_max && !ib) upd = Store(acc, v, Select(Gt(val, cur), val, cur));
    if (f.is_max && ib) {
      // Decided once, before either store changes what it reads.
      Expr t = Var("take_", ScalarType::kBool);
      upd = LetStmt("take_", Gt(val, cur),
                    Block({Store(acc_i, v, Select(t, input_position(tap_in(kd, kh, kw)), Load(acc_i, v))),
                           Store(acc, v, Select(t, val, cur))}));
    }
    red = For("kh_", I(s.kh),
              For("kw_", I(s.kw), For("v_", I(vw), upd, ForKind::kVectorized),
                  s.kw <= 8 ? ForKind::kUnrolled : ForKind::kSerial));
    if (s.three_d) red = For("kd_", I(s.kd), red);
  }
  auto store_of = [&](bool guard) -> absl::StatusOr<Stmt> {
    Expr result = Load(acc, v);
    if (!f.is_max) {
      Expr hs = Sub(Mul(oh, I(s.sh)), I(s.pad_top));
      Expr ws = Sub(Mul(ow, I(s.sw)), I(s.pad_left));
      Expr ds = Sub(Mul(odv, I(s.sd)), I(s.pad_front));
      Expr cnt_d, cnt_h, cnt_w;
      if (f.include_pad) {
        cnt_d = Sub(Min(Add(ds, I(s.kd)), I(s.d + s.pad_back)), ds);
        cnt_h = Sub(Min(Add(hs, I(s.kh)), I(s.h + s.pad_bottom)), hs);
        cnt_w = Sub(Min(Add(ws, I(s.kw)), I(s.w + s.pad_right)), ws);
      } else {
        cnt_d = Max(Sub(Min(Add(ds, I(s.kd)), I(s.d)), Max(ds, I(0))), I(0));
        cnt_h = Max(Sub(Min(Add(hs, I(s.kh)), I(s.h)), Max(hs, I(0))), I(0));
        cnt_w = Max(Sub(Min(Add(ws, I(s.kw)), I(s.w)), Max(ws, I(0))), I(0));
      }
      Expr cnt = Mul(cnt_h, cnt_w);
      if (s.three_d) cnt = Mul(cnt_d, cnt);
      result = Div(result, Cast(ScalarType::kF32, Max(cnt, I(1))));
    }
    std::vector<Expr> idx = s.one_d     ? std::vector<Expr>{Div(p, I(s.c)), Mod(p, I(s.c)), ow}
                            : s.three_d ? std::vector<Expr>{Div(p, I(s.c)), Mod(p, I(s.c)), odv, oh, ow}
                                        : std::vector<Expr>{Div(p, I(s.c)), Mod(p, I(s.c)), oh, ow};
    Expr oplane = s.three_d ? Add(Mul(p, I(s.od)), odv) : p;
    Expr oi = Add(Mul(Add(Mul(oplane, I(s.oh)), oh), I(s.ow)), ow);
    ASSIGN_OR_RETURN(Stmt body, StoreThroughEpilogue(g, ge, pool_out, outs, result, idx, oi));
    if (ib) body = Block({body, Store(ib, oi, Load(acc_i, v))});
    if (guard) body = IfThen(Lt(ow, I(s.ow)), body);
    return For("v_", I(vw), body, ForKind::kVectorized);
  };
  // One vector of an output row, owo_ its index.
  auto vector_block = [&](bool inside, bool guard) -> absl::StatusOr<Stmt> {
    ASSIGN_OR_RETURN(Stmt store, store_of(guard));
    Stmt b = Allocate(acc, Block({init_at(inside ? I(0) : kw0), red, store}));
    return ib ? Allocate(acc_i, b) : b;
  };
  // A row's vectors in runs: those whose windows may start in the left
  // padding (their first tap per lane), then those whose windows all start
  // inside the input (first tap 0: contiguous loads, where a per-lane first
  // tap made every vector's start a gather), then a ragged last vector
  // alone, its stores guarded by a constant bound (a guard on every vector
  // made each store a masked store, microcode on Zen 3).
  const int64_t nvec = owr / vw;
  const bool ragged = s.ow % vw != 0;
  const int64_t full = nvec - (ragged ? 1 : 0);
  const int64_t inside_from = std::min(nvec, s.pad_left == 0 ? int64_t{0} : CeilDiv(s.pad_left, s.sw * vw));
  std::vector<Stmt> runs;
  auto run = [&](int64_t begin, int64_t end, bool inside, bool guard) -> absl::Status {
    if (end <= begin) return absl::OkStatus();
    ASSIGN_OR_RETURN(Stmt b, vector_block(inside, guard));
    runs.push_back(end - begin == 1 ? Substitute(b, "owo_", I(begin))
                                    : For("owm_", I(end - begin), Substitute(b, "owo_", Add(Var("owm_"), I(begin)))));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(run(0, std::min(inside_from, full), false, false));
  RETURN_IF_ERROR(run(inside_from, full, true, false));
  if (ragged) RETURN_IF_ERROR(run(nvec - 1, nvec, nvec - 1 >= inside_from, true));
  Stmt block = Block(std::move(runs));
  Stmt per_rows = For("rr_", I(rows), IfThen(Lt(oh, I(s.oh)), block));
  Stmt body = Allocate(xp, Block({pack, per_rows}));
  if (s.three_d) {
    // Tasks are (plane, od, hb).
    body = LetStmt("p_", Div(Var("t_"), I(s.od * ohb)),
                   LetStmt("od_", Mod(Div(Var("t_"), I(ohb)), I(s.od)), LetStmt("hb_", Mod(Var("t_"), I(ohb)), body)));
  } else {
    body = LetStmt("p_", Div(Var("t_"), I(ohb)), LetStmt("hb_", Mod(Var("t_"), I(ohb)), body));
  }
  return LoopFunc{"pool", args, For("t_", I(planes * s.od * ohb), body, ForKind::kParallel)};
}

}  // namespace

WorkloadLowering PoolLowering() {
  WorkloadLowering l;
  l.kind = "pool";
  l.match = [](const Graph& g) { return AnalyzePool(g).status(); };
  l.enumerate = Enumerate;
  l.default_schedule = Default;
  l.validate = Validate;
  l.lower = Lower;
  return l;
}

}  // namespace kiln::loop_ir
