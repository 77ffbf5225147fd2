// "pool" workloads: MaxPool/AveragePool + elementwise epilogue lowered to a
// packed loop nest vectorized along the output width (see lower_pool.h).
#include "compiler_core/loop_ir/lower_pool.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "compiler_core/loop_ir/graph_expr.h"
#include "compiler_core/loop_ir/lower_common.h"
#include "compiler_core/loop_ir/lower_conv.h"
#include "compiler_core/status_macros.h"

namespace kiln::loop_ir {
namespace {

constexpr int64_t kMaxPackFloats = 128 * 1024;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

absl::Status NodeError(const Node& n, const std::string& why) {
  return absl::UnimplementedError(absl::StrCat("node ", n.name(), " (", n.op_type(), "): ", why));
}

struct PoolForm {
  const Node* pool = nullptr;
  bool is_max = true;
  bool include_pad = false;
  WindowGeometry geo;
  int x_arg = -1;
};

absl::StatusOr<PoolForm> Analyze(const Graph& g) {
  RETURN_IF_ERROR(CheckWorkloadBasics(g));
  PoolForm f;
  for (const auto& n : g.nodes()) {
    if (n->op_type() == "MaxPool" || n->op_type() == "AveragePool") {
      if (f.pool != nullptr) return NodeError(*n, "a second pool in one workload");
      f.pool = n.get();
      continue;
    }
    if (!IsInlinableElementwise(n->op_type())) return NodeError(*n, "not an elementwise epilogue operator");
    RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
  }
  if (f.pool == nullptr) return absl::UnimplementedError(absl::StrCat("workload ", g.name(), " has no pool"));
  const Node& p = *f.pool;
  f.is_max = p.op_type() == "MaxPool";
  if (p.num_outputs() != 1) return NodeError(p, "the Indices output");
  for (int i = 0; i < static_cast<int>(g.inputs().size()); ++i) {
    if (g.inputs()[i] == p.input(0)) f.x_arg = i;
  }
  if (f.x_arg < 0) return NodeError(p, "input computed inside the workload");
  ASSIGN_OR_RETURN(f.geo, ResolveWindow(p, p.GetInts("kernel_shape", {})));
  f.include_pad = p.GetInt("count_include_pad", 0) != 0;
  if (!f.is_max && (f.geo.dh != 1 || f.geo.dw != 1)) return NodeError(p, "dilated AveragePool");
  std::vector<int64_t> od = DimsOf(p.output(0));
  for (const auto& n : g.nodes()) {
    if (DimsOf(n->output(0)) != od) return NodeError(*n, "epilogue value does not have the pool's shape");
  }
  for (const Value* v : g.outputs()) {
    if (DimsOf(v) != od) return NodeError(p, absl::StrCat("output ", v->name(), " is not of the pool's shape"));
  }
  int64_t rin = (f.geo.kh - 1) * f.geo.dh + 1;
  if (rin * (f.geo.ow * f.geo.sw + f.geo.kw * f.geo.dw + 16) > kMaxPackFloats) {
    return NodeError(p, "one output row reads more input than the stack pack holds");
  }
  return f;
}

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
  if (rin * f.geo.sw * wq > kMaxPackFloats) {
    return absl::InvalidArgumentError(absl::StrCat("pool ", f.pool->name(), ": rows=", rows, " overflow the pack"));
  }
  return absl::OkStatus();
}

std::vector<ScheduleConfig> Enumerate(const Graph& g, const CpuTarget& target) {
  absl::StatusOr<PoolForm> f = Analyze(g);
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

// Widest vectors; about 8 output rows per task (fewer tasks, one pack each).
ScheduleConfig Default(const Graph& g, const CpuTarget& target) {
  std::vector<ScheduleConfig> space = Enumerate(g, target);
  if (space.empty()) return {};
  ScheduleConfig best = space.front();
  auto score = [](const ScheduleConfig& c) { return std::make_pair(c.Get("vw", 1), -std::abs(c.Get("rows", 1) - 4)); };
  for (const ScheduleConfig& c : space) {
    if (score(c) > score(best)) best = c;
  }
  return best;
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const CpuTarget& target) {
  ASSIGN_OR_RETURN(PoolForm f, Analyze(g));
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
  ASSIGN_OR_RETURN(PoolForm f, Analyze(g));
  const int64_t vw = config.Get("vw", 1), rows = config.Get("rows", 1);
  RETURN_IF_ERROR(CheckKnobs(f, vw, rows, target));
  const WindowGeometry& s = f.geo;
  int64_t rin, wq, owr;
  PackDims(f, vw, rows, &rin, &wq, &owr);
  const int64_t ohb = CeilDiv(s.oh, rows);
  const int64_t planes = s.n * s.c;
  const double identity = f.is_max ? -std::numeric_limits<double>::infinity() : 0.0;

  GraphExpr ge(g);
  Buffer x = ge.args()[f.x_arg];
  const Value* pool_out = f.pool->output(0);
  int num_out = static_cast<int>(g.outputs().size());
  int first = num_out - 1;
  for (int j = 0; j < num_out; ++j) {
    if (g.outputs()[j] == pool_out) first = j;
  }
  Buffer raw = ge.output_buffer(first);
  ge.Bind(pool_out, raw);

  Expr p = Var("p_"), hb = Var("hb_");
  Buffer xp = MakeBuffer("xp", {rin * s.sw * wq}, BufferRole::kTemp);
  Stmt pack;
  {
    Expr r = Var("pr_"), ph = Var("pp_"), qo = Var("pq_"), qi = Var("pv_");
    Expr q = Add(Mul(qo, I(vw)), qi);
    Expr ih = Sub(Add(Mul(hb, I(rows * s.sh)), r), I(s.pad_top));
    Expr iw = Sub(Add(Mul(q, I(s.sw)), ph), I(s.pad_left));
    Expr inside = And(And(Ge(ih, I(0)), Lt(ih, I(s.h))), And(Ge(iw, I(0)), Lt(iw, I(s.w))));
    Expr xi = Add(Mul(Add(Mul(p, I(s.h)), ih), I(s.w)), iw);
    Expr pi = Add(Mul(Add(Mul(r, I(s.sw)), ph), I(wq)), q);
    Stmt body = IfThen(inside, Store(xp, pi, Load(x, xi)), Store(xp, pi, FloatImm(identity)));
    pack = For("pr_", I(rin), For("pp_", I(s.sw), For("pq_", I(wq / vw), For("pv_", I(vw), body, ForKind::kVectorized))));
  }
  Buffer acc = MakeBuffer("acc", {vw}, BufferRole::kTemp);
  Expr rr = Var("rr_"), owo = Var("owo_"), v = Var("v_"), kh = Var("kh_"), kw = Var("kw_");
  Expr oh = Add(Mul(hb, I(rows)), rr);
  Expr ow = Add(Mul(owo, I(vw)), v);
  Stmt init = For("v_", I(vw), Store(acc, v, FloatImm(identity)), ForKind::kVectorized);
  Stmt red;
  {
    Expr off = Mul(kw, I(s.dw));
    Expr row = Add(Mul(rr, I(s.sh)), Mul(kh, I(s.dh)));
    Expr xi = Add(Mul(Add(Mul(row, I(s.sw)), Mod(off, I(s.sw))), I(wq)), Add(ow, Div(off, I(s.sw))));
    Expr val = Load(xp, xi);
    Expr cur = Load(acc, v);
    // Padding holds -inf, so a plain ordered max matches the reference's skip.
    Expr next = f.is_max ? Select(Gt(val, cur), val, cur) : Add(cur, val);
    red = For("kh_", I(s.kh),
              For("kw_", I(s.kw), For("v_", I(vw), Store(acc, v, next), ForKind::kVectorized),
                  s.kw <= 8 ? ForKind::kUnrolled : ForKind::kSerial));
  }
  Stmt store;
  {
    Expr result = Load(acc, v);
    if (!f.is_max) {
      Expr hs = Sub(Mul(oh, I(s.sh)), I(s.pad_top));
      Expr ws = Sub(Mul(ow, I(s.sw)), I(s.pad_left));
      Expr cnt_h, cnt_w;
      if (f.include_pad) {
        cnt_h = Sub(Min(Add(hs, I(s.kh)), I(s.h + s.pad_bottom)), hs);
        cnt_w = Sub(Min(Add(ws, I(s.kw)), I(s.w + s.pad_right)), ws);
      } else {
        cnt_h = Max(Sub(Min(Add(hs, I(s.kh)), I(s.h)), Max(hs, I(0))), I(0));
        cnt_w = Max(Sub(Min(Add(ws, I(s.kw)), I(s.w)), Max(ws, I(0))), I(0));
      }
      result = Div(result, Cast(ScalarType::kF32, Max(Mul(cnt_h, cnt_w), I(1))));
    }
    std::vector<Expr> idx = s.one_d ? std::vector<Expr>{Div(p, I(s.c)), Mod(p, I(s.c)), ow}
                                    : std::vector<Expr>{Div(p, I(s.c)), Mod(p, I(s.c)), oh, ow};
    Expr oi = Add(Mul(Add(Mul(p, I(s.oh)), oh), I(s.ow)), ow);
    std::vector<Stmt> st = {Store(raw, oi, result)};
    std::vector<int> order;
    for (int j = 0; j < num_out; ++j) {
      if (j != first) order.push_back(j);
    }
    if (g.outputs()[first] != pool_out) order.push_back(first);
    for (int j : order) {
      ASSIGN_OR_RETURN(Expr e, ge.At(g.outputs()[j], idx));
      st.push_back(Store(ge.output_buffer(j), oi, e));
    }
    Stmt body = Block(st);
    if (s.ow % vw != 0) body = IfThen(Lt(ow, I(s.ow)), body);
    store = For("v_", I(vw), body, ForKind::kVectorized);
  }
  Stmt block = For("owo_", I(owr / vw), Allocate(acc, Block({init, red, store})));
  Stmt per_rows = For("rr_", I(rows), IfThen(Lt(oh, I(s.oh)), block));
  Stmt body = Allocate(xp, Block({pack, per_rows}));
  body = LetStmt("p_", Div(Var("t_"), I(ohb)), LetStmt("hb_", Mod(Var("t_"), I(ohb)), body));
  return LoopFunc{"pool", ge.args(), For("t_", I(planes * ohb), body, ForKind::kParallel)};
}

}  // namespace

WorkloadLowering PoolLowering() {
  WorkloadLowering l;
  l.kind = "pool";
  l.match = [](const Graph& g) { return Analyze(g).status(); };
  l.enumerate = Enumerate;
  l.default_schedule = Default;
  l.validate = Validate;
  l.lower = Lower;
  return l;
}

}  // namespace kiln::loop_ir
