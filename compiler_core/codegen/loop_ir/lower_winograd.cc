// The Winograd transforms on loop IR (see lower_winograd.h).
#include "compiler_core/codegen/loop_ir/lower_winograd.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/phase_rows.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/winograd.h"

namespace kiln::loop_ir {
namespace {

using ops::WinogradGrid;
using ops::WinogradTransform;

Expr I(int64_t v) { return IntImm(v); }

int InputIndex(const Graph& g, const Value* v) {
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    if (g.inputs()[i] == v) return static_cast<int>(i);
  }
  return -1;
}

// Every used value static f32: CheckWorkload refuses the kiln domain.
absl::Status CheckValues(const Graph& g) {
  if (g.nodes().empty() || g.outputs().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("workload graph ", g.name(), " has no nodes or no outputs"));
  }
  for (const Value* v : g.values()) {
    if (v->is_constant() && v->users().empty()) continue;
    const TensorType& t = v->type();
    if (!t.known || !t.IsStatic() || !(t.dtype == DType::kFloat32 || IsStructuralInt(v))) {
      return absl::UnimplementedError(absl::StrCat("value ", v->name(), " is not a static f32 tensor"));
    }
  }
  return absl::OkStatus();
}

const Node* FindKilnNode(const Graph& g, const char* op) {
  for (const auto& n : g.nodes()) {
    if (n->domain() == kKilnDomain && n->op_type() == op) return n.get();
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<WinogradForm> AnalyzeWinogradInput(const Graph& g) {
  const Node* n = FindKilnNode(g, "WinogradInput");
  if (n == nullptr) return absl::UnimplementedError(absl::StrCat("workload ", g.name(), " has no kiln.WinogradInput"));
  if (g.nodes().size() != 1) return NodeError(*n, "not alone in its workload");
  RETURN_IF_ERROR(CheckValues(g));
  WinogradForm f;
  f.node = n;
  f.t = ops::FindWinogradTransform(n->GetInt("tile", 0));
  std::vector<int64_t> pads = n->GetInts("pads", {});
  std::vector<int64_t> x = DimsOf(n->input(0));
  if (f.t == nullptr || pads.size() != 4 || x.size() != 4) return NodeError(*n, "bad tile, pads or input rank");
  const int64_t oh = x[2] + pads[0] + pads[2] - 2, ow = x[3] + pads[1] + pads[3] - 2;
  f.grid = ops::MakeWinogradGrid(x[0], x[1], x[2], x[3], pads[0], pads[1], oh, ow, f.t->m);
  f.x_arg = InputIndex(g, n->input(0));
  if (f.x_arg < 0) return NodeError(*n, "input computed inside the workload");
  if (g.outputs().size() != 1 || g.outputs()[0] != n->output(0)) return NodeError(*n, "outputs other than V");
  return f;
}

absl::StatusOr<WinogradForm> AnalyzeWinogradOutput(const Graph& g) {
  const Node* n = FindKilnNode(g, "WinogradOutput");
  if (n == nullptr) return absl::UnimplementedError(absl::StrCat("workload ", g.name(), " has no kiln.WinogradOutput"));
  RETURN_IF_ERROR(CheckValues(g));
  WinogradForm f;
  f.node = n;
  f.t = ops::FindWinogradTransform(n->GetInt("tile", 0));
  std::vector<int64_t> y = n->GetInts("output_shape", {});
  if (f.t == nullptr || y.size() != 4) return NodeError(*n, "bad tile or output_shape");
  f.grid = ops::MakeWinogradGrid(y[0], y[1], 0, 0, 0, 0, y[2], y[3], f.t->m);
  f.x_arg = InputIndex(g, n->input(0));
  if (f.x_arg < 0) return NodeError(*n, "input computed inside the workload");
  if (n->num_inputs() > 1 && n->input(1) != nullptr) {
    f.bias_arg = InputIndex(g, n->input(1));
    if (f.bias_arg < 0) return NodeError(*n, "bias computed inside the workload");
  }
  for (const auto& m : g.nodes()) {
    if (m.get() == n) continue;
    if (!m->domain().empty() || !IsInlinableElementwise(m->op_type())) {
      return NodeError(*m, "not an elementwise epilogue operator");
    }
    RETURN_IF_ERROR(GraphExpr::CheckNode(*m));
    if (DimsOf(m->output(0)) != y) return NodeError(*m, "epilogue value does not have the convolution's shape");
  }
  for (const Value* v : g.outputs()) {
    if (DimsOf(v) != y) return NodeError(*n, absl::StrCat("output ", v->name(), " is not of the convolution's shape"));
  }
  return f;
}

namespace {

// Tiles per vector: 4, 8 or 16 (up to the target's lanes), none twice as wide
// as a tile row needs.
std::vector<int64_t> TileWidths(const WinogradForm& f, const CpuTarget& target) {
  std::vector<int64_t> out;
  for (int64_t vw : {4, 8, 16}) {
    if (vw <= target.FloatLanes() && (vw == 4 || vw / 2 < f.grid.tiles_w)) out.push_back(vw);
  }
  return out;
}

std::vector<ScheduleConfig> Space(const WinogradForm& f, const CpuTarget& target) {
  std::vector<ScheduleConfig> out;
  for (int64_t vw : TileWidths(f, target)) {
    ScheduleConfig c;
    c.Set("vw", vw);
    out.push_back(c);
  }
  return out;
}

// The fewest tiles per vector that cover a tile row.
ScheduleConfig DefaultOf(const WinogradForm& f, const CpuTarget& target) {
  std::vector<ScheduleConfig> space = Space(f, target);
  return BestBy(space, [&](const ScheduleConfig& c) {
    const int64_t vw = c.Get("vw", 4);
    return std::make_pair(vw >= f.grid.tiles_w || vw == target.FloatLanes(), -vw);
  });
}

absl::Status CheckVw(const WinogradForm& f, const ScheduleConfig& c, const CpuTarget& target) {
  for (const auto& [key, v] : c.knobs) {
    if (key != "vw") {
      return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob ", key, " does not apply to ",
                                                     f.node->op_type(), " ", f.node->name()));
    }
  }
  std::vector<int64_t> ok = TileWidths(f, target);
  if (std::find(ok.begin(), ok.end(), c.Get("vw", 4)) == ok.end()) {
    return absl::InvalidArgumentError(absl::StrCat(f.node->op_type(), " ", f.node->name(), ": vw=", c.Get("vw", 4),
                                                   " is not one of the tile widths"));
  }
  return absl::OkStatus();
}

}  // namespace

Expr WinogradCombine(const std::vector<double>& coef, const std::vector<Expr>& e) {
  Expr acc;
  for (size_t i = 0; i < coef.size(); ++i) {
    const double c = coef[i];
    if (c == 0) continue;
    if (acc == nullptr) {
      acc = c == 1 ? e[i] : Mul(FloatImm(c), e[i]);
    } else if (c == 1) {
      acc = Add(acc, e[i]);
    } else if (c == -1) {
      acc = Sub(acc, e[i]);
    } else {
      acc = Call("fma", {FloatImm(c), e[i], acc});
    }
  }
  return acc != nullptr ? acc : FloatImm(0);
}

Expr WinogradBindings::Bind(Expr value) {
  names_.push_back(absl::StrCat(prefix_, names_.size(), "_"));
  values_.push_back(std::move(value));
  return Var(names_.back(), ScalarType::kF32);
}

Stmt WinogradBindings::Around(Stmt body) const {
  for (size_t i = names_.size(); i-- > 0;) body = LetStmt(names_[i], values_[i], body);
  return body;
}

std::vector<std::vector<Expr>> WinogradLeftMultiply(const std::vector<std::vector<double>>& coef,
                                                    const std::vector<std::vector<Expr>>& x, WinogradBindings& let) {
  std::vector<std::vector<Expr>> out(coef.size(), std::vector<Expr>(x[0].size()));
  for (size_t a = 0; a < coef.size(); ++a) {
    for (size_t j = 0; j < x[0].size(); ++j) {
      std::vector<Expr> col;
      for (size_t i = 0; i < x.size(); ++i) col.push_back(x[i][j]);
      out[a][j] = let.Bind(WinogradCombine(coef[a], col));
    }
  }
  return out;
}

namespace {

// `f` with `config`'s tile width checked against it.
absl::StatusOr<WinogradForm> FormAt(absl::StatusOr<WinogradForm> f, const ScheduleConfig& config,
                                    const CpuTarget& target) {
  if (!f.ok()) return f;
  RETURN_IF_ERROR(CheckVw(*f, config, target));
  return f;
}

// Whether `rows` rows `stride` bytes apart start in so few sets of an L1 of
// 64 sets of 64-byte lines (every x86 core Kiln targets: 32-48 KiB, 8-12
// ways) that more than 6 share one. V's alpha^2 rows for one channel lie
// C * tiles floats apart: 8 KiB for 128 channels of 16 tiles (a 14x14 map),
// so all 36 fell in one set, and each tile row's few lanes evicted the lines
// the last one wrote (a 128 x 14 x 14 transform took 2.5 times a 28 x 28
// one, whose rows spread over 8 sets; staging those costs 5%).
bool RowsCrowdL1Sets(int64_t rows, int64_t stride) {
  std::vector<int> per_set(64, 0);
  for (int64_t r = 0; r < rows; ++r) {
    if (++per_set[static_cast<size_t>((r * stride / 64) % 64)] > 6) return true;
  }
  return false;
}

// Whether a transform stages each channel's alpha^2 rows of V (or M,
// [alpha^2, channels, tiles]) on the stack, [alpha^2, tiles]: one image,
// rows that crowd an L1 set, and a stage of at most 16 KiB.
bool StagesChannels(const WinogradGrid& s, int64_t alpha, int64_t channels) {
  return s.n == 1 && alpha * alpha * s.tiles() <= 4096 && RowsCrowdL1Sets(alpha * alpha, channels * s.tiles() * 4);
}

// Channel c's rows of `rows` copied whole to its stage (to_stage) or back,
// vw floats at a time.
Stmt CopyChannelRows(const Buffer& rows, const Buffer& stage, Expr c, const WinogradGrid& s, int64_t alpha,
                     int64_t channels, int64_t vw, bool to_stage) {
  Expr e = Var("se_");
  return For("se_", I(alpha * alpha), VectorChunks("sq_", "sv_", s.tiles(), vw, [&](Expr i, Expr guard) {
               Expr at_rows = Add(Mul(Add(Mul(e, I(channels)), c), I(s.tiles())), i);
               Expr at_stage = Add(Mul(e, I(s.tiles())), i);
               Stmt copy = to_stage ? Store(stage, at_stage, Load(rows, at_rows))
                                    : Store(rows, at_rows, Load(stage, at_stage));
               return guard != nullptr ? IfThen(guard, copy) : copy;
             }));
}

// The input transform's tile loop: for th, chunks of vw tiles tw
// (VectorChunks: the last one, where vw does not divide tiles_w, alone and
// guarded by tw < tiles_w); body(th, tw, guard).
Stmt ForEachTile(const WinogradGrid& g, int64_t vw, const std::function<Stmt(Expr, Expr, Expr)>& body) {
  Expr th = Var("th_");
  return For("th_", I(g.tiles_h),
             VectorChunks("tc_", "tl_", g.tiles_w, vw, [&](Expr tw, Expr guard) { return body(th, tw, guard); }));
}

absl::StatusOr<LoopFunc> LowerInput(const Graph& g, const ScheduleConfig& config, const CpuTarget& target) {
  ASSIGN_OR_RETURN(WinogradForm f, FormAt(AnalyzeWinogradInput(g), config, target));
  const int64_t vw = config.Get("vw", 4);
  const WinogradGrid& s = f.grid;
  const WinogradTransform& t = *f.t;
  const int64_t al = t.alpha, m = t.m;
  // The padded plane: every row and column a tile (or a masked-off lane's
  // span) reads, zero outside X.
  const int64_t hp = s.tiles_h * m + 2, wp = CeilDiv(s.tiles_w, vw) * vw * m + 2;
  const int64_t pack_vw = std::min<int64_t>(target.FloatLanes(), 16);
  const int64_t wq = CeilDiv(wp, pack_vw) * pack_vw;
  GraphExpr ge(g);
  Buffer x = ge.args()[f.x_arg];
  Buffer v = ge.output_buffer(0);
  Buffer xp = MakeBuffer("xp", {hp * wq}, BufferRole::kTemp);
  Expr p = Var("p_");
  Stmt pack;
  {
    Expr ih = Sub(Var("pr_"), I(s.pad_top));
    PhaseRowPack row{.x = x,
                     .xp = xp,
                     .x_row = Mul(Add(Mul(p, I(s.h)), ih), I(s.w)),
                     .row_inside = And(Ge(ih, I(0)), Lt(ih, I(s.h))),
                     .prow = Var("pr_"),
                     .w = s.w,
                     .pad_left = s.pad_left,
                     .wq = wq,
                     .vw = pack_vw};
    pack = For("pr_", I(hp), PackPhaseRow(row));
  }
  Expr n = Div(p, I(s.c)), c = Mod(p, I(s.c));
  // Where V's rows crowd an L1 set, a channel's transformed tiles go to the
  // stack and are copied out a row at a time (StagesChannels).
  const bool stage = StagesChannels(s, al, s.c);
  Buffer vs = MakeBuffer("vs", {al * al * s.tiles()}, BufferRole::kTemp);
  // The plane is wide enough for every lane of the last chunk: the loads need
  // no guard, only the stores.
  Stmt transform = ForEachTile(s, vw, [&](Expr th, Expr tw, Expr guard) {
    WinogradBindings let("d");
    std::vector<std::vector<Expr>> d(al, std::vector<Expr>(al));
    for (int64_t i = 0; i < al; ++i) {
      for (int64_t j = 0; j < al; ++j) {
        d[i][j] = let.Bind(Load(xp, Add(Mul(Add(Mul(th, I(m)), I(i)), I(wq)), Add(Mul(tw, I(m)), I(j)))));
      }
    }
    const std::vector<std::vector<Expr>> bd = WinogradLeftMultiply(t.bt, d, let);  // B^T d
    Expr tile = Add(Mul(Add(Mul(n, I(s.tiles_h)), th), I(s.tiles_w)), tw);
    std::vector<Stmt> stores;
    for (int64_t a = 0; a < al; ++a) {
      for (int64_t b = 0; b < al; ++b) {
        Expr at = stage ? Add(I((a * al + b) * s.tiles()), tile)
                        : Add(Mul(Add(I((a * al + b) * s.c), c), I(s.tiles())), tile);
        stores.push_back(Store(stage ? vs : v, at, WinogradCombine(t.bt[b], bd[a])));
      }
    }
    Stmt st = Block(stores);
    return let.Around(guard != nullptr ? IfThen(guard, st) : st);
  });
  Stmt body = stage ? Allocate(vs, Block({pack, transform, CopyChannelRows(v, vs, c, s, al, s.c, pack_vw, false)}))
                    : Block({pack, transform});
  body = LetStmt("p_", Var("t_"), Allocate(xp, body));
  return LoopFunc{"winograd_input", ge.args(), For("t_", I(s.n * s.c), body, ForKind::kParallel)};
}

absl::StatusOr<LoopFunc> LowerOutput(const Graph& g, const ScheduleConfig& config, const CpuTarget& target) {
  ASSIGN_OR_RETURN(WinogradForm f, FormAt(AnalyzeWinogradOutput(g), config, target));
  const int64_t vw = config.Get("vw", 4);
  const WinogradGrid& s = f.grid;
  const WinogradTransform& t = *f.t;
  const int64_t al = t.alpha, m = t.m, kc = s.c;  // the grid's c is K here
  GraphExpr ge(g);
  Buffer mm = ge.args()[f.x_arg];
  const Value* anchor = f.node->output(0);
  const AnchorOutputs outs = PlanAnchorOutputs(g, anchor);
  Buffer raw = ge.output_buffer(outs.raw);
  ge.Bind(anchor, raw);
  Expr n = Div(Var("p_"), I(kc)), k = Mod(Var("p_"), I(kc));
  Expr bias = f.bias_arg >= 0 ? Load(ge.args()[f.bias_arg], k) : nullptr;
  Expr plane = Mul(Var("p_"), I(s.oh * s.ow));  // (n * K + k) * OH * OW
  // Where M's rows crowd an L1 set, a channel's rows are first copied to the
  // stack, each read once, whole (StagesChannels).
  const bool stage = StagesChannels(s, al, kc);
  Buffer ms = MakeBuffer("ms", {al * al * s.tiles()}, BufferRole::kTemp);
  // Tile rows: transform, store the raw result (lane stride m), then the
  // epilogue over the row's outputs while they are in cache.
  Expr th = Var("th_");
  // A column past the map is only in the tail chunk, unless the whole
  // chunks end at the last tile (tiles_w a multiple of vw).
  const bool whole_chunks_ragged = (s.tiles_w / vw) * vw * m > s.ow;
  Stmt transform = VectorChunks("tc_", "tl_", s.tiles_w, vw, [&](Expr tw, Expr guard) {
    Expr tile = Add(Mul(Add(Mul(n, I(s.tiles_h)), th), I(s.tiles_w)), tw);
    WinogradBindings let("m");
    std::vector<std::vector<Expr>> mv(al, std::vector<Expr>(al));
    for (int64_t a = 0; a < al; ++a) {
      for (int64_t b = 0; b < al; ++b) {
        mv[a][b] = let.Bind(stage ? Load(ms, Add(I((a * al + b) * s.tiles()), tile))
                                  : Load(mm, Add(Mul(Add(I((a * al + b) * kc), k), I(s.tiles())), tile)));
      }
    }
    const std::vector<std::vector<Expr>> am = WinogradLeftMultiply(t.at, mv, let);  // A^T M
    std::vector<Stmt> rows;
    for (int64_t i = 0; i < m; ++i) {
      Expr oh = Add(Mul(th, I(m)), I(i));
      std::vector<Stmt> st;
      for (int64_t j = 0; j < m; ++j) {
        Expr ow = Add(Mul(tw, I(m)), I(j));
        Expr y = WinogradCombine(t.at[j], am[i]);
        if (bias != nullptr) y = Add(y, bias);
        Stmt store = Store(raw, Add(plane, Add(Mul(oh, I(s.ow)), ow)), y);
        if (s.ow % m != 0 && (guard != nullptr || whole_chunks_ragged)) store = IfThen(Lt(ow, I(s.ow)), store);
        st.push_back(store);
      }
      Stmt row = Block(st);
      if (s.oh % m != 0) row = IfThen(Lt(oh, I(s.oh)), row);
      rows.push_back(row);
    }
    // M ends with the last tile: a masked-off lane must not load.
    Stmt body = let.Around(Block(rows));
    return guard != nullptr ? IfThen(guard, body) : body;
  });
  std::vector<Stmt> per_row = {transform};
  if (!outs.order.empty()) {
    const int64_t ev = std::min<int64_t>(target.FloatLanes(), 16);
    Expr oh = Add(Mul(th, I(m)), Var("ei_"));
    absl::Status status;
    Stmt cols = VectorChunks("ec_", "el_", s.ow, ev, [&](Expr ow, Expr guard) {
      std::vector<Expr> idx = {n, k, oh, ow};
      Expr flat = Add(plane, Add(Mul(oh, I(s.ow)), ow));
      std::vector<Stmt> st;
      for (int j : outs.order) {
        absl::StatusOr<Expr> e = ge.At(g.outputs()[j], idx);
        if (!e.ok()) status.Update(e.status());
        if (e.ok()) st.push_back(Store(ge.output_buffer(j), flat, *e));
      }
      return guard != nullptr ? IfThen(guard, Block(st)) : Block(st);
    });
    RETURN_IF_ERROR(status);
    if (s.oh % m != 0) cols = IfThen(Lt(oh, I(s.oh)), cols);
    per_row.push_back(For("ei_", I(m), cols));
  }
  Stmt rows = For("th_", I(s.tiles_h), Block(per_row));
  if (stage) {
    const int64_t cv = std::min<int64_t>(target.FloatLanes(), 16);
    rows = Allocate(ms, Block({CopyChannelRows(mm, ms, k, s, al, kc, cv, true), rows}));
  }
  Stmt body = LetStmt("p_", Var("t_"), rows);
  return LoopFunc{"winograd_output", ge.args(), For("t_", I(s.n * kc), body, ForKind::kParallel)};
}

WorkloadLowering MakeLowering(const char* kind, std::function<absl::StatusOr<WinogradForm>(const Graph&)> analyze,
                              std::function<absl::StatusOr<LoopFunc>(const Graph&, const ScheduleConfig&,
                                                                     const CpuTarget&)>
                                  lower) {
  WorkloadLowering l;
  l.kind = kind;
  l.match = [analyze](const Graph& g) { return analyze(g).status(); };
  l.enumerate = [analyze](const Graph& g, const CpuTarget& target) {
    absl::StatusOr<WinogradForm> f = analyze(g);
    return f.ok() ? Space(*f, target) : std::vector<ScheduleConfig>{};
  };
  l.default_schedule = [analyze](const Graph& g, const CpuTarget& target) {
    absl::StatusOr<WinogradForm> f = analyze(g);
    return f.ok() ? DefaultOf(*f, target) : ScheduleConfig{};
  };
  l.validate = [analyze](const Graph& g, const ScheduleConfig& c, const CpuTarget& target) -> absl::Status {
    ASSIGN_OR_RETURN(WinogradForm f, analyze(g));
    return CheckVw(f, c, target);
  };
  l.lower = std::move(lower);
  return l;
}

}  // namespace

WorkloadLowering WinogradInputLowering() { return MakeLowering("winograd_input", AnalyzeWinogradInput, LowerInput); }
WorkloadLowering WinogradOutputLowering() { return MakeLowering("winograd_output", AnalyzeWinogradOutput, LowerOutput); }

}  // namespace kiln::loop_ir
