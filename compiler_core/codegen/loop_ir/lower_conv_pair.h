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
// (1..8), rb (output rows per band; absent or 0: the whole map). With rb a
// task is (image, band of rb output rows) instead, and runs every channel
// block over the band's input rows (padding rows as zeros), so an input
// too large to stay in L2 is read once, not once per channel block; the
// default takes bands for inputs over 512 KiB, and otherwise channel blocks
// that make at least 4 tasks where the channels allow. The expanded value must
// have no reader outside the workload.
#pragma once

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/codegen/loop_ir/lower_conv.h"

namespace kiln::loop_ir {

// A conv pair workload: the two convs, the shapes, the workload inputs of
// their operands (-1: no bias). Shared with the GPU lowering
// (loop_ir/gpu/lower_conv_pair.h).
struct ConvPairForm {
  const Node* pw = nullptr;                     // the 1x1 expansion
  const Node* dw = nullptr;                     // the depthwise conv
  int64_t n = 1, cin = 1, c = 1, h = 1, w = 1;  // x is [n, cin, h, w]; the expanded value [n, c, h, w]
  WindowGeometry geo;                           // the depthwise conv's
  int x_arg = -1, w1_arg = -1, b1_arg = -1, w2_arg = -1, b2_arg = -1;
  bool mid_flat = true;  // the mid chain's operands allow the flat (n, c, 0, p) index
};

// The "conv_pair" kind's match (UNIMPLEMENTED naming the node otherwise).
absl::StatusOr<ConvPairForm> AnalyzeConvPair(const Graph& workload);

WorkloadLowering ConvPairLowering();

}  // namespace kiln::loop_ir
