// The depthwise channel-vector stage, the conv lowering's dw=3 variant
// (lower_conv.h): `lanes` consecutive channels of one image in the vector
// lanes, as in a blocked (NCHWc) layout, for the small maps of mobile nets'
// late stages. There the plane variant (depthwise_planes.h) computes 80
// positions for a 7x7 map's 49 and nearly every one of its tap loads splits
// a cache line; here every tap is one aligned vector load and one
// multiply-add for `lanes` useful outputs, and the price is two transposes
// per element (in and out of the NCHW planes), done by shuffles: the stores
// of a lane group are the transposes that LowerInterleavedStores
// (llvm_lowering.cc) writes as shuffle networks and contiguous vectors.
//
// Per block of `lanes` channels from c0 (buffers on the task's stack):
//   wt[t*L + v]        the weights of tap t (gathered once per block)
//   xc[p*L + v]        the input plane, flattened pixel p = ih*W + iw, transposed
//   xt[(r*Wp + q)*L+v] the same, zero-padded: r = ih + pad_top, q = iw + pad_left
//   yt[p*L + v]        the conv's sums, flattened output pixel p = oh*OW + ow
// then each output plane's runs of L pixels through the epilogue.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_conv.h"

namespace kiln::loop_ir {

// Floats of the stage's stack buffers at `lanes` channels a block.
int64_t DepthwiseChannelFloats(const WindowGeometry& s, int64_t lanes);

// The stage for image `n`. The caller allocates the four buffers around its
// task and runs `zero` once per task (xt's padding is never written again),
// then, per block of `lanes` channels from c0 (a multiple of lanes), `full`
// where the block lies inside the s.c channels, else `tail` (null when
// lanes divide s.c): channels past the last are read as the last one and
// never stored. `ur` output pixels (of one row) a register block. The
// weights are w[c, 0, kh, kw], the bias bias[c] when given.
struct DepthwiseChannels {
  Buffer wt, xc, xt, yt;
  Stmt zero, full, tail;
};
absl::StatusOr<DepthwiseChannels> LowerDepthwiseChannels(const Graph& g, GraphExpr& ge, const Value* conv_out,
                                                         const AnchorOutputs& outs, const WindowGeometry& s,
                                                         const Buffer& x, const Buffer& w, const Buffer& bias, Expr n,
                                                         Expr c0, int64_t lanes, int64_t ur);

}  // namespace kiln::loop_ir
