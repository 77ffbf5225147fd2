// "conv_pair" workloads: the expansion and the depthwise conv of an inverted
// residual block (MobileNet, EfficientNet) fused into one kernel, so the
// expanded tensor (often several MB: 64 x 112 x 112 floats in MobileNetV3)
// never goes to memory:
//
//   x -> Conv 1x1 (stride 1, unpadded, one group) -> elementwise (Relu,
//   HardSwish, SiLU, ...) -> depthwise Conv kh x kw (any stride, pads,
//   dilation) -> elementwise epilogue -> outputs
//
// A task is (image, block of kb expanded channels). It computes the block's
// expanded planes into a stack buffer (pointwise register blocks of kb
// channels by pu vectors of vw pixels, the input read in place), then per
// channel copies its plane into zero-padded stride-phase planes and runs the
// depthwise taps over them as the depthwise plane variant does
// (lower_conv.h): vw lanes, ur vectors per register block, rows stored
// through the epilogue. Knobs: vw, kb (divides the channels), pu (1..4), ur
// (1..8). The expanded value must have no reader outside the workload.
#pragma once

#include "compiler_core/codegen/loop_ir/lower.h"

namespace kiln::loop_ir {

WorkloadLowering ConvPairLowering();

}  // namespace kiln::loop_ir
