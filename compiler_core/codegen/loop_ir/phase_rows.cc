// Input rows packed by stride phase (see phase_rows.h).
#include "compiler_core/codegen/loop_ir/phase_rows.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "compiler_core/codegen/loop_ir/lower_common.h"

namespace kiln::loop_ir {

namespace {

Expr I(int64_t v) { return IntImm(v); }

}  // namespace

Stmt PackPhaseRow(const PhaseRowPack& p) {
  const int64_t nq = p.wq / p.vw, span = p.vw * p.sw;
  Expr ph = Var("pp_"), lane = Var("pv_");
  // Vector columns [lo, hi) of one phase row: the fill (kFill), plain loads
  // (kLoad), or loads where each lane's column is inside (kLoadTested).
  enum class Cols { kFill, kLoad, kLoadTested };
  auto cols = [&](int64_t lo, int64_t hi, Cols how) -> Stmt {
    Expr q = Add(Mul(Add(Var("pq_"), I(lo)), I(p.vw)), lane);
    Expr iw = Sub(Add(Mul(Add(p.col0, q), I(p.sw)), ph), I(p.pad_left));
    Expr pi = Add(Mul(Add(Mul(p.prow, I(p.sw)), ph), I(p.wq)), q);
    Stmt body = how == Cols::kFill ? Store(p.xp, pi, FloatImm(p.fill)) : Store(p.xp, pi, Load(p.x, Add(p.x_row, iw)));
    if (how == Cols::kLoadTested) {
      body = IfThen(And(Ge(iw, I(0)), Lt(iw, I(p.w))), body, Store(p.xp, pi, FloatImm(p.fill)));
    }
    return For("pq_", I(hi - lo), For("pv_", I(p.vw), body, ForKind::kVectorized));
  };
  // Vector qv's columns c0 + qv*vw + [0, vw) read input columns (c0 + qv*vw)*sw
  // - pad_left .. (c0 + (qv+1)*vw)*sw - 1 - pad_left over all phases.
  int64_t q_lo = 0, q_hi = 0;
  if (p.col0->kind == ExprKind::kIntImm) {
    const int64_t c0 = p.col0->int_value * p.sw;
    q_lo = std::clamp<int64_t>(CeilDiv(std::max<int64_t>(0, p.pad_left - c0), span), 0, nq);
    q_hi = std::clamp<int64_t>(FloorDiv(p.w + p.pad_left - c0, span), q_lo, nq);
  }
  std::vector<Stmt> row;
  if (q_lo > 0) row.push_back(cols(0, q_lo, Cols::kLoadTested));
  if (q_hi > q_lo) row.push_back(cols(q_lo, q_hi, Cols::kLoad));
  if (nq > q_hi) row.push_back(cols(q_hi, nq, Cols::kLoadTested));
  return IfThen(p.row_inside, For("pp_", I(p.sw), Block(std::move(row))),
                For("pp_", I(p.sw), cols(0, nq, Cols::kFill)));
}

}  // namespace kiln::loop_ir
