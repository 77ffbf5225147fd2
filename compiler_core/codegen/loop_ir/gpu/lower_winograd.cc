// GPU lowerings of the Winograd transforms (see gpu/lower_winograd.h).
#include "compiler_core/codegen/loop_ir/gpu/lower_winograd.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_winograd.h"
#include "compiler_core/codegen/loop_ir/verifier.h"

namespace kiln::loop_ir::gpu {
namespace {

Expr I(int64_t v) { return IntImm(v); }

using Analyzer = std::function<absl::StatusOr<WinogradForm>(const Graph&)>;

// The tile `tile` of the grid: image, tile row, tile column.
struct TileAt {
  Expr n, row, col;
};
TileAt TileOf(const ops::WinogradGrid& s, const Expr& tile) {
  return TileAt{Div(tile, I(s.tiles_h * s.tiles_w)), Mod(Div(tile, I(s.tiles_w)), I(s.tiles_h)), Mod(tile, I(s.tiles_w))};
}

// B^T d B of (channel, tile) `item` into V.
Stmt InputItem(const WinogradForm& f, const Buffer& x, const Buffer& v, const Expr& item) {
  const ops::WinogradGrid& s = f.grid;
  const ops::WinogradTransform& t = *f.t;
  const int64_t al = t.alpha, m = t.m;
  Expr c = Div(item, I(s.tiles())), tile = Mod(item, I(s.tiles()));
  TileAt at = TileOf(s, tile);
  Buffer d = MakeBuffer("patch", {al * al}, BufferRole::kTemp);
  std::vector<Stmt> body;
  Expr plane = Add(Mul(at.n, I(s.c)), c);
  for (int64_t i = 0; i < al; ++i) {
    Expr ih = Sub(Add(Mul(at.row, I(m)), I(i)), I(s.pad_top));
    for (int64_t j = 0; j < al; ++j) {
      Expr iw = Sub(Add(Mul(at.col, I(m)), I(j)), I(s.pad_left));
      Expr inside = And(And(Ge(ih, I(0)), Lt(ih, I(s.h))), And(Ge(iw, I(0)), Lt(iw, I(s.w))));
      body.push_back(IfThen(inside, Store(d, I(i * al + j), Load(x, Add(Mul(Add(Mul(plane, I(s.h)), ih), I(s.w)), iw))),
                            Store(d, I(i * al + j), FloatImm(0))));
    }
  }
  WinogradBindings let("d");
  std::vector<std::vector<Expr>> dv(al, std::vector<Expr>(al));
  for (int64_t i = 0; i < al; ++i) {
    for (int64_t j = 0; j < al; ++j) dv[i][j] = Load(d, I(i * al + j));
  }
  const std::vector<std::vector<Expr>> bd = WinogradLeftMultiply(t.bt, dv, let);  // B^T d
  std::vector<Stmt> stores;
  for (int64_t a = 0; a < al; ++a) {
    for (int64_t b = 0; b < al; ++b) {
      stores.push_back(Store(v, Add(Mul(Add(I((a * al + b) * s.c), c), I(s.tiles())), tile), WinogradCombine(t.bt[b], bd[a])));
    }
  }
  body.push_back(let.Around(Block(stores)));
  return Allocate(d, Block(body));
}

// A^T M A + bias of (output channel, tile) `item`, through the epilogue.
absl::StatusOr<Stmt> OutputItem(const Graph& g, const WinogradForm& f, GraphExpr& ge, const AnchorOutputs& outs,
                                const Expr& item) {
  const ops::WinogradGrid& s = f.grid;
  const ops::WinogradTransform& t = *f.t;
  const int64_t al = t.alpha, m = t.m, kc = s.c;  // the grid's c is K here
  Expr k = Div(item, I(s.tiles())), tile = Mod(item, I(s.tiles()));
  TileAt at = TileOf(s, tile);
  const Buffer mm = ge.args()[f.x_arg];
  WinogradBindings let("m");
  std::vector<std::vector<Expr>> mv(al, std::vector<Expr>(al));
  for (int64_t a = 0; a < al; ++a) {
    for (int64_t b = 0; b < al; ++b) mv[a][b] = let.Bind(Load(mm, Add(Mul(Add(I((a * al + b) * kc), k), I(s.tiles())), tile)));
  }
  const std::vector<std::vector<Expr>> am = WinogradLeftMultiply(t.at, mv, let);  // A^T M
  Expr bias = f.bias_arg >= 0 ? Load(ge.args()[f.bias_arg], k) : nullptr;
  std::vector<Stmt> rows;
  for (int64_t i = 0; i < m; ++i) {
    Expr oh = Add(Mul(at.row, I(m)), I(i));
    std::vector<Stmt> row;
    for (int64_t j = 0; j < m; ++j) {
      Expr ow = Add(Mul(at.col, I(m)), I(j));
      Expr y = WinogradCombine(t.at[j], am[i]);
      if (bias != nullptr) y = Add(y, bias);
      Expr oi = Add(Mul(Add(Mul(Add(Mul(at.n, I(kc)), k), I(s.oh)), oh), I(s.ow)), ow);
      ASSIGN_OR_RETURN(Stmt st, StoreThroughEpilogue(g, ge, f.node->output(0), outs, y, {at.n, k, oh, ow}, oi));
      if (s.ow % m != 0) st = IfThen(Lt(ow, I(s.ow)), st);
      row.push_back(st);
    }
    Stmt r = Block(row);
    if (s.oh % m != 0) r = IfThen(Lt(oh, I(s.oh)), r);
    rows.push_back(r);
  }
  return let.Around(Block(rows));
}

std::vector<ScheduleConfig> Space(const Analyzer& analyze, const Graph& g) {
  if (!analyze(g).ok()) return {};
  std::vector<ScheduleConfig> out;
  for (int64_t bt : {64, 128, 256}) {
    ScheduleConfig c;
    c.Set("bt", bt);
    out.push_back(c);
  }
  return out;
}

absl::Status CheckKnobs(const Graph& g, const ScheduleConfig& c) { return ValidateGpuKnobs(g, c, {"bt"}); }

absl::StatusOr<LoopFunc> LowerInput(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  ASSIGN_OR_RETURN(WinogradForm f, AnalyzeWinogradInput(g));
  RETURN_IF_ERROR(CheckKnobs(g, c));
  GraphExpr ge(g);
  const Buffer x = ge.args()[f.x_arg], v = ge.output_buffer(0);
  Stmt body = FlatKernel({{f.grid.c * f.grid.tiles(), [&](Expr item) { return InputItem(f, x, v, item); }}},
                         c.Get("bt", 128), 1);
  LoopFunc fn{"winograd_input", ge.args(), body};
  RETURN_IF_ERROR(Verify(fn));
  return fn;
}

absl::StatusOr<LoopFunc> LowerOutput(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  ASSIGN_OR_RETURN(WinogradForm f, AnalyzeWinogradOutput(g));
  RETURN_IF_ERROR(CheckKnobs(g, c));
  GraphExpr ge(g);
  const AnchorOutputs outs = PlanAnchorOutputs(g, f.node->output(0));
  absl::Status err = absl::OkStatus();
  Stmt body = FlatKernel({{f.grid.c * f.grid.tiles(),
                           [&](Expr item) -> Stmt {
                             absl::StatusOr<Stmt> s = OutputItem(g, f, ge, outs, item);
                             if (!s.ok()) {
                               err = s.status();
                               return Block({});
                             }
                             return *s;
                           }}},
                         c.Get("bt", 128), 1);
  RETURN_IF_ERROR(err);
  LoopFunc fn{"winograd_output", ge.args(), body};
  RETURN_IF_ERROR(Verify(fn));
  return fn;
}

GpuWorkloadLowering Make(const char* kind, Analyzer analyze,
                         std::function<absl::StatusOr<LoopFunc>(const Graph&, const ScheduleConfig&, const GpuTarget&)>
                             lower) {
  GpuWorkloadLowering l;
  l.kind = kind;
  l.enumerate = [analyze](const Graph& g, const GpuTarget&) { return Space(analyze, g); };
  l.default_schedule = [analyze](const Graph& g, const GpuTarget&) {
    ScheduleConfig c;
    if (analyze(g).ok()) c.Set("bt", 128);
    return c;
  };
  l.validate = [analyze](const Graph& g, const ScheduleConfig& c, const GpuTarget&) -> absl::Status {
    RETURN_IF_ERROR(analyze(g).status());
    return CheckKnobs(g, c);
  };
  l.lower = std::move(lower);
  return l;
}

}  // namespace

GpuWorkloadLowering GpuWinogradInputLowering() { return Make("winograd_input", AnalyzeWinogradInput, LowerInput); }
GpuWorkloadLowering GpuWinogradOutputLowering() { return Make("winograd_output", AnalyzeWinogradOutput, LowerOutput); }

}  // namespace kiln::loop_ir::gpu
