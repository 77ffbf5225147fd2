// The depthwise plane stage (see depthwise_planes.h).
#include "compiler_core/codegen/loop_ir/depthwise_planes.h"

#include <algorithm>
#include <vector>

#include "base/status_macros.h"

namespace kiln::loop_ir {
namespace {

Expr I(int64_t v) { return IntImm(v); }

}  // namespace

PlaneDims PlaneDimsOf(const WindowGeometry& s, int64_t vw, int64_t ur) {
  const int64_t amax = ((s.kh - 1) * s.dh) / s.sh, bmax = ((s.kw - 1) * s.dw) / s.sw;
  PlaneDims d;
  d.phases = s.sh * s.sw;
  d.pr = s.oh + amax;
  d.pq = s.ow + bmax;
  d.np = CeilDiv(s.oh * d.pq, vw * ur) * vw * ur;
  d.ps = CeilDiv(std::max(d.np + amax * d.pq + bmax, d.pr * d.pq), vw) * vw;
  return d;
}

int64_t PlaneFloats(const WindowGeometry& s, int64_t vw, int64_t ur) {
  const PlaneDims d = PlaneDimsOf(s, vw, ur);
  return d.phases * d.ps + d.np;
}

absl::StatusOr<DepthwisePlanes> LowerDepthwisePlanes(const Graph& g, GraphExpr& ge, const Value* conv_out,
                                                     const AnchorOutputs& outs, const WindowGeometry& s,
                                                     const Buffer& w, const Buffer& bias, Expr n, Expr ch, int64_t vw,
                                                     int64_t ur, const std::function<Expr(Expr ih, Expr iw)>& read,
                                                     Expr oh0) {
  const PlaneDims d = PlaneDimsOf(s, vw, ur);
  const int64_t bw = vw * ur;
  DepthwisePlanes out;
  out.xp = MakeBuffer("xp", {d.phases * d.ps}, BufferRole::kTemp);
  out.yp = MakeBuffer("yp", {d.np}, BufferRole::kTemp);
  const Buffer &xp = out.xp, &yp = out.yp;
  out.zero =
      For("zi_", I(d.phases * d.ps / vw),
          For("zv_", I(vw), Store(xp, Add(Mul(Var("zi_"), I(vw)), Var("zv_")), FloatImm(0)), ForKind::kVectorized));

  // The channel's rows into every phase plane: padded row r*sh + phr is input
  // row ih = r*sh + phr - pt; padded column q*sw + phq is input column
  // q*sw + phq - pl, inside for q in [qlo, qhi).
  std::vector<Stmt> channel;
  for (int64_t phr = 0; phr < s.sh; ++phr) {
    for (int64_t phq = 0; phq < s.sw; ++phq) {
      const int64_t qlo = std::max<int64_t>(0, CeilDiv(s.pad_left - phq, s.sw));
      const int64_t qhi = std::min(d.pq, CeilDiv(s.w + s.pad_left - phq, s.sw));
      if (qhi <= qlo) continue;
      const int64_t nq = qhi - qlo;
      Expr r = Var("cr_"), q = Add(I(qlo), Add(Mul(Var("cq_"), I(vw)), Var("cv_")));
      Expr ih = Sub(Add(Mul(r, I(s.sh)), I(phr)), I(s.pad_top));
      Expr iw = Sub(Add(Mul(q, I(s.sw)), I(phq)), I(s.pad_left));
      Expr pi = Add(Add(I((phr * s.sw + phq) * d.ps), Mul(r, I(d.pq))), q);
      Stmt copy = Store(xp, pi, read(ih, iw));
      if (nq % vw != 0) copy = IfThen(Lt(q, I(qhi)), copy);
      copy = For("cq_", I(CeilDiv(nq, vw)), For("cv_", I(vw), copy, ForKind::kVectorized));
      channel.push_back(For("cr_", I(d.pr), IfThen(And(Ge(ih, I(0)), Lt(ih, I(s.h))), copy)));
    }
  }

  // Register blocks of bw flattened positions: acc[u*vw + v] for position
  // pb*bw + u*vw + v, over every tap.
  {
    Buffer acc = MakeBuffer("acc", {bw}, BufferRole::kTemp);
    Expr u = Var("u_"), v = Var("v_"), kh = Var("kh_"), kw = Var("kw_");
    Expr ai = Add(Mul(u, I(vw)), v);
    Expr pos = Add(Mul(Var("pb_"), I(bw)), ai);
    auto lanes = [&](Stmt body) {
      return For("v_", I(vw), For("u_", I(ur), std::move(body), ForKind::kUnrolled), ForKind::kVectorized);
    };
    Stmt init = lanes(Store(acc, ai, bias ? Load(bias, ch) : FloatImm(0)));
    Expr th = Mul(kh, I(s.dh)), tw = Mul(kw, I(s.dw));
    Expr phase = Add(Mul(Mod(th, I(s.sh)), I(s.sw)), Mod(tw, I(s.sw)));
    Expr off = Add(Add(Mul(phase, I(d.ps)), Mul(Div(th, I(s.sh)), I(d.pq))), Div(tw, I(s.sw)));
    Expr wi = Add(Mul(Add(Mul(ch, I(s.kh)), kh), I(s.kw)), kw);
    Stmt upd = Store(acc, ai, Call("fma", {Load(xp, Add(off, pos)), Load(w, wi), Load(acc, ai)}));
    const ForKind tk = s.kh * s.kw <= 49 ? ForKind::kUnrolled : ForKind::kSerial;
    Stmt taps = For("kh_", I(s.kh), For("kw_", I(s.kw), lanes(upd), tk), tk);
    Stmt res = lanes(Store(yp, pos, Load(acc, ai)));
    channel.push_back(For("pb_", I(d.np / bw), Allocate(acc, Block({init, taps, res}))));
  }

  // Output rows from the result plane, through the epilogue.
  {
    Expr oh = Var("so_"), ow = Add(Mul(Var("sq_"), I(vw)), Var("sv_"));
    std::vector<Expr> out_idx = {n, ch, oh0 ? Add(oh0, oh) : oh, ow};
    Expr oi = FlatIndex(DimsOf(conv_out), out_idx);
    ASSIGN_OR_RETURN(Stmt body,
                     StoreThroughEpilogue(g, ge, conv_out, outs, Load(yp, Add(Mul(oh, I(d.pq)), ow)), out_idx, oi));
    if (s.ow % vw != 0) body = IfThen(Lt(ow, I(s.ow)), body);
    channel.push_back(
        For("so_", I(s.oh), For("sq_", I(CeilDiv(s.ow, vw)), For("sv_", I(vw), body, ForKind::kVectorized))));
  }
  out.channel = Block(channel);
  return out;
}

}  // namespace kiln::loop_ir
