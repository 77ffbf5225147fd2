// "conv" workloads on loop IR: one Conv (NCW, NCHW or NCDHW; groups incl.
// depthwise; strides, pads incl. auto_pad, dilations; optional bias) followed
// by a fused elementwise epilogue (Relu, Clip, HardSwish, Add of a residual,
// Mul by a scale, ...), plus the window geometry that pooling shares.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/ir/graph.h"

namespace kiln::loop_ir {

// A sliding window over an NCDHW input (NCHW: D = 1, NCW: D = H = 1),
// resolved from a Conv/MaxPool/AveragePool node's attributes and its static
// input/output shapes. Pads are front/top/left; the back/bottom/right pads
// are implied by the output extent (ceil_mode and asymmetric pads need no
// separate field).
struct WindowGeometry {
  bool one_d = false;    // the tensors are rank 3
  bool three_d = false;  // the tensors are rank 5
  int64_t n = 1, c = 1, d = 1, h = 1, w = 1;  // input
  int64_t od = 1, oh = 1, ow = 1;             // output spatial extents
  int64_t kd = 1, kh = 1, kw = 1;             // window
  int64_t sd = 1, sh = 1, sw = 1;             // strides
  int64_t dd = 1, dh = 1, dw = 1;             // dilations
  int64_t pad_front = 0, pad_top = 0, pad_left = 0;
  int64_t pad_back = 0, pad_bottom = 0, pad_right = 0;  // as the attributes give them
};

// Geometry of `node` (Conv, MaxPool or AveragePool) whose kernel extents are
// `kernel` (from the weights or kernel_shape). UNIMPLEMENTED naming the node
// for ranks other than 3 to 5, bad attributes or non-static shapes.
absl::StatusOr<WindowGeometry> ResolveWindow(const Node& node, const std::vector<int64_t>& kernel);

// Knobs: vw (output pixels per vector, along the output width), ur (vectors
// of output pixels per register block), kb (output channels per register
// block; divides the group's output channels), rows (output rows per task).
// A task is (image, group, [output depth slice,] block of `rows` output rows):
// it packs the input rows it reads (zero padding, width de-interleaved by the
// stride; for 3-D the depth slices of the window too) into a bounded stack
// buffer, then runs every output-channel block over them.
// pw=1 (only for 1x1, stride-1, unpadded convs; absent/0 is the above) is the
// pointwise variant: vw lanes over the flattened output pixels (H*W is
// contiguous in NCHW), ur vectors by kb output channels per register block,
// rows = pixel blocks (of vw*ur) per task; input and weights are read in place
// and the leftover pixels form one narrower, lane-masked block; ks (absent: 1)
// splits the output-channel blocks ks ways across tasks, for small maps with
// fewer pixel blocks than threads. The default schedule of a pointwise conv is
// a pw=1 point with the fewest ks that makes 4 tasks.
// dw=1 (only for 2-D depthwise convs: one input and one output channel per
// group) is the plane variant: a task is (image, `rows` channels); per channel
// the zero-padded input plane is copied into sh*sw stride-phase planes, so
// every tap reads at a constant offset from the output pixel's flattened
// position (row * padded width + column); vw lanes and ur vectors per register
// block run over those positions (the few past each row's end are computed
// and dropped), and the rows are stored from a result plane through the
// epilogue. The default schedule of a depthwise conv is a dw=1 point.
WorkloadLowering ConvLowering();

// "conv_transpose" workloads: one ConvTranspose (NCW, NCHW or NCDHW; group,
// strides, pads incl. auto_pad, output_padding, output_shape, dilations,
// optional bias) with a fused elementwise epilogue, in gather form: output
// pixel o reads input (o + pad - k*dil) / stride where that divides. Knobs:
// vw (phase columns per vector: output columns q*sw + rw of one width stride
// phase rw), ur (vectors per register block), kb (output channels per
// register block; divides the group's output channels), rows (output rows per
// task, a multiple of the height stride). A task is (image, group, block of
// s_d output depth slices, block of `rows` output rows): it packs the input
// it reads (zero padded) into a stack buffer; per width phase the taps are
// static, so the vector loop has no divisibility test.
WorkloadLowering ConvTransposeLowering();

}  // namespace kiln::loop_ir
