// GPU lowering of the pool kind (see gpu/lower_pool.h): a thread per `vw`
// outputs of a row, the window loops inside.
#include "compiler_core/codegen/loop_ir/gpu/lower_pool.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/gpu/group_reduce.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_pool.h"
#include "compiler_core/codegen/loop_ir/substitute.h"

namespace kiln::loop_ir::gpu {
namespace {

// Window extents up to this many taps along an axis are unrolled.
constexpr int64_t kMaxUnrolledTaps = 8;

Expr I(int64_t v) { return IntImm(v); }

// Threads' work items: `vw` outputs of an output row each.
int64_t Items(const WindowGeometry& s, int64_t vw) { return s.n * s.c * s.od * s.oh * CeilDiv(s.ow, vw); }

std::vector<ScheduleConfig> EnumerateForm(const PoolForm& f) { return FlatSpace(4, f.geo.ow, {1, 2}); }

std::vector<ScheduleConfig> Enumerate(const Graph& g, const GpuTarget&) {
  absl::StatusOr<PoolForm> f = AnalyzePool(g);
  if (!f.ok()) return {};
  return EnumerateForm(*f);
}

// The widest vw that divides the output width (whole vector stores, no
// idle lanes) while enough threads remain to fill the GPU, 256 threads, one
// item each.
ScheduleConfig Default(const Graph& g, const GpuTarget&) {
  absl::StatusOr<PoolForm> f = AnalyzePool(g);
  if (!f.ok()) return {};
  int64_t vw = 1;
  while (vw < 4 && f->geo.ow % (vw * 2) == 0 && Items(f->geo, vw * 2) >= kGpuFillThreads) vw *= 2;
  ScheduleConfig c;
  c.Set("bt", 256);
  c.Set("un", 1);
  c.Set("vw", vw);
  return c;
}

absl::Status ValidateForm(const Graph& g, const PoolForm& f, const ScheduleConfig& c) {
  RETURN_IF_ERROR(ValidateGpuKnobs(g, c, {"bt", "un", "vw"}));
  const int64_t vw = c.Get("vw", 1), un = c.Get("un", 1);
  if (vw != 1 && vw != 2 && vw != 4) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob vw=", vw,
                                                   " is not 1, 2 or 4 for pool ", f.pool->name()));
  }
  if (un < 1 || un > 8) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob un=", un, " is not in [1, 8]"));
  }
  return absl::OkStatus();
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  ASSIGN_OR_RETURN(PoolForm f, AnalyzePool(g));
  return ValidateForm(g, f, c);
}

// for (var, 0, extent) body, unrolled when short; body at var = 0 for one tap.
Stmt TapLoop(const std::string& var, int64_t extent, Stmt body) {
  if (extent == 1) return Substitute(body, var, I(0));
  return For(var, I(extent), std::move(body), extent <= kMaxUnrolledTaps ? ForKind::kUnrolled : ForKind::kSerial);
}

// `s` with its lane loops (variable v) of one lane replaced by their body
// at v = 0.
Stmt SingleLane(const Stmt& s) {
  if (s == nullptr) return s;
  if (s->kind == StmtKind::kFor && s->var == "v") return Substitute(SingleLane(s->body[0]), "v", I(0));
  if (s->kind == StmtKind::kStore || s->kind == StmtKind::kWarpReduce) return s;
  auto n = std::make_shared<StmtNode>(*s);
  for (Stmt& c : n->body) c = SingleLane(c);
  return n;
}

// The item's outputs: (plane p, od, oh, ow = owo * vw + v for v < vw).
absl::StatusOr<Stmt> Item(const Graph& g, GraphExpr& ge, const PoolForm& f, const Buffer& x, const Buffer& indices,
                          int64_t vw, const Expr& item) {
  const WindowGeometry& s = f.geo;
  const int64_t owq = CeilDiv(s.ow, vw);
  Expr owo = Var("owo"), oh = Var("oh"), od = s.three_d ? Var("od") : I(0), p = Var("p"), v = Var("v");
  Expr ow = Add(Mul(owo, I(vw)), v);
  const double identity = f.is_max ? -INFINITY : 0.0;
  Buffer acc = MakeBuffer("acc", {vw}, BufferRole::kTemp);
  Buffer pos = MakeBuffer("pos", {vw}, BufferRole::kTemp, -1, ScalarType::kI64);
  // Per tap: the input position, checked against each input extent.
  Expr kd = s.three_d ? Var("kd") : I(0), kh = Var("kh"), kw = Var("kw");
  Expr id = Add(Sub(Mul(od, I(s.sd)), I(s.pad_front)), Mul(kd, I(s.dd)));
  Expr ih = Add(Sub(Mul(oh, I(s.sh)), I(s.pad_top)), Mul(kh, I(s.dh)));
  Expr iw = Add(Sub(Mul(ow, I(s.sw)), I(s.pad_left)), Mul(kw, I(s.dw)));
  auto inside = [](const Expr& i, int64_t extent) { return And(Ge(i, I(0)), Lt(i, I(extent))); };
  Expr at = Add(Mul(Add(Mul(Var("id"), I(s.h)), Var("ih")), I(s.w)), Var("iw"));  // in the plane
  Expr val = Load(x, Add(Mul(p, I(s.d * s.h * s.w)), at));
  Stmt update;
  if (f.is_max) {
    // The first tap inside the input, then every strictly greater one.
    Expr cur = Load(acc, v), xv = Var("xv", ScalarType::kF32), take = Var("take", ScalarType::kBool);
    Expr where = f.col_major ? Add(Mul(Add(Mul(Var("iw"), I(s.h)), Var("ih")), I(s.d)), Var("id")) : at;
    update = LetStmt("xv", val,
                     LetStmt("take", Or(Lt(Load(pos, v), I(0)), Gt(xv, cur)),
                             Block({Store(acc, v, Select(take, xv, cur)),
                                    Store(pos, v, Select(take, where, Load(pos, v)))})));
  } else {
    update = Store(acc, v, Add(Load(acc, v), val));
  }
  // The taps, outermost first; each axis's check hoisted out of the loops
  // inside it, the lanes innermost.
  Stmt taps = For("v", I(vw), LetStmt("iw", iw, IfThen(inside(Var("iw"), s.w), update)), ForKind::kUnrolled);
  taps = TapLoop("kw", s.kw, taps);
  taps = s.one_d ? LetStmt("ih", I(0), taps)
                 : TapLoop("kh", s.kh, LetStmt("ih", ih, IfThen(inside(Var("ih"), s.h), taps)));
  taps = s.three_d ? TapLoop("kd", s.kd, LetStmt("id", id, IfThen(inside(Var("id"), s.d), taps)))
                   : LetStmt("id", I(0), taps);
  std::vector<Stmt> init = {Store(acc, v, FloatImm(identity))};
  if (f.is_max) init.push_back(Store(pos, v, I(-1)));
  Stmt init_lanes = For("v", I(vw), Block(init), ForKind::kUnrolled);

  // The result of each output, through the epilogue.
  Expr result = Load(acc, v);
  if (!f.is_max) {
    Expr hs = Sub(Mul(oh, I(s.sh)), I(s.pad_top)), ws = Sub(Mul(ow, I(s.sw)), I(s.pad_left)),
         ds = Sub(Mul(od, I(s.sd)), I(s.pad_front));
    auto count = [&](const Expr& start, int64_t k, int64_t extent, int64_t pad_end) {
      if (f.include_pad) return Sub(Min(Add(start, I(k)), I(extent + pad_end)), start);
      return Max(Sub(Min(Add(start, I(k)), I(extent)), Max(start, I(0))), I(0));
    };
    Expr cnt = count(ws, s.kw, s.w, s.pad_right);
    if (!s.one_d) cnt = Mul(count(hs, s.kh, s.h, s.pad_bottom), cnt);
    if (s.three_d) cnt = Mul(count(ds, s.kd, s.d, s.pad_back), cnt);
    result = Div(result, Cast(ScalarType::kF32, Max(cnt, I(1))));
  }
  std::vector<Expr> idx = s.one_d     ? std::vector<Expr>{Div(p, I(s.c)), Mod(p, I(s.c)), ow}
                          : s.three_d ? std::vector<Expr>{Div(p, I(s.c)), Mod(p, I(s.c)), od, oh, ow}
                                      : std::vector<Expr>{Div(p, I(s.c)), Mod(p, I(s.c)), oh, ow};
  Expr oi = Add(Mul(Add(Mul(Add(Mul(p, I(s.od)), od), I(s.oh)), oh), I(s.ow)), ow);
  const Value* pool_out = f.pool->output(0);
  const AnchorOutputs outs = PlanAnchorOutputs(g, pool_out, f.indices_out);
  ASSIGN_OR_RETURN(Stmt store, StoreThroughEpilogue(g, ge, pool_out, outs, result, idx, oi));
  if (indices != nullptr) {
    store = Block({store, Store(indices, oi, Add(Mul(p, I(s.d * s.h * s.w)), Load(pos, v)))});
  }
  if (s.ow % vw != 0) store = IfThen(Lt(ow, I(s.ow)), store);
  Stmt stores = For("v", I(vw), store, vw > 1 ? ForKind::kVectorized : ForKind::kSerial);

  Stmt body = Block({init_lanes, taps, stores});
  if (vw == 1) body = SingleLane(body);
  body = Allocate(acc, body);
  if (f.is_max) body = Allocate(pos, body);
  // item = ((p * od + od_) * oh + oh_) * owq + owo
  Expr rest = Div(item, I(owq));
  body = LetStmt("owo", Mod(item, I(owq)), body);
  body = LetStmt("oh", Mod(rest, I(s.oh)), body);
  Expr planes_rest = Div(rest, I(s.oh));
  if (s.three_d) {
    body = LetStmt("od", Mod(planes_rest, I(s.od)), body);
    planes_rest = Div(planes_rest, I(s.od));
  }
  return LetStmt("p", planes_rest, body);
}

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  ASSIGN_OR_RETURN(PoolForm f, AnalyzePool(g));
  RETURN_IF_ERROR(ValidateForm(g, f, c));
  const int64_t vw = c.Get("vw", 1), bt = c.Get("bt", 256), un = c.Get("un", 1);
  GraphExpr ge(g);
  std::vector<Buffer> args = ge.args();
  Buffer indices;  // the Indices output, as i64 whatever GraphExpr made of it
  if (f.indices != nullptr) {
    const Buffer& o = ge.output_buffer(f.indices_out);
    indices = MakeBuffer(o->name, o->shape, BufferRole::kOutput, o->arg, ScalarType::kI64);
    args[o->arg] = indices;
  }
  const int64_t items = Items(f.geo, vw);
  if (items == 0) return absl::InvalidArgumentError(absl::StrCat("pool ", f.pool->name(), " has no outputs"));
  absl::Status err = absl::OkStatus();
  Stmt body = FlatKernel({{items, [&](Expr item) -> Stmt {
                             absl::StatusOr<Stmt> s = Item(g, ge, f, args[f.x_arg], indices, vw, item);
                             if (!s.ok()) {
                               err = s.status();
                               return Block({});
                             }
                             return *s;
                           }}},
                         bt, un);
  RETURN_IF_ERROR(err);
  return LoopFunc{"pool", args, body};
}

}  // namespace

GpuWorkloadLowering GpuPoolLowering() {
  return GpuWorkloadLowering{"pool", Enumerate, Default, Validate, Lower};
}

}  // namespace kiln::loop_ir::gpu
