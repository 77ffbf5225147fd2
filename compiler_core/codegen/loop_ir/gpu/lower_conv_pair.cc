// GPU lowering of the conv pair: the expansion into shared memory, then the
// depthwise conv from it (see gpu/lower_conv_pair.h).
#include "compiler_core/codegen/loop_ir/gpu/lower_conv_pair.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/gpu/gemm_tiling.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_conv_pair.h"
#include "compiler_core/codegen/loop_ir/verifier.h"

namespace kiln::loop_ir::gpu {
namespace {

Expr I(int64_t v) { return IntImm(v); }

// Taps unrolled at most (more: loops).
constexpr int64_t kMaxUnrolledTaps = 64;

struct Tile {
  int64_t kc = 8, rows = 8, cols = 32, bt = 256;
};

Tile TileOf(const ScheduleConfig& c) { return Tile{c.Get("kc", 8), c.Get("rows", 8), c.Get("cols", 32), c.Get("bt", 256)}; }

ScheduleConfig ConfigOf(const Tile& t) {
  ScheduleConfig c;
  c.Set("kc", t.kc);
  c.Set("rows", t.rows);
  c.Set("cols", t.cols);
  c.Set("bt", t.bt);
  return c;
}

// Expanded rows and columns a tile's windows read.
int64_t RowsIn(const WindowGeometry& s, int64_t rows) { return (rows - 1) * s.sh + (s.kh - 1) * s.dh + 1; }
int64_t ColsIn(const WindowGeometry& s, int64_t cols) { return (cols - 1) * s.sw + (s.kw - 1) * s.dw + 1; }
int64_t SharedBytes(const ConvPairForm& f, const Tile& t) {
  return 4 * t.kc * RowsIn(f.geo, t.rows) * ColsIn(f.geo, t.cols);
}
int64_t Blocks(const ConvPairForm& f, const Tile& t) {
  return f.n * (f.c / t.kc) * CeilDiv(f.geo.oh, t.rows) * CeilDiv(f.geo.ow, t.cols);
}

std::string What(const ConvPairForm& f) { return absl::StrCat("conv pair ", f.pw->name(), " + ", f.dw->name()); }

absl::Status CheckTile(const ConvPairForm& f, const Tile& t, const std::string& what) {
  auto pow2 = [](int64_t v) { return v >= 1 && (v & (v - 1)) == 0; };
  if (!pow2(t.kc) || t.kc > 8 || f.c % t.kc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": knob kc=", t.kc, " is not 1, 2, 4 or 8 dividing ", f.c,
                                                   " channels"));
  }
  if (!pow2(t.rows) || t.rows > 8) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": knob rows=", t.rows, " is not 1, 2, 4 or 8"));
  }
  if (t.cols != 32 && t.cols != 64) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": knob cols=", t.cols, " is not 32 or 64"));
  }
  if (SharedBytes(f, t) > kMaxGpuSharedBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": knobs kc, rows, cols need ", SharedBytes(f, t),
                                                   " bytes of shared memory, more than ", kMaxGpuSharedBytes));
  }
  return absl::OkStatus();
}

std::vector<ScheduleConfig> Enumerate(const Graph& g, const GpuTarget&) {
  absl::StatusOr<ConvPairForm> f = AnalyzeConvPair(g);
  if (!f.ok()) return {};
  std::vector<ScheduleConfig> out;
  for (int64_t bt : {128, 256}) {
    for (int64_t kc : {1, 2, 4, 8}) {
      if (f->c % kc != 0) continue;
      for (int64_t rows : {1, 2, 4, 8}) {
        if (rows > 1 && rows / 2 >= f->geo.oh) break;
        for (int64_t cols : {32, 64}) {
          if (cols > 32 && cols / 2 >= f->geo.ow) break;
          Tile t{kc, rows, cols, bt};
          if (CheckTile(*f, t, "").ok()) out.push_back(ConfigOf(t));
        }
      }
    }
  }
  for (int64_t bt : {128, 256}) {
    ScheduleConfig c;
    c.Set("rc", 1);
    c.Set("bt", bt);
    out.push_back(c);
  }
  return out;
}

// 256 threads; 64 columns past 32 of them; 8 channels and 8 rows (fewer on
// short maps) while they fit in shared memory; then fewer channels, then
// fewer rows, while the grid makes fewer than kDefaultGpuSms blocks. The
// recompute variant only when no tile fits.
ScheduleConfig Default(const Graph& g, const GpuTarget& target) {
  absl::StatusOr<ConvPairForm> f = AnalyzeConvPair(g);
  if (!f.ok()) return {};
  Tile t;
  t.cols = f->geo.ow > 32 ? 64 : 32;
  t.kc = 8;
  while (f->c % t.kc != 0) t.kc /= 2;
  t.rows = 8;
  while (t.rows > 1 && t.rows / 2 >= f->geo.oh) t.rows /= 2;
  while (t.rows > 1 && SharedBytes(*f, t) > kMaxGpuSharedBytes) t.rows /= 2;
  while (t.kc > 1 && SharedBytes(*f, t) > kMaxGpuSharedBytes) t.kc /= 2;
  while (Blocks(*f, t) < kDefaultGpuSms && (t.kc > 1 || t.rows > 1)) {
    if (t.kc > 1) {
      t.kc /= 2;
    } else {
      t.rows /= 2;
    }
  }
  ScheduleConfig c = ConfigOf(t);
  std::vector<ScheduleConfig> space = Enumerate(g, target);
  if (std::find(space.begin(), space.end(), c) != space.end()) return c;
  ScheduleConfig rc;
  rc.Set("bt", 256);
  rc.Set("rc", 1);
  return rc;
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  ASSIGN_OR_RETURN(ConvPairForm f, AnalyzeConvPair(g));
  const std::string what = absl::StrCat("schedule ", c.ToString(), " of ", What(f));
  if (c.Get("rc", 0) != 0) {
    RETURN_IF_ERROR(ValidateGpuKnobs(g, c, {"rc", "bt"}));
    if (c.Get("rc", 0) != 1) return absl::InvalidArgumentError(absl::StrCat(what, ": knob rc is not 1"));
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(ValidateGpuKnobs(g, c, {"kc", "rows", "cols", "bt", "rc"}));  // rc=0: tiled
  return CheckTile(f, TileOf(c), what);
}

class PairKernels {
 public:
  PairKernels(const Graph& g, const ConvPairForm& f) : g_(g), f_(f), ge_(g) {
    const std::vector<Buffer>& args = ge_.args();
    x_ = args[f.x_arg];
    w1_ = args[f.w1_arg];
    w2_ = args[f.w2_arg];
    if (f.b1_arg >= 0) b1_ = args[f.b1_arg];
    if (f.b2_arg >= 0) b2_ = args[f.b2_arg];
    outs_ = PlanAnchorOutputs(g, f.dw->output(0));
  }

  absl::StatusOr<LoopFunc> Lower(const ScheduleConfig& c) {
    Stmt body;
    if (c.Get("rc", 0) == 1) {
      ASSIGN_OR_RETURN(body, Recompute(c.Get("bt", 256)));
    } else {
      ASSIGN_OR_RETURN(body, Tiled(TileOf(c)));
    }
    LoopFunc fn{"conv_pair", ge_.args(), body};
    RETURN_IF_ERROR(Verify(fn));
    return fn;
  }

 private:
  // The depthwise conv's input (the expansion through the mid chain) at
  // (n, ch, ih, iw) inside the map, where the expansion's value is `sum`.
  absl::StatusOr<Expr> Mid(const Expr& sum, const Expr& n, const Expr& ch, const Expr& ih, const Expr& iw) {
    ge_.BindValue(f_.pw->output(0), sum);
    return ge_.At(f_.dw->input(0), {n, ch, ih, iw});
  }

  Expr XAt(const Expr& n, const Expr& ci, const Expr& ih, const Expr& iw) const {
    return Load(x_, Add(Mul(Add(Mul(Add(Mul(n, I(f_.cin)), ci), I(f_.h)), ih), I(f_.w)), iw));
  }

  // acc[0] = the depthwise conv's bias, then tap(a, b) for every tap (each
  // adding its term into acc[0]).
  Stmt Taps(const Buffer& acc, const Expr& ch, const std::function<Stmt(Expr a, Expr b)>& tap) const {
    const WindowGeometry& s = f_.geo;
    const ForKind k = s.kh * s.kw <= kMaxUnrolledTaps ? ForKind::kUnrolled : ForKind::kSerial;
    Stmt init = Store(acc, I(0), b2_ != nullptr ? Load(b2_, ch) : FloatImm(0));
    return Block({init, For("ta", I(s.kh), For("tb", I(s.kw), tap(Var("ta"), Var("tb")), k), k)});
  }
  Expr W2At(const Expr& ch, const Expr& a, const Expr& b) const {
    return Load(w2_, Add(Mul(Add(Mul(ch, I(f_.geo.kh)), a), I(f_.geo.kw)), b));
  }

  absl::StatusOr<Stmt> OutputStores(const Expr& n, const Expr& ch, const Expr& oh, const Expr& ow, const Expr& v) {
    const WindowGeometry& s = f_.geo;
    Expr oi = Add(Mul(Add(Mul(Add(Mul(n, I(f_.c)), ch), I(s.oh)), oh), I(s.ow)), ow);
    return StoreThroughEpilogue(g_, ge_, f_.dw->output(0), outs_, v, {n, ch, oh, ow}, oi);
  }

  absl::StatusOr<Stmt> Tiled(const Tile& t) {
    const WindowGeometry& s = f_.geo;
    const int64_t rin = RowsIn(s, t.rows), win = ColsIn(s, t.cols);
    const int64_t row_blocks = CeilDiv(s.oh, t.rows), col_blocks = CeilDiv(s.ow, t.cols), ch_blocks = f_.c / t.kc;
    Buffer es = MakeBuffer("expanded", {t.kc * rin * win}, BufferRole::kShared);
    Expr n = Var("n"), c0 = Var("c0");
    auto thread_loop = [&](Stmt body) { return For("tid", I(t.bt), std::move(body), ForKind::kGpuThread); };
    auto spread = [&](int64_t count, const std::string& var, const Stmt& body) {
      Stmt b = count % t.bt != 0 ? IfThen(Lt(Var(var), I(count)), body) : body;
      return For(var + "_i", I(CeilDiv(count, t.bt)), LetStmt(var, Add(Mul(Var(var + "_i"), I(t.bt)), Var("tid")), b));
    };
    // ---- the expansion at position e = r * win + q of the tile's input.
    Stmt expand;
    {
      Buffer acc = MakeBuffer("acc_e", {t.kc}, BufferRole::kTemp);
      Expr e = Var("e"), j = Var("j");
      Expr ih = Sub(Add(Var("ih0"), Div(e, I(win))), I(s.pad_top)), iw = Sub(Add(Var("iw0"), Mod(e, I(win))), I(s.pad_left));
      Expr ch = Add(c0, j);
      Expr at = Add(Mul(j, I(rin * win)), e);
      Stmt init = For("j", I(t.kc), Store(acc, j, b1_ != nullptr ? Load(b1_, ch) : FloatImm(0)), ForKind::kUnrolled);
      Stmt mac = For("ci", I(f_.cin),
                     LetStmt("xv", XAt(n, Var("ci"), ih, iw),
                             For("j", I(t.kc),
                                 Store(
                                     acc, j, Call("fma", {Var("xv", ScalarType::kF32), Load(w1_, Add(Mul(ch, I(f_.cin)), Var("ci"))), Load(acc, j)})),
                                 ForKind::kUnrolled)));
      ASSIGN_OR_RETURN(Expr mid, Mid(Load(acc, j), n, ch, ih, iw));
      Stmt keep = For("j", I(t.kc), Store(es, at, mid), ForKind::kUnrolled);
      Stmt zero = For("j", I(t.kc), Store(es, at, FloatImm(0)), ForKind::kUnrolled);
      Expr inside = And(And(Ge(ih, I(0)), Lt(ih, I(f_.h))), And(Ge(iw, I(0)), Lt(iw, I(f_.w))));
      expand = thread_loop(spread(rin * win, "e", IfThen(inside, Allocate(acc, Block({init, mac, keep})), zero)));
    }
    // ---- the depthwise conv at output o = (j * rows + rl) * cols + ql.
    Stmt depthwise;
    {
      Buffer acc = MakeBuffer("acc_d", {1}, BufferRole::kTemp);
      Expr o = Var("o"), j = Div(o, I(t.rows * t.cols)), rl = Mod(Div(o, I(t.cols)), I(t.rows)), ql = Mod(o, I(t.cols));
      Expr ch = Add(c0, j);
      Expr oh = Add(Mul(Var("rb"), I(t.rows)), rl), ow = Add(Mul(Var("qb"), I(t.cols)), ql);
      Stmt taps = Taps(acc, ch, [&](Expr a, Expr b) {
        Expr at = Add(Mul(Add(Mul(j, I(rin)), Add(Mul(rl, I(s.sh)), Mul(a, I(s.dh)))), I(win)),
                      Add(Mul(ql, I(s.sw)), Mul(b, I(s.dw))));
        return Store(acc, I(0), Call("fma", {Load(es, at), W2At(ch, a, b), Load(acc, I(0))}));
      });
      ASSIGN_OR_RETURN(Stmt st, OutputStores(n, ch, oh, ow, Load(acc, I(0))));
      Stmt body = Allocate(acc, Block({taps, st}));
      std::vector<Expr> conds;
      if (s.oh % t.rows != 0) conds.push_back(Lt(oh, I(s.oh)));
      if (s.ow % t.cols != 0) conds.push_back(Lt(ow, I(s.ow)));
      if (!conds.empty()) body = IfThen(conds.size() == 2 ? And(conds[0], conds[1]) : conds[0], body);
      depthwise = thread_loop(spread(t.kc * t.rows * t.cols, "o", body));
    }
    // Blocks: (image, channel block, row block, column block).
    Expr blk = Var("blk");
    Stmt body = Allocate(es, Block({expand, depthwise}));
    body = LetStmt("ih0", Mul(Var("rb"), I(t.rows * s.sh)), LetStmt("iw0", Mul(Var("qb"), I(t.cols * s.sw)), body));
    body = LetStmt("n", Div(blk, I(ch_blocks * row_blocks * col_blocks)),
                   LetStmt("c0", Mul(Mod(Div(blk, I(row_blocks * col_blocks)), I(ch_blocks)), I(t.kc)),
                           LetStmt("rb", Mod(Div(blk, I(col_blocks)), I(row_blocks)),
                                   LetStmt("qb", Mod(blk, I(col_blocks)), body))));
    return For("blk", I(f_.n * ch_blocks * row_blocks * col_blocks), body, ForKind::kGpuBlock);
  }

  // rc=1: a thread per output element, the expansion recomputed per tap.
  absl::StatusOr<Stmt> Recompute(int64_t bt) {
    const WindowGeometry& s = f_.geo;
    const int64_t items = f_.n * f_.c * s.oh * s.ow;
    Buffer acc = MakeBuffer("acc_d", {1}, BufferRole::kTemp);
    Buffer ex = MakeBuffer("acc_e", {1}, BufferRole::kTemp);
    absl::Status err = absl::OkStatus();
    Stmt body = FlatKernel(
        {{items,
          [&](Expr item) -> Stmt {
            Expr ow = Mod(item, I(s.ow)), oh = Mod(Div(item, I(s.ow)), I(s.oh));
            Expr ch = Mod(Div(item, I(s.oh * s.ow)), I(f_.c)), n = Div(item, I(f_.c * s.oh * s.ow));
            Stmt taps = Taps(acc, ch, [&](Expr a, Expr b) -> Stmt {
              Expr ih = Add(Sub(Mul(oh, I(s.sh)), I(s.pad_top)), Mul(a, I(s.dh)));
              Expr iw = Add(Sub(Mul(ow, I(s.sw)), I(s.pad_left)), Mul(b, I(s.dw)));
              Stmt init = Store(ex, I(0), b1_ != nullptr ? Load(b1_, ch) : FloatImm(0));
              Stmt mac = For("ci", I(f_.cin),
                             Store(ex, I(0), Call("fma", {XAt(n, Var("ci"), ih, iw),
                                                                           Load(w1_, Add(Mul(ch, I(f_.cin)), Var("ci"))),
                                                                           Load(ex, I(0))})));
              absl::StatusOr<Expr> mid = Mid(Load(ex, I(0)), n, ch, ih, iw);
              if (!mid.ok()) {
                err = mid.status();
                return Block({});
              }
              Stmt add = Store(acc, I(0), Call("fma", {*mid, W2At(ch, a, b), Load(acc, I(0))}));
              Expr inside = And(And(Ge(ih, I(0)), Lt(ih, I(f_.h))), And(Ge(iw, I(0)), Lt(iw, I(f_.w))));
              return IfThen(inside, Block({init, mac, add}));
            });
            absl::StatusOr<Stmt> st = OutputStores(n, ch, oh, ow, Load(acc, I(0)));
            if (!st.ok()) {
              err = st.status();
              return Block({});
            }
            return Allocate(acc, Allocate(ex, Block({taps, *st})));
          }}},
        bt, 1);
    RETURN_IF_ERROR(err);
    return body;
  }

  const Graph& g_;
  const ConvPairForm& f_;
  GraphExpr ge_;
  Buffer x_, w1_, w2_, b1_, b2_;
  AnchorOutputs outs_;
};

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& c, const GpuTarget& target) {
  ASSIGN_OR_RETURN(ConvPairForm f, AnalyzeConvPair(g));
  RETURN_IF_ERROR(Validate(g, c, target));
  PairKernels k(g, f);
  return k.Lower(c);
}

}  // namespace

GpuWorkloadLowering GpuConvPairLowering() {
  return GpuWorkloadLowering{"conv_pair", Enumerate, Default, Validate, Lower};
}

}  // namespace kiln::loop_ir::gpu
