// The depthwise channel-vector stage (see depthwise_channels.h).
#include "compiler_core/codegen/loop_ir/depthwise_channels.h"

#include <algorithm>
#include <vector>

#include "base/status_macros.h"

namespace kiln::loop_ir {
namespace {

Expr I(int64_t v) { return IntImm(v); }

struct ChannelPlaneDims {
  int64_t hp = 1, wp = 1;  // the padded plane
  int64_t in_px = 1, out_px = 1;
};

ChannelPlaneDims PaddedDims(const WindowGeometry& s) {
  ChannelPlaneDims d;
  d.hp = std::max(s.pad_top + s.h, (s.oh - 1) * s.sh + (s.kh - 1) * s.dh + 1);
  d.wp = std::max(s.pad_left + s.w, (s.ow - 1) * s.sw + (s.kw - 1) * s.dw + 1);
  d.in_px = s.h * s.w;
  d.out_px = s.oh * s.ow;
  return d;
}

// A one-statement Block as its statement: a group of stores must be plain
// statements of one Block for LowerInterleavedStores.
Stmt Unwrap(Stmt st) {
  while (st->kind == StmtKind::kBlock && st->body.size() == 1) st = st->body[0];
  return st;
}

}  // namespace

int64_t DepthwiseChannelFloats(const WindowGeometry& s, int64_t lanes) {
  const ChannelPlaneDims d = PaddedDims(s);
  return lanes * (s.kh * s.kw + CeilDiv(d.in_px, lanes) * lanes + d.hp * d.wp + CeilDiv(d.out_px, lanes) * lanes);
}

absl::StatusOr<DepthwiseChannels> LowerDepthwiseChannels(const Graph& g, GraphExpr& ge, const Value* conv_out,
                                                         const AnchorOutputs& outs, const WindowGeometry& s,
                                                         const Buffer& x, const Buffer& w, const Buffer& bias, Expr n,
                                                         Expr c0, int64_t lanes, int64_t ur) {
  const ChannelPlaneDims d = PaddedDims(s);
  const int64_t L = lanes, taps = s.kh * s.kw;
  DepthwiseChannels out;
  out.wt = MakeBuffer("wt", {taps * L}, BufferRole::kTemp);
  out.xc = MakeBuffer("xc", {CeilDiv(d.in_px, L) * L * L}, BufferRole::kTemp);
  out.xt = MakeBuffer("xt", {d.hp * d.wp * L}, BufferRole::kTemp);
  out.yt = MakeBuffer("yt", {CeilDiv(d.out_px, L) * L * L}, BufferRole::kTemp);
  const Buffer &wt = out.wt, &xc = out.xc, &xt = out.xt, &yt = out.yt;
  out.zero = For("zi_", I(d.hp * d.wp), For("zv_", I(L), Store(xt, Add(Mul(Var("zi_"), I(L)), Var("zv_")), FloatImm(0)),
                                             ForKind::kVectorized));

  auto block = [&](bool tail) -> absl::StatusOr<Stmt> {
    // Channel c0 + j; in the tail block, past the last one, the last one.
    auto channel = [&](Expr j) { return tail ? Min(Add(c0, j), I(s.c - 1)) : Add(c0, j); };
    std::vector<Stmt> seq;
    Expr v = Var("v_");
    // The taps' weight vectors.
    {
      Expr t = Var("wt_");
      seq.push_back(For("wt_", I(taps),
                        For("v_", I(L), Store(wt, Add(Mul(t, I(L)), v), Load(w, Add(Mul(channel(v), I(taps)), t))),
                            ForKind::kVectorized)));
    }
    // The input plane transposed: lanes over L flattened pixels, one store
    // per channel at lane stride L (a transpose group).
    auto in_group = [&](Expr pb, bool guard) {
      Expr p = Add(Mul(pb, I(L)), v);
      std::vector<Stmt> stores;
      for (int64_t c = 0; c < L; ++c) {
        Expr src = Add(Mul(Add(Mul(n, I(s.c)), channel(I(c))), I(d.in_px)), p);
        Stmt st = Store(xc, Add(Mul(p, I(L)), I(c)), Load(x, src));
        stores.push_back(guard ? IfThen(Lt(p, I(d.in_px)), st) : st);
      }
      return For("v_", I(L), Block(stores), ForKind::kVectorized);
    };
    if (d.in_px / L > 0) seq.push_back(For("pi_", I(d.in_px / L), in_group(Var("pi_"), false)));
    if (d.in_px % L != 0) seq.push_back(in_group(I(d.in_px / L), true));
    // Into the padded plane's interior.
    {
      Expr ih = Var("ci_"), iw = Var("cj_");
      Expr dst = Add(Mul(Add(Mul(Add(ih, I(s.pad_top)), I(d.wp)), Add(iw, I(s.pad_left))), I(L)), v);
      Expr src = Add(Mul(Add(Mul(ih, I(s.w)), iw), I(L)), v);
      seq.push_back(For("ci_", I(s.h), For("cj_", I(s.w), For("v_", I(L), Store(xt, dst, Load(xc, src)),
                                                             ForKind::kVectorized))));
    }
    // Register blocks of px output pixels of row oh from column ow0:
    // acc[u*L + v], one aligned input vector and one multiply-add a tap.
    Expr oh = Var("oh_");
    auto pixels = [&](Expr ow0, int64_t px, const std::string& tag) {
      Buffer acc = MakeBuffer("acc" + tag, {px * L}, BufferRole::kTemp);
      Expr u = Var("u_"), kh = Var("kh_"), kw = Var("kw_");
      Expr ai = Add(Mul(u, I(L)), v);
      auto lanes_of = [&](Stmt body) {
        return For("v_", I(L), For("u_", I(px), std::move(body), ForKind::kUnrolled), ForKind::kVectorized);
      };
      Stmt init = lanes_of(Store(acc, ai, bias ? Load(bias, channel(v)) : FloatImm(0)));
      Expr r = Add(Mul(oh, I(s.sh)), Mul(kh, I(s.dh))), q = Add(Mul(Add(ow0, u), I(s.sw)), Mul(kw, I(s.dw)));
      Expr xi = Add(Mul(Add(Mul(r, I(d.wp)), q), I(L)), v);
      Expr wi = Add(Mul(Add(Mul(kh, I(s.kw)), kw), I(L)), v);
      Stmt upd = Store(acc, ai, Call("fma", {Load(xt, xi), Load(wt, wi), Load(acc, ai)}));
      const ForKind tk = taps <= 49 ? ForKind::kUnrolled : ForKind::kSerial;
      Stmt mac = For("kh_", I(s.kh), For("kw_", I(s.kw), lanes_of(upd), tk), tk);
      Stmt res = lanes_of(Store(yt, Add(Mul(Add(Add(Mul(oh, I(s.ow)), ow0), u), I(L)), v), Load(acc, ai)));
      return Allocate(acc, Block({init, mac, res}));
    };
    std::vector<Stmt> row;
    if (s.ow / ur > 0) row.push_back(For("ob_", I(s.ow / ur), pixels(Mul(Var("ob_"), I(ur)), ur, "")));
    if (s.ow % ur != 0) row.push_back(pixels(I(s.ow / ur * ur), s.ow % ur, "_t"));
    seq.push_back(For("oh_", I(s.oh), Block(row)));
    // The output planes: lanes over the channels, one store per pixel of a
    // run of L at lane stride OH*OW (a transpose group).
    auto out_group = [&](Expr pb, bool guard) -> absl::StatusOr<Stmt> {
      std::vector<Stmt> stores;
      for (int64_t i = 0; i < L; ++i) {
        Expr p = Add(Mul(pb, I(L)), I(i));
        std::vector<Expr> idx = {n, Add(c0, v), Div(p, I(s.ow)), Mod(p, I(s.ow))};
        Expr oi = Add(Add(Mul(Add(Mul(n, I(s.c)), Add(c0, v)), I(d.out_px)), Mul(pb, I(L))), I(i));
        ASSIGN_OR_RETURN(Stmt st, StoreThroughEpilogue(g, ge, conv_out, outs, Load(yt, Add(Mul(p, I(L)), v)), idx, oi));
        Expr cond = guard ? Lt(p, I(d.out_px)) : nullptr;
        if (tail) cond = cond ? And(cond, Lt(Add(c0, v), I(s.c))) : Lt(Add(c0, v), I(s.c));
        st = Unwrap(st);
        stores.push_back(cond ? IfThen(cond, st) : st);
      }
      return For("v_", I(L), Block(stores), ForKind::kVectorized);
    };
    if (d.out_px / L > 0) {
      ASSIGN_OR_RETURN(Stmt st, out_group(Var("po_"), false));
      seq.push_back(For("po_", I(d.out_px / L), st));
    }
    if (d.out_px % L != 0) {
      ASSIGN_OR_RETURN(Stmt st, out_group(I(d.out_px / L), true));
      seq.push_back(st);
    }
    return Block(seq);
  };
  ASSIGN_OR_RETURN(out.full, block(false));
  if (s.c % L != 0) {
    ASSIGN_OR_RETURN(out.tail, block(true));
  }
  return out;
}

}  // namespace kiln::loop_ir
