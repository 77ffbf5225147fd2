// Pointwise convolution as a transposed MatMul, for small feature maps: a 1x1,
// stride-1, unpadded, ungrouped f32 Conv with constant weights whose maps have
// at most kMaxPointwisePixels pixels becomes
//
//   Gemm(Reshape(X, [C, P]), Wᵀ [C, K], bias, transA=1)      [P, K]
//   Reshape(Transpose(., [1, 0]), [1, K, H, W])
//
// for one image (Gemm reads Xᵀ through its strides), and for N images
//
//   MatMul(Transpose(Reshape(X, [N, C, P]), [0, 2, 1]), Wᵀ) + bias   [N, P, K]
//   Reshape(Transpose(., [0, 2, 1]), [N, K, H, W])
//
// and on 1x1 maps (squeeze-and-excitation) a fully connected layer without
// transposes: Reshape(Gemm(Reshape(X, [N, C]), Wᵀ, bias), [N, K, 1, 1]).
//
// In NCHW a conv's kernels vectorise over the pixels of a map; on maps of
// fewer pixels than a vector holds (4x4 and less) that leaves lanes idle.
// The MatMul vectorises over the output channels instead, with full lanes
// and a packed Wᵀ; the transposes move K*P floats, a few microseconds. From
// 5x5 maps on the conv's pointwise variant is as fast or faster (its last
// vector overlaps the one before, see lower_conv.cc): measured on
// keras_mobilenetv2 and Xception (5x5), ResNet-50, PoolFormer, MobileNetV3
// and EfficientNet-B0 (7x7). Runs once after the optimisation fixed point,
// with the Winograd rewrite (algorithm selection).
#pragma once

#include <cstdint>

#include "compiler_core/passes/pass.h"

namespace kiln {

// Largest map (pixels per image) rewritten, and the fewest output channels
// (a vector's worth) for which vectorising over them pays.
inline constexpr int64_t kMaxPointwisePixels = 16;
inline constexpr int64_t kMinPointwiseOutputChannels = 16;

class PointwiseConvAsMatMul : public GraphPass {
 public:
  std::string name() const override { return "pointwise_conv_as_matmul"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
