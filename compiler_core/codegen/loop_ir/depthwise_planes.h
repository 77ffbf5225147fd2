// The depthwise plane stage, shared by the conv lowering's plane variant
// (dw=1, lower_conv.h) and the conv pair (lower_conv_pair.h): one channel's
// zero-padded input plane split into sh*sw stride phases of pr rows by pq
// columns (padded row R = r*sh + phase row, column likewise), so that tap
// (kh, kw) of output pixel (oh, ow) reads phase plane ((kh*dh) % sh,
// (kw*dw) % sw) at flattened position (oh*pq + ow) + ((kh*dh) / sh)*pq +
// (kw*dw) / sw: a constant offset from the pixel's own position. np
// positions are computed (the pq - OW columns past each row's end are junk,
// never stored), a multiple of vw*ur; ps floats per phase plane cover the
// farthest tap of the last position.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_conv.h"

namespace kiln::loop_ir {

struct PlaneDims {
  int64_t phases = 1, pr = 1, pq = 1, np = 1, ps = 1;
};

PlaneDims PlaneDimsOf(const WindowGeometry& s, int64_t vw, int64_t ur);

// Floats of the stage's stack buffers (phase planes and the result plane).
int64_t PlaneFloats(const WindowGeometry& s, int64_t vw, int64_t ur);

// The stage for one channel `ch` of image `n`. The caller allocates xp and
// yp around its task, runs `zero` once per task (the padding is never
// written again), then `channel` per channel: it copies the channel's input
// rows into the phase planes' interiors (read(ih, iw): the input at a row
// and column inside the map), accumulates every register block of vw*ur
// positions over the taps (weights w[ch, 0, kh, kw], bias[ch] when given),
// keeps the sums in yp and stores each output row from it through the
// epilogue of `conv_out`. The geometry may be a band of the map's rows: its
// output row `oh` is then row oh0 + oh of `conv_out` (oh0 defaults to 0).
struct DepthwisePlanes {
  Buffer xp, yp;
  Stmt zero, channel;
};
absl::StatusOr<DepthwisePlanes> LowerDepthwisePlanes(const Graph& g, GraphExpr& ge, const Value* conv_out,
                                                     const AnchorOutputs& outs, const WindowGeometry& s,
                                                     const Buffer& w, const Buffer& bias, Expr n, Expr ch, int64_t vw,
                                                     int64_t ur, const std::function<Expr(Expr ih, Expr iw)>& read,
                                                     Expr oh0 = nullptr);

}  // namespace kiln::loop_ir
