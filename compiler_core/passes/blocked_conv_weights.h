// Output-channel-blocked weights for the convolutions that run with output
// channels in the vector lanes: a 2-D f32 Conv with constant weights, a
// kernel larger than 1x1, output channels per group a multiple of
// ops::kConvWeightBlock (16), and a geometry for which
// ops::PrefersChannelVectors holds with blocked weights, becomes
//
//   Y = kiln.BlockedConv(X, Wb, bias)      Wb = W blocked by 16 output channels
//                                          (ops/conv_blocking.h; a constant)
//
// with the Conv's attributes. The CPU's channel-vector kernel then reads its
// weight vectors in place instead of packing them from W in every run (a
// transposing gather of every weight once per task), and its register blocks
// are no longer bounded by the pack: HRNet's 3x3 stride-2 convs at 1 thread,
// 512 -> 1024 onto 7x7 4.29 -> 2.28 ms, 256 -> 512 onto 14x14 2.52 -> 2.01,
// 128 -> 256 onto 28x28 2.22 -> 1.93 (ORT 2.12, 1.86, 1.76); maps too small
// to pay a per-run pack back take the kernel too (DLA-34's 512 -> 512 onto
// 5x5 1.43 -> 0.49 ms, ORT 0.48). A blocked conv has
// only the channel-vector schedules; the convs this pass leaves (1x1,
// depthwise, maps whose rows fill the pixel vectors, short reductions) keep
// every variant. Runs once after the optimisation fixed point, after the
// Winograd and pointwise rewrites (algorithm selection: CPU targets only).
//
// With `pointwise`, a pointwise conv (1x1, unit strides, no padding, 2-D,
// one group) whose output channels are a multiple of
// ops::PointwiseWeightBlock (4, else 6, 5 or 3) becomes a kiln.BlockedConv
// too, its weights blocked by that many output channels in chunks of
// ops::PointwiseWeightChunk input channels (BlockPointwiseWeights) for the
// pointwise kernel (SSDlite's 672 -> 546 head onto 20x20, Zen 3: 3.33 ->
// 3.04 ms, 480 -> 546 onto 10x10 0.67 -> 0.57), which then has
// only its pointwise schedules, each with that chunk or none. Off where
// conv pairs may take the conv (a pair's expansion must be a Conv): the
// driver turns it on for the CPUs whose conv pairs are off.
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class BlockedConvWeights : public GraphPass {
 public:
  explicit BlockedConvWeights(bool pointwise = false) : pointwise_(pointwise) {}
  std::string name() const override { return "blocked_conv_weights"; }
  absl::StatusOr<bool> Run(Graph& graph) override;

 private:
  bool pointwise_;
};

}  // namespace kiln
