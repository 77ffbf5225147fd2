// A conv whose taps mostly read padding as a sum of pointwise convs, one per
// tap over the outputs where that tap reads input. DeepLab-v3's ASPP applies
// 3x3 convs of dilation 12 (and 24, 36; algebraic simplification already
// crops taps that never read input) with as much padding to a 16x16 map of
// 960 channels: each side tap reads input for 4 of 16 rows or columns, so
// three quarters of the conv's products are with padded zeros. The direct
// kernel skips tap rows in the padding but not columns (a row's pixels are
// one vector). For a 2-D f32 Conv with constant weights, group 1, stride 1,
// where the taps' live outputs are at most half of kernel x output:
//
//   Y = sum over taps t of Pad(Conv1x1(Slice(X, R_t + offset_t), W[:, :, t]), R_t) + bias
//
// R_t the rectangle of outputs whose input tap t lies inside X. The 1x1
// convs take the pointwise kernels (or MatMuls, pointwise_conv_as_matmul),
// the tap covering every output carries the bias, and the sum is one
// elementwise group. Exact in real arithmetic; in floating point the sum's
// order differs from a conv's (per tap rather than per input channel), well
// within the tolerance of any reordering of the reduction. Algorithm
// selection (CPU targets), before the pointwise rewrites.
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class LiveTapRegions : public GraphPass {
 public:
  std::string name() const override { return "live_tap_regions"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
