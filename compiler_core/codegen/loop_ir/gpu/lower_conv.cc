// GPU lowerings of the conv and conv_transpose kinds: implicit GEMM, the
// depthwise direct kernel and the gather-form transposed conv (see
// gpu/lower_conv.h).
#include "compiler_core/codegen/loop_ir/gpu/lower_conv.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/gpu/gemm_tiling.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_conv.h"
#include "compiler_core/codegen/loop_ir/verifier.h"

namespace kiln::loop_ir::gpu {
namespace {

Expr I(int64_t v) { return IntImm(v); }

int64_t WidestDividing(int64_t v) { return v % 4 == 0 ? 4 : v % 2 == 0 ? 2 : 1; }

int64_t Pixels(const WindowGeometry& s) { return s.od * s.oh * s.ow; }
int64_t Taps(const WindowGeometry& s) { return s.kd * s.kh * s.kw; }

// 1x1 (x1), unit strides, no pads: output pixel p of a channel is input pixel p.
bool IsPointwise(const WindowGeometry& s) {
  return s.kd == 1 && s.kh == 1 && s.kw == 1 && s.sd == 1 && s.sh == 1 && s.sw == 1 && s.od == s.d && s.oh == s.h &&
         s.ow == s.w && s.pad_front == 0 && s.pad_top == 0 && s.pad_left == 0;
}

// Taps a depthwise thread keeps in registers at most.
constexpr int64_t kMaxDirectTaps = 64;

// One input and one output channel per group, 1-D or 2-D, taps in registers.
bool DepthwiseApplies(const ConvForm& f) {
  return f.cg == 1 && f.kg == 1 && !f.geo.three_d && Taps(f.geo) <= kMaxDirectTaps;
}

// ---- implicit GEMM ----------------------------------------------------------------

GemmShape ShapeOf(const ConvForm& f) {
  return GemmShape{f.geo.n * f.group, f.kg, Pixels(f.geo), f.cg * Taps(f.geo)};
}

// Vector loads: the weights' rows (cg * taps long) when that divides; X's
// pixels of a pointwise conv when the pixels of a plane divide.
int64_t WeightVw(const ConvForm& f) { return WidestDividing(f.cg * Taps(f.geo)); }
int64_t PixelVw(const ConvForm& f) { return IsPointwise(f.geo) ? WidestDividing(Pixels(f.geo)) : 1; }
int64_t MaxGemmVw(const ConvForm& f) { return std::max(WeightVw(f), PixelVw(f)); }

// The index of output pixel p (flat over OD, OH, OW) among the output's
// dims after (n, k): (od, oh, ow), (oh, ow) or (ow); (0, p) for 2-D when
// the epilogue allows the flat form (FlatSpatialIndexOk).
std::vector<Expr> PixelIndex(const Graph& g, const ConvForm& f, const Expr& p) {
  const WindowGeometry& s = f.geo;
  if (s.one_d) return {p};
  if (s.three_d) return {Div(p, I(s.oh * s.ow)), Mod(Div(p, I(s.ow)), I(s.oh)), Mod(p, I(s.ow))};
  if (FlatSpatialIndexOk(g, f)) return {I(0), p};
  return {Div(p, I(s.ow)), Mod(p, I(s.ow))};
}

// The stores of every output at image n, channel ch, pixel p from the
// conv's value v (the bias added).
absl::StatusOr<Stmt> ConvStores(const Graph& g, const ConvForm& f, GraphExpr& ge, const AnchorOutputs& outs,
                                const Expr& n, const Expr& ch, const Expr& p, Expr v) {
  if (f.b_arg >= 0) v = Add(v, Load(ge.args()[f.b_arg], ch));
  std::vector<Expr> idx = {n, ch};
  for (const Expr& e : PixelIndex(g, f, p)) idx.push_back(e);
  Expr oi = Add(Mul(Add(Mul(n, I(f.k)), ch), I(Pixels(f.geo))), p);
  return StoreThroughEpilogue(g, ge, f.conv->output(0), outs, v, idx, oi);
}

// B's element (k = (ci, tap), pixel p) of image n, group grp: the input
// under the tap, or 0 in the padding.
GemmAccess Im2Col(const ConvForm& f, const Buffer& x, const Expr& n, const Expr& grp, const Expr& p, const Expr& k) {
  const WindowGeometry& s = f.geo;
  const int64_t taps = Taps(s);
  Expr plane = Add(Mul(n, I(s.c)), Add(Mul(grp, I(f.cg)), taps > 1 ? Div(k, I(taps)) : k));
  if (IsPointwise(s)) return GemmAccess{x, Add(Mul(plane, I(Pixels(s))), p), nullptr};
  Expr t = taps > 1 ? Mod(k, I(taps)) : I(0);
  // Per axis (D, H, W): output position, tap, input extent, stride, dilation, pad.
  struct Axis {
    Expr o, tap;
    int64_t in, out, kernel, stride, dil, pad_lo, pad_hi;
  };
  std::vector<Axis> axes = {
      {Div(p, I(s.oh * s.ow)), Div(t, I(s.kh * s.kw)), s.d, s.od, s.kd, s.sd, s.dd, s.pad_front, s.pad_back},
      {Mod(Div(p, I(s.ow)), I(s.oh)), Mod(Div(t, I(s.kw)), I(s.kh)), s.h, s.oh, s.kh, s.sh, s.dh, s.pad_top,
       s.pad_bottom},
      {Mod(p, I(s.ow)), Mod(t, I(s.kw)), s.w, s.ow, s.kw, s.sw, s.dw, s.pad_left, s.pad_right}};
  Expr index = plane, inside;
  for (const Axis& a : axes) {
    if (a.in == 1 && a.out == 1 && a.kernel == 1 && a.pad_lo == 0) continue;  // a missing axis
    Expr i = Sub(Add(Mul(a.o, I(a.stride)), Mul(a.tap, I(a.dil))), I(a.pad_lo));
    index = Add(Mul(index, I(a.in)), i);
    // Only the sides a window can leave.
    std::vector<Expr> in;
    if (a.pad_lo > 0) in.push_back(Ge(i, I(0)));
    if ((a.out - 1) * a.stride + (a.kernel - 1) * a.dil - a.pad_lo >= a.in) in.push_back(Lt(i, I(a.in)));
    for (const Expr& c : in) inside = inside == nullptr ? c : And(inside, c);
  }
  return GemmAccess{x, Simplify(index), inside};
}

absl::StatusOr<Stmt> ImplicitGemm(const Graph& g, const ConvForm& f, GraphExpr& ge, const AnchorOutputs& outs,
                                  const GemmTile& tile) {
  const Buffer x = ge.args()[f.x_arg], w = ge.args()[f.w_arg];
  const int64_t kred = f.cg * Taps(f.geo);
  GemmProblem p;
  p.shape = ShapeOf(f);
  p.a.k_contiguous = true;
  p.a.max_vw = WeightVw(f);
  p.a.at = [&f, w, kred](const Expr& batch, const Expr& co, const Expr& k) {
    Expr row = Add(Mul(Mod(batch, I(f.group)), I(f.kg)), co);
    return GemmAccess{w, Add(Mul(row, I(kred)), k), nullptr};
  };
  p.b.k_contiguous = false;
  p.b.max_vw = PixelVw(f);
  p.b.at = [&f, x](const Expr& batch, const Expr& pixel, const Expr& k) {
    return Im2Col(f, x, Div(batch, I(f.group)), Mod(batch, I(f.group)), pixel, k);
  };
  p.store = [&](const Expr& batch, const Expr& co, const Expr& pixel, const Expr& v) {
    Expr ch = Add(Mul(Mod(batch, I(f.group)), I(f.kg)), co);
    return ConvStores(g, f, ge, outs, Div(batch, I(f.group)), ch, pixel, v);
  };
  return TiledGemmKernel(p, tile);
}

// ---- depthwise direct -------------------------------------------------------------

// Input rows and columns a block of `rows` output rows reads.
int64_t DwRowsIn(const WindowGeometry& s, int64_t rows) { return (rows - 1) * s.sh + (s.kh - 1) * s.dh + 1; }
int64_t DwColsIn(const WindowGeometry& s) { return (s.ow - 1) * s.sw + (s.kw - 1) * s.dw + 1; }
bool DwFits(const WindowGeometry& s, int64_t rows) { return DwRowsIn(s, rows) * DwColsIn(s) * 4 <= kMaxGpuSharedBytes; }
int64_t DwBlocks(const WindowGeometry& s, int64_t rows) { return s.n * s.c * CeilDiv(s.oh, rows); }

std::vector<ScheduleConfig> DepthwisePoints(const ConvForm& f) {
  std::vector<ScheduleConfig> out;
  if (!DepthwiseApplies(f)) return out;
  for (int64_t bt : {128, 256}) {
    for (int64_t rows : {1, 2, 4, 8, 16}) {
      if (rows > 1 && rows / 2 >= f.geo.oh) break;
      if (!DwFits(f.geo, rows)) break;
      ScheduleConfig c;
      c.Set("dw", 1);
      c.Set("bt", bt);
      c.Set("rows", rows);
      out.push_back(c);
    }
  }
  return out;
}

// 256 threads (128 when the map has fewer pixels than 256 in 16 rows); rows
// doubled while a block has fewer than two outputs per thread and the grid
// keeps two blocks per SM: more rows per block read fewer halo rows twice.
ScheduleConfig DefaultDepthwise(const ConvForm& f) {
  const WindowGeometry& s = f.geo;
  const int64_t bt = s.ow * std::min<int64_t>(s.oh, 16) >= 256 ? 256 : 128;
  int64_t rows = 1;
  while (rows < 16 && rows < s.oh && DwFits(s, 2 * rows) && rows * s.ow < 2 * bt &&
         DwBlocks(s, 2 * rows) >= 2 * kDefaultGpuSms) {
    rows *= 2;
  }
  ScheduleConfig c;
  c.Set("dw", 1);
  c.Set("bt", bt);
  c.Set("rows", rows);
  return c;
}

absl::StatusOr<Stmt> Depthwise(const Graph& g, const ConvForm& f, GraphExpr& ge, const AnchorOutputs& outs,
                               int64_t bt, int64_t rows) {
  const WindowGeometry& s = f.geo;
  const Buffer x = ge.args()[f.x_arg], w = ge.args()[f.w_arg];
  const int64_t rin = DwRowsIn(s, rows), cin = DwColsIn(s), taps = Taps(s);
  const int64_t row_blocks = CeilDiv(s.oh, rows);
  Buffer xs = MakeBuffer("x_rows", {rin * cin}, BufferRole::kShared);
  Buffer wr = MakeBuffer("taps", {taps}, BufferRole::kLocal);
  Expr plane = Var("plane"), ch = Mod(plane, I(s.c)), n = Div(plane, I(s.c));
  auto thread_loop = [&](Stmt body) { return For("tid", I(bt), std::move(body), ForKind::kGpuThread); };
  // `body(e)` for e < count, spread over the threads.
  auto spread = [&](int64_t count, const std::string& var, const Stmt& body) {
    Stmt b = count % bt != 0 ? IfThen(Lt(Var(var), I(count)), body) : body;
    return For(var + "_i", I(CeilDiv(count, bt)), LetStmt(var, Add(Mul(Var(var + "_i"), I(bt)), Var("tid")), b));
  };
  // Copy: x_rows[r][q] = x[n, c, rb*rows*sh + r - pt, q - pl] or 0; the taps.
  Stmt copy;
  {
    Expr e = Var("e"), ih = Sub(Add(Var("ih0"), Div(e, I(cin))), I(s.pad_top)), iw = Sub(Mod(e, I(cin)), I(s.pad_left));
    Expr inside = And(And(Ge(ih, I(0)), Lt(ih, I(s.h))), And(Ge(iw, I(0)), Lt(iw, I(s.w))));
    Stmt st = IfThen(inside, Store(xs, e, Load(x, Add(Mul(Add(Mul(plane, I(s.h)), ih), I(s.w)), iw))),
                     Store(xs, e, FloatImm(0)));
    Stmt load_taps = For("t", I(taps), Store(wr, Var("t"), Load(w, Add(Mul(ch, I(taps)), Var("t")))), ForKind::kUnrolled);
    copy = thread_loop(Block({spread(rin * cin, "e", st), load_taps}));
  }
  // Compute: output (oh, ow) = (rb*rows + e / ow, e % ow).
  Stmt compute;
  {
    Expr e = Var("o"), rl = Div(e, I(s.ow)), ow = Mod(e, I(s.ow));
    Expr v;
    for (int64_t a = 0; a < s.kh; ++a) {
      for (int64_t b = 0; b < s.kw; ++b) {
        Expr at = Add(Mul(Add(Mul(rl, I(s.sh)), I(a * s.dh)), I(cin)), Add(Mul(ow, I(s.sw)), I(b * s.dw)));
        Expr term = Load(xs, at), wt = Load(wr, I(a * s.kw + b));
        v = v == nullptr ? Mul(term, wt) : Call("fma", {term, wt, v});
      }
    }
    Expr oh = Add(Mul(Var("rb"), I(rows)), rl);
    Expr p = s.one_d ? ow : Add(Mul(oh, I(s.ow)), ow);
    ASSIGN_OR_RETURN(Stmt st, ConvStores(g, f, ge, outs, n, ch, p, v));
    if (s.oh % rows != 0) st = IfThen(Lt(oh, I(s.oh)), st);
    compute = thread_loop(spread(rows * s.ow, "o", st));
  }
  Stmt body = Allocate(xs, Allocate(wr, Block({copy, compute})));
  body = LetStmt("plane", Div(Var("blk"), I(row_blocks)),
                 LetStmt("rb", Mod(Var("blk"), I(row_blocks)), LetStmt("ih0", Mul(Var("rb"), I(rows * s.sh)), body)));
  return For("blk", I(s.n * s.c * row_blocks), body, ForKind::kGpuBlock);
}

// ---- the conv kind ---------------------------------------------------------------

std::string What(const ConvForm& f) { return absl::StrCat("conv ", f.conv->name()); }

// The CPU's blocked weights (kiln.BlockedConv, made only for CPU targets)
// have no GPU kernel.
absl::StatusOr<ConvForm> AnalyzeGpuConv(const Graph& g) {
  ASSIGN_OR_RETURN(ConvForm f, AnalyzeConv(g));
  if (f.weight_block > 0) return absl::UnimplementedError(absl::StrCat(What(f), ": blocked weights are CPU-only"));
  return f;
}

std::vector<ScheduleConfig> Enumerate(const Graph& g, const GpuTarget&) {
  absl::StatusOr<ConvForm> f = AnalyzeGpuConv(g);
  if (!f.ok()) return {};
  std::vector<ScheduleConfig> out;
  for (const GemmTile& t : EnumerateGemmTiles(ShapeOf(*f), MaxGemmVw(*f))) {
    ScheduleConfig c;
    SetGemmTile(t, &c);
    out.push_back(c);
  }
  for (const ScheduleConfig& c : DepthwisePoints(*f)) out.push_back(c);
  return out;
}

// Depthwise convs: the direct kernel (implicit GEMM would run a 1-row GEMM
// per channel). Others: the tiled GEMM's default over (K/group, pixels).
ScheduleConfig Default(const Graph& g, const GpuTarget& target) {
  absl::StatusOr<ConvForm> f = AnalyzeGpuConv(g);
  if (!f.ok()) return {};
  ScheduleConfig c;
  if (!DepthwisePoints(*f).empty()) {
    c = DefaultDepthwise(*f);
  } else {
    SetGemmTile(DefaultGemmTile(ShapeOf(*f), MaxGemmVw(*f)), &c);
  }
  std::vector<ScheduleConfig> space = Enumerate(g, target);
  return std::find(space.begin(), space.end(), c) != space.end() ? c : space.front();
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  ASSIGN_OR_RETURN(ConvForm f, AnalyzeGpuConv(g));
  const std::string what = absl::StrCat("schedule ", c.ToString(), " of ", What(f));
  if (c.Get("dw", 0) != 0) {
    RETURN_IF_ERROR(ValidateGpuKnobs(g, c, {"dw", "bt", "rows"}));
    const int64_t rows = c.Get("rows", 1);
    if (c.Get("dw", 0) != 1 || !DepthwiseApplies(f)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": dw=1 needs one input and one output channel per group, 1-D or 2-D, at most ", kMaxDirectTaps, " taps"));
    }
    if (rows < 1 || rows > 16 || (rows & (rows - 1)) != 0 || !DwFits(f.geo, rows)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": knob rows=", rows,
                                                     " is not a power of two up to 16 whose input rows fit ",
                                                     kMaxGpuSharedBytes, " bytes of shared memory"));
    }
    return absl::OkStatus();
  }
  std::vector<std::string> known = GemmKnobs();
  known.push_back("dw");  // dw=0: implicit GEMM
  RETURN_IF_ERROR(ValidateGpuKnobs(g, c, known));
  return CheckGemmTile(GemmTileOf(c, MaxGemmVw(f)), MaxGemmVw(f), what);
}

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& c, const GpuTarget& target) {
  ASSIGN_OR_RETURN(ConvForm f, AnalyzeGpuConv(g));
  RETURN_IF_ERROR(Validate(g, c, target));
  GraphExpr ge(g);
  const AnchorOutputs outs = PlanAnchorOutputs(g, f.conv->output(0));
  Stmt body;
  if (c.Get("dw", 0) == 1) {
    ASSIGN_OR_RETURN(body, Depthwise(g, f, ge, outs, c.Get("bt", 256), c.Get("rows", 1)));
  } else {
    ASSIGN_OR_RETURN(body, ImplicitGemm(g, f, ge, outs, GemmTileOf(c, MaxGemmVw(f))));
  }
  LoopFunc fn{"conv", ge.args(), body};
  RETURN_IF_ERROR(Verify(fn));
  return fn;
}

// ---- conv_transpose ---------------------------------------------------------------

std::string What(const ConvTransposeForm& f) { return absl::StrCat("conv_transpose ", f.node->name()); }

std::vector<ScheduleConfig> EnumerateTranspose(const Graph& g, const GpuTarget&) {
  if (!AnalyzeConvTranspose(g).ok()) return {};
  std::vector<ScheduleConfig> out;
  for (int64_t bt : {128, 256, 512}) {
    for (int64_t un : {1, 2}) {
      ScheduleConfig c;
      c.Set("bt", bt);
      c.Set("un", un);
      out.push_back(c);
    }
  }
  return out;
}

// 256 threads of one output each: consecutive threads, consecutive columns.
ScheduleConfig DefaultTranspose(const Graph& g, const GpuTarget&) {
  if (!AnalyzeConvTranspose(g).ok()) return {};
  ScheduleConfig c;
  c.Set("bt", 256);
  c.Set("un", 1);
  return c;
}

absl::Status ValidateTranspose(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  ASSIGN_OR_RETURN(ConvTransposeForm f, AnalyzeConvTranspose(g));
  RETURN_IF_ERROR(ValidateGpuKnobs(g, c, {"bt", "un"}));
  const int64_t un = c.Get("un", 1);
  if (un < 1 || un > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule ", c.ToString(), " of ", What(f), ": knob un=", un, " is not in [1, 4]"));
  }
  return absl::OkStatus();
}

// Output element `item`: bias + sum over the group's input channels and the
// taps t of each axis whose o + pb - t*d is a multiple of the stride s with
// quotient inside the input.
absl::StatusOr<Stmt> TransposeItem(const Graph& g, const ConvTransposeForm& f, GraphExpr& ge,
                                   const AnchorOutputs& outs, const Expr& item) {
  const Buffer x = ge.args()[f.x_arg], w = ge.args()[f.w_arg];
  Buffer acc = MakeBuffer("acc", {1}, BufferRole::kTemp);
  // item = (((n * M + co) * out0 + o0) * out1 + o1) * out2 + o2.
  std::vector<Expr> o(3);
  Expr rest = item;
  for (int a = 2; a >= 0; --a) {
    o[a] = f.out[a] == 1 ? I(0) : Mod(rest, I(f.out[a]));
    rest = Div(rest, I(f.out[a]));
  }
  Expr co = Mod(rest, I(f.m)), n = Div(rest, I(f.m));
  Expr grp = Div(co, I(f.mg)), col = Mod(co, I(f.mg));
  Expr ch = Add(Mul(grp, I(f.cg)), Var("ci"));
  Expr xi = Add(Mul(n, I(f.c)), ch), wi = Add(Mul(ch, I(f.mg)), col);
  std::vector<Expr> in(3), tap(3), valid(3);
  for (int a = 0; a < 3; ++a) {
    const std::string t = absl::StrCat("t", a);
    tap[a] = f.k[a] == 1 ? I(0) : Var(t);
    Expr num = Sub(Add(o[a], I(f.pb[a])), Mul(tap[a], I(f.d[a])));
    in[a] = f.s[a] == 1 ? num : Div(num, I(f.s[a]));
    std::vector<Expr> conds = {Ge(num, I(0)), Lt(in[a], I(f.in[a]))};
    if (f.s[a] > 1) conds.insert(conds.begin(), Eq(Mod(num, I(f.s[a])), I(0)));
    valid[a] = conds[0];
    for (size_t i = 1; i < conds.size(); ++i) valid[a] = And(valid[a], conds[i]);
    if (f.in[a] == 1 && f.out[a] == 1 && f.k[a] == 1 && f.pb[a] == 0) valid[a] = nullptr;  // a missing axis
    xi = Add(Mul(xi, I(f.in[a])), f.in[a] == 1 ? I(0) : in[a]);
    wi = Add(Mul(wi, I(f.k[a])), tap[a]);
  }
  Stmt mac = Store(acc, I(0), Call("fma", {Load(x, Simplify(xi)), Load(w, Simplify(wi)), Load(acc, I(0))}));
  for (int a = 2; a >= 0; --a) {
    if (valid[a] != nullptr) mac = IfThen(valid[a], mac);
    if (f.k[a] > 1) mac = For(absl::StrCat("t", a), I(f.k[a]), mac, a == 2 && f.k[a] <= 8 ? ForKind::kUnrolled : ForKind::kSerial);
  }
  Expr init = f.b_arg >= 0 ? Load(ge.args()[f.b_arg], co) : FloatImm(0);
  std::vector<Expr> idx = {n, co};
  for (int a = 3 - f.nsp; a < 3; ++a) idx.push_back(o[a]);
  ASSIGN_OR_RETURN(Stmt st, StoreThroughEpilogue(g, ge, f.node->output(0), outs, Load(acc, I(0)), idx, item));
  return Allocate(acc, Block({Store(acc, I(0), init), For("ci", I(f.cg), mac), st}));
}

absl::StatusOr<LoopFunc> LowerTranspose(const Graph& g, const ScheduleConfig& c, const GpuTarget& target) {
  ASSIGN_OR_RETURN(ConvTransposeForm f, AnalyzeConvTranspose(g));
  RETURN_IF_ERROR(ValidateTranspose(g, c, target));
  GraphExpr ge(g);
  const AnchorOutputs outs = PlanAnchorOutputs(g, f.node->output(0));
  const int64_t items = f.n * f.m * f.out[0] * f.out[1] * f.out[2];
  absl::Status err = absl::OkStatus();
  Stmt body = FlatKernel({{items,
                           [&](Expr item) -> Stmt {
                             absl::StatusOr<Stmt> s = TransposeItem(g, f, ge, outs, item);
                             if (!s.ok()) {
                               err = s.status();
                               return Block({});
                             }
                             return *s;
                           }}},
                         c.Get("bt", 256), c.Get("un", 1));
  RETURN_IF_ERROR(err);
  LoopFunc fn{"conv_transpose", ge.args(), body};
  RETURN_IF_ERROR(Verify(fn));
  return fn;
}

}  // namespace

GpuWorkloadLowering GpuConvLowering() {
  return GpuWorkloadLowering{"conv", Enumerate, Default, Validate, Lower};
}

GpuWorkloadLowering GpuConvTransposeLowering() {
  return GpuWorkloadLowering{"conv_transpose", EnumerateTranspose, DefaultTranspose, ValidateTranspose, LowerTranspose};
}

}  // namespace kiln::loop_ir::gpu
