// Strided pointwise convolution as a subsample and a pointwise conv: a Conv
// with a 1x1 kernel, strides above 1 and no padding reads one input pixel in
// stride_h*stride_w, so
//
//   Conv(X, W, B, strides=s)  =  Conv(Slice(X, steps=s), W, B, strides=1)
//
// ResNet-v1 style networks (Keras ResNet50, torchvision's downsample
// shortcuts, RegNet) put their stride on such convs. Kiln's pointwise conv
// kernel vectorises over the flattened pixels of a map, which needs a unit
// stride; a strided conv fell to the direct kernel at about half the
// GFLOP/s. The subsample copies 1/(s_h*s_w) of the map once; two strided
// convs of one input (the shortcut and the main branch) share it after
// common-subexpression elimination. Grouped convs and every rank are
// handled (a 1x1 kernel's SAME padding is zero); a conv with explicit
// padding is left alone (its border outputs read zeros, not input).
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class StridedPointwiseConv : public GraphPass {
 public:
  std::string name() const override { return "strided_pointwise_conv"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
