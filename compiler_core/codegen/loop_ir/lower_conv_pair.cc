// The fused expansion + depthwise conv (see lower_conv_pair.h).
#include "compiler_core/codegen/loop_ir/lower_conv_pair.h"

#include <algorithm>
#include <functional>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/depthwise_planes.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_conv.h"

namespace kiln::loop_ir {
namespace {

// Floats of a task's stack buffers: the block's expanded planes, the
// depthwise phase planes and its result plane.
constexpr int64_t kMaxStackFloats = 128 * 1024;

// Bytes of x a band's rows may span (all input channels).
constexpr int64_t kBandInputBytes = 512 * 1024;

// Bytes of x above which the default takes bands: every channel block reads
// all of x, which then no longer stays in L2 between blocks.
constexpr int64_t kBandFromBytes = 512 * 1024;

// Input rows a default band reads.
constexpr int64_t kBandInputRows = 32;

Expr I(int64_t v) { return IntImm(v); }
Expr MulAdd(Expr a, Expr b, Expr c) { return Call("fma", {std::move(a), std::move(b), std::move(c)}); }

int InputIndex(const Graph& g, const Value* v) {
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    if (g.inputs()[i] == v) return static_cast<int>(i);
  }
  return -1;
}

// Input rows a band of rb output rows reads (padding rows included).
int64_t BandInputRows(const ConvPairForm& f, int64_t rb) { return (rb - 1) * f.geo.sh + (f.geo.kh - 1) * f.geo.dh + 1; }

// The depthwise geometry of one band: rb output rows over its input rows,
// whose padding rows are zeros in the band's planes.
WindowGeometry BandGeometry(const ConvPairForm& f, int64_t rb) {
  WindowGeometry s = f.geo;
  s.oh = rb;
  s.h = BandInputRows(f, rb);
  s.pad_top = 0;
  s.pad_bottom = 0;
  return s;
}

// rb = 0: whole maps.
int64_t StackFloats(const ConvPairForm& f, int64_t vw, int64_t ur, int64_t kb, int64_t rb = 0) {
  if (rb > 0) return kb * BandInputRows(f, rb) * f.w + PlaneFloats(BandGeometry(f, rb), vw, ur);
  return kb * f.h * f.w + PlaneFloats(f.geo, vw, ur);
}

bool IsConv(const Node& n) { return n.op_type() == "Conv" && n.domain().empty(); }

}  // namespace

absl::StatusOr<ConvPairForm> AnalyzeConvPair(const Graph& g) {
  RETURN_IF_ERROR(CheckWorkloadBasics(g));
  ConvPairForm f;
  std::vector<const Node*> convs;
  for (const auto& n : g.nodes()) {
    if (IsConv(*n)) {
      convs.push_back(n.get());
      continue;
    }
    if (!IsInlinableElementwise(n->op_type())) return NodeError(*n, "not an elementwise operator");
    RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
  }
  if (convs.size() != 2) return absl::UnimplementedError(absl::StrCat("workload ", g.name(), " is not a conv pair"));
  f.pw = convs[0];
  f.dw = convs[1];
  for (const Node* c : convs) {
    if (c->num_outputs() != 1 || c->input(0) == nullptr || c->input(1) == nullptr) {
      return NodeError(*c, "unexpected operands");
    }
  }
  // The expansion: 1x1, unit strides, no pads, one group, 2-D.
  const Node& pw = *f.pw;
  const std::vector<int64_t> xd = DimsOf(pw.input(0)), w1 = DimsOf(pw.input(1)), ed = DimsOf(pw.output(0));
  if (xd.size() != 4 || w1.size() != 4 || ed.size() != 4) return NodeError(pw, "not a 2-D conv");
  ASSIGN_OR_RETURN(WindowGeometry pg, ResolveWindow(pw, {w1[2], w1[3]}));
  if (pg.kh != 1 || pg.kw != 1 || pg.sh != 1 || pg.sw != 1 || pg.pad_top != 0 || pg.pad_left != 0 || pg.oh != pg.h ||
      pg.ow != pg.w || pw.GetInt("group", 1) != 1) {
    return NodeError(pw, "not a pointwise expansion");
  }
  f.n = xd[0];
  f.cin = xd[1];
  f.c = w1[0];
  f.h = xd[2];
  f.w = xd[3];
  // The depthwise conv reads the expansion through elementwise nodes only.
  std::set<const Value*> mid = {pw.output(0)};
  for (const auto& n : g.nodes()) {
    if (n.get() == f.pw || n.get() == f.dw) continue;
    bool from_pw = false;
    for (const Value* v : n->inputs()) from_pw = from_pw || (v != nullptr && mid.count(v) > 0);
    if (from_pw && n->output(0) != nullptr && DimsOf(n->output(0)) == ed) mid.insert(n->output(0));
  }
  const Node& dw = *f.dw;
  if (mid.count(dw.input(0)) == 0) return NodeError(dw, "does not read the expansion");
  const std::vector<int64_t> w2 = DimsOf(dw.input(1));
  if (w2.size() != 4 || w2[0] != f.c || w2[1] != 1 || dw.GetInt("group", 1) != f.c) {
    return NodeError(dw, "not a depthwise conv over the expansion");
  }
  ASSIGN_OR_RETURN(f.geo, ResolveWindow(dw, {w2[2], w2[3]}));
  // Operands: workload inputs; biases [C].
  f.x_arg = InputIndex(g, pw.input(0));
  f.w1_arg = InputIndex(g, pw.input(1));
  f.w2_arg = InputIndex(g, dw.input(1));
  if (f.x_arg < 0 || f.w1_arg < 0 || f.w2_arg < 0) return NodeError(pw, "an operand is computed inside the workload");
  for (const Node* c : convs) {
    if (c->input(2) == nullptr) continue;
    if (InputIndex(g, c->input(2)) < 0 || DimsOf(c->input(2)) != std::vector<int64_t>{f.c}) {
      return NodeError(*c, "bias is not an input [C]");
    }
  }
  if (pw.input(2) != nullptr) f.b1_arg = InputIndex(g, pw.input(2));
  if (dw.input(2) != nullptr) f.b2_arg = InputIndex(g, dw.input(2));
  // Every other node: between the convs (the expansion's shape), or after the
  // depthwise conv (its shape); only the latter are outputs.
  const std::vector<int64_t> od = DimsOf(dw.output(0));
  std::set<const Value*> after = {dw.output(0)};
  for (const auto& n : g.nodes()) {
    if (n.get() == f.pw || n.get() == f.dw) continue;
    const Value* out = n->output(0);
    if (out == nullptr) return NodeError(*n, "no output");
    if (mid.count(out) > 0) {
      // Its operands broadcast against (H, W) as a whole or not at all.
      for (const Value* v : n->inputs()) {
        if (v == nullptr) continue;  // an omitted optional operand (Clip's min)
        std::vector<int64_t> d = DimsOf(v);
        const int64_t vh = d.size() >= 2 ? d[d.size() - 2] : 1, vw = d.empty() ? 1 : d.back();
        if (!(vh == 1 && vw == 1) && !(vh == f.h && vw == f.w)) f.mid_flat = false;
      }
      continue;
    }
    bool down = false;
    for (const Value* v : n->inputs()) down = down || after.count(v) > 0;
    if (!down || DimsOf(out) != od) return NodeError(*n, "neither between the convs nor in the epilogue");
    after.insert(out);
  }
  for (const Value* v : g.outputs()) {
    if (after.count(v) == 0)
      return NodeError(dw, absl::StrCat("output ", v->name(), " is not after the depthwise conv"));
  }
  if (StackFloats(f, 1, 1, 1) > kMaxStackFloats) return NodeError(pw, "one expanded plane exceeds the stack budget");
  return f;
}

namespace {

struct Knobs {
  int64_t vw = 1, kb = 1, pu = 1, ur = 1;
  int64_t rb = 0;  // output rows per band; 0: the whole map
};

Knobs KnobsOf(const ScheduleConfig& c) {
  return {c.Get("vw", 1), c.Get("kb", 1), c.Get("pu", 1), c.Get("ur", 1), c.Get("rb", 0)};
}

absl::Status CheckKnobs(const ConvPairForm& f, const Knobs& k, const CpuTarget& target) {
  const bool ok = k.vw >= 1 && k.vw <= target.FloatLanes() && (k.vw & (k.vw - 1)) == 0 && k.kb >= 1 &&
                  f.c % k.kb == 0 && k.kb <= 16 && k.pu >= 1 && k.pu <= 4 && k.ur >= 1 && k.ur <= 8 &&
                  k.rb >= 0 && k.rb < f.geo.oh && (k.rb == 0 || f.geo.oh % k.rb == 0) &&
                  StackFloats(f, k.vw, k.ur, k.kb, k.rb) <= kMaxStackFloats;
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("conv pair ", f.pw->name(), ": knobs out of range"));
  return absl::OkStatus();
}

// Band heights offered: divisors of the output rows whose bands recompute at
// most half again of the expansion (the rows their windows share) and read
// at most kBandInputBytes of x.
std::vector<int64_t> BandHeights(const ConvPairForm& f) {
  std::vector<int64_t> out;
  for (int64_t rb = 1; rb < f.geo.oh; ++rb) {
    if (f.geo.oh % rb != 0) continue;
    const int64_t rows_in = BandInputRows(f, rb);
    if (2 * rows_in > 3 * rb * f.geo.sh) continue;
    if (f.cin * rows_in * f.w * 4 > kBandInputBytes) continue;
    out.push_back(rb);
  }
  return out;
}

std::vector<ScheduleConfig> Enumerate(const Graph& g, const CpuTarget& target) {
  absl::StatusOr<ConvPairForm> f = AnalyzeConvPair(g);
  if (!f.ok()) return {};
  std::vector<int64_t> vws = VectorWidths(target, f->h * f->w);
  if (vws.size() > 2) vws.erase(vws.begin(), vws.end() - 2);
  std::vector<int64_t> rbs = {0};
  for (int64_t rb : BandHeights(*f)) rbs.push_back(rb);
  std::vector<ScheduleConfig> out;
  for (int64_t rb : rbs) {
    for (int64_t vw : vws) {
      for (int64_t kb : {2, 4, 8}) {
        for (int64_t pu : {2, 4}) {
          for (int64_t ur : {2, 4}) {
            Knobs k{vw, kb, pu, ur, rb};
            if (!CheckKnobs(*f, k, target).ok()) continue;
            ScheduleConfig c;
            c.Set("vw", vw);
            c.Set("kb", kb);
            c.Set("pu", pu);
            c.Set("ur", ur);
            if (rb > 0) c.Set("rb", rb);
            out.push_back(c);
          }
        }
      }
    }
  }
  return out;
}

// The band height of the default: none while x stays in L2 across the
// channel blocks (kBandFromBytes), else the one whose bands read the number
// of input rows nearest kBandInputRows.
int64_t DefaultBandHeight(const ConvPairForm& f) {
  if (f.cin * f.h * f.w * 4 <= kBandFromBytes) return 0;
  int64_t best = 0;
  for (int64_t rb : BandHeights(f)) {
    if (best == 0 ||
        std::abs(BandInputRows(f, rb) - kBandInputRows) < std::abs(BandInputRows(f, best) - kBandInputRows)) {
      best = rb;
    }
  }
  return best;
}

// The default band height (DefaultBandHeight); of its points those making
// kMinTasks tasks where any does (MNASNet's 8 -> 24 pair on 112x112 took 3
// channel blocks of 8, two of them on one of 2 threads); the widest
// vectors; 16 pointwise accumulators (kb * pu) and 4 depthwise vectors per
// register block, as the separate variants' defaults. Measured (1 thread, 200-250
// points tuned each) on expansions of 16 -> 64 channels on 160x160 and
// 112x112 and 16 -> 32 on 128x128 (SSDlite, MobileViT), 16 -> 96 on 112x112
// and 24 -> 144 on 56x56 (EfficientNet): within 2% of the space's best on
// each; x of 0.8-1.6 MB streamed once per channel block took 1.2-1.9x
// longer than bands, and bands over the 300 KB of the 56x56 maps 1.14x.
ScheduleConfig Default(const Graph& g, const CpuTarget& target) {
  absl::StatusOr<ConvPairForm> f = AnalyzeConvPair(g);
  const int64_t want = f.ok() ? DefaultBandHeight(*f) : 0;
  // Tasks of a point, kMinTasks at most (more rank alike).
  auto tasks = [&f](const ScheduleConfig& c) -> int64_t {
    if (!f.ok()) return 0;
    const int64_t rb = c.Get("rb", 0);
    return std::min(kMinTasks, f->n * (rb > 0 ? f->geo.oh / rb : f->c / c.Get("kb", 1)));
  };
  return BestBy(Enumerate(g, target), [want, &tasks](const ScheduleConfig& c) {
    return std::make_tuple(c.Get("rb", 0) == want, tasks(c), c.Get("vw", 1),
                           -std::abs(c.Get("kb", 1) * c.Get("pu", 1) - 16), c.Get("kb", 1), c.Get("ur", 1));
  });
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const CpuTarget& target) {
  ASSIGN_OR_RETURN(ConvPairForm f, AnalyzeConvPair(g));
  for (const auto& [key, v] : c.knobs) {
    if (key != "vw" && key != "kb" && key != "pu" && key != "ur" && key != "rb") {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule ", c.ToString(), ": knob ", key, " does not apply to conv pair ", f.pw->name()));
    }
  }
  return CheckKnobs(f, KnobsOf(c), target);
}

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& config, const CpuTarget& target) {
  ASSIGN_OR_RETURN(ConvPairForm f, AnalyzeConvPair(g));
  const Knobs kn = KnobsOf(config);
  RETURN_IF_ERROR(CheckKnobs(f, kn, target));
  const int64_t vw = kn.vw, kb = kn.kb, pu = kn.pu, ur = kn.ur, rb = kn.rb;
  const int64_t hw = f.h * f.w, pbw = vw * pu;
  const int64_t blocks = f.c / kb;
  // Whole maps: a task per (image, channel block). Bands: a task per (image,
  // band), its channel blocks one after the other over the band's input rows.
  const int64_t bands = rb > 0 ? f.geo.oh / rb : 1;
  const int64_t rows_in = rb > 0 ? BandInputRows(f, rb) : f.h;
  const int64_t plane = rows_in * f.w;  // floats of one channel's expanded rows
  const int64_t tasks = rb > 0 ? f.n * bands : f.n * blocks;

  GraphExpr ge(g);
  const std::vector<Buffer>& args = ge.args();
  const Buffer x = args[f.x_arg], w1 = args[f.w1_arg], w2 = args[f.w2_arg];
  const Buffer b1 = f.b1_arg >= 0 ? args[f.b1_arg] : nullptr, b2 = f.b2_arg >= 0 ? args[f.b2_arg] : nullptr;
  const Value* expanded = f.pw->output(0);
  const Value* dw_in = f.dw->input(0);
  const Value* dw_out = f.dw->output(0);
  const AnchorOutputs outs = PlanAnchorOutputs(g, dw_out);

  Buffer ep = MakeBuffer("ep", {kb * plane}, BufferRole::kTemp);  // the block's planes, after the mid chain
  Expr n = Var("n_"), c0 = Mul(Var("cb_"), I(kb));

  // A line of pixels the expansion runs over: the whole map flattened, or
  // one input row `gr` of a band (its row j of ep).
  struct Line {
    int64_t len;
    Expr x_off, ep_off;  // of the line's pixel 0 in x's plane and in ep's
    std::function<std::vector<Expr>(Expr ch, Expr p)> mid_idx;
  };
  // The expansion of channels c0 .. c0 + kb over a line from pixel p0:
  // register blocks of kb channels by nu vectors; `guard` masks the lanes
  // past the line's end.
  auto expand = [&](const std::string& name, const Line& line, Expr p0, int64_t nu,
                    bool guard) -> absl::StatusOr<Stmt> {
    Buffer acc = MakeBuffer(name, {kb * nu * vw}, BufferRole::kTemp);
    Expr kk = Var("kk_"), u = Var("u_"), v = Var("v_"), ci = Var("ci_");
    Expr ch = Add(c0, kk);
    Expr ai = Add(Mul(Add(Mul(kk, I(nu)), u), I(vw)), v);
    Expr p = Add(Add(p0, Mul(u, I(vw))), v);
    auto lanes = [&](Stmt body, bool masked) {
      if (masked) body = IfThen(Lt(p, I(line.len)), std::move(body));
      return For("v_", I(vw),
                 For("kk_", I(kb), For("u_", I(nu), std::move(body), ForKind::kUnrolled), ForKind::kUnrolled),
                 ForKind::kVectorized);
    };
    Stmt init = lanes(Store(acc, ai, b1 ? Load(b1, ch) : FloatImm(0)), false);
    Expr xi = Add(Add(Mul(Add(Mul(n, I(f.cin)), ci), I(hw)), line.x_off), p);
    Stmt mac =
        For("ci_", I(f.cin),
            lanes(Store(acc, ai, MulAdd(Load(x, xi), Load(w1, Add(Mul(ch, I(f.cin)), ci)), Load(acc, ai))), guard));
    // The mid chain at the pixel, reading the expansion as the accumulator.
    ge.BindValue(expanded, Load(acc, ai));
    ASSIGN_OR_RETURN(Expr mid, ge.At(dw_in, line.mid_idx(ch, p)));
    Stmt store = lanes(Store(ep, Add(Add(Mul(kk, I(plane)), line.ep_off), p), mid), guard);
    return Allocate(acc, Block({init, mac, store}));
  };
  auto expand_line = [&](const Line& line) -> absl::StatusOr<std::vector<Stmt>> {
    std::vector<Stmt> out;
    if (line.len / pbw > 0) {
      ASSIGN_OR_RETURN(Stmt full, expand("acc_e", line, Mul(Var("pb_"), I(pbw)), pu, false));
      out.push_back(For("pb_", I(line.len / pbw), full));
    }
    if (line.len % pbw != 0) {
      ASSIGN_OR_RETURN(Stmt tail, expand("acc_et", line, I(line.len / pbw * pbw), CeilDiv(line.len % pbw, vw), true));
      out.push_back(tail);
    }
    return out;
  };

  std::vector<Stmt> expansion;
  Expr oh0 = nullptr;
  if (rb == 0) {
    Line line{hw, I(0), I(0), [&](Expr ch, Expr p) {
                return f.mid_flat ? std::vector<Expr>{n, ch, I(0), p}
                                  : std::vector<Expr>{n, ch, Div(p, I(f.w)), Mod(p, I(f.w))};
              }};
    ASSIGN_OR_RETURN(expansion, expand_line(line));
  } else {
    // Band row j is input row gr (padding rows above and below the map are
    // zeros, so the band's depthwise geometry has no row padding).
    Expr band = Var("band_"), j = Var("er_");
    Expr gr = Add(Sub(Mul(band, I(rb * f.geo.sh)), I(f.geo.pad_top)), j);
    Line line{f.w, Mul(gr, I(f.w)), Mul(j, I(f.w)), [&](Expr ch, Expr p) { return std::vector<Expr>{n, ch, gr, p}; }};
    ASSIGN_OR_RETURN(std::vector<Stmt> row, expand_line(line));
    Expr q = Add(Mul(Var("zq_"), I(vw)), Var("zv_"));
    Stmt zero = Store(ep, Add(Add(Mul(Var("zk_"), I(plane)), Mul(j, I(f.w))), q), FloatImm(0));
    if (f.w % vw != 0) zero = IfThen(Lt(q, I(f.w)), zero);
    zero = For("zk_", I(kb), For("zq_", I(CeilDiv(f.w, vw)), For("zv_", I(vw), zero, ForKind::kVectorized)));
    expansion.push_back(
        For("er_", I(rows_in), IfThen(And(Ge(gr, I(0)), Lt(gr, I(f.h))), Block(std::move(row)), zero)));
    oh0 = Mul(band, I(rb));
  }

  // ---- per channel of the block: the depthwise plane stage over its plane
  // (the whole map's or the band's rows).
  Expr cl = Var("c_");
  auto read = [&](Expr ih, Expr iw) { return Load(ep, Add(Add(Mul(cl, I(plane)), Mul(ih, I(f.w))), iw)); };
  const WindowGeometry geo = rb > 0 ? BandGeometry(f, rb) : f.geo;
  ASSIGN_OR_RETURN(DepthwisePlanes dp,
                   LowerDepthwisePlanes(g, ge, dw_out, outs, geo, w2, b2, n, Add(c0, cl), vw, ur, read, oh0));
  std::vector<Stmt> block_seq = expansion;
  block_seq.push_back(For("c_", I(kb), dp.channel));
  Stmt body;
  if (rb == 0) {
    std::vector<Stmt> body_seq = {dp.zero};
    body_seq.insert(body_seq.end(), block_seq.begin(), block_seq.end());
    body = Allocate(ep, Allocate(dp.xp, Allocate(dp.yp, Block(body_seq))));
    body = LetStmt("n_", Div(Var("t_"), I(blocks)), LetStmt("cb_", Mod(Var("t_"), I(blocks)), body));
  } else {
    body = Allocate(ep, Allocate(dp.xp, Allocate(dp.yp, Block({dp.zero, For("cb_", I(blocks), Block(block_seq))}))));
    body = LetStmt("n_", Div(Var("t_"), I(bands)), LetStmt("band_", Mod(Var("t_"), I(bands)), body));
  }
  return LoopFunc{"conv_pair", args, For("t_", I(tasks), body, ForKind::kParallel)};
}

}  // namespace

WorkloadLowering ConvPairLowering() {
  WorkloadLowering l;
  l.kind = "conv_pair";
  l.match = [](const Graph& g) { return AnalyzeConvPair(g).status(); };
  l.enumerate = Enumerate;
  l.default_schedule = Default;
  l.validate = Validate;
  l.lower = Lower;
  return l;
}

}  // namespace kiln::loop_ir
