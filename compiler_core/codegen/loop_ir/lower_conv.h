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

// A Conv workload: the Conv node, its window, K output channels in `group`
// groups of cg input and kg output channels, and the workload inputs that
// hold x, the weights and the bias (-1: none). Shared with the GPU lowering
// (loop_ir/gpu/lower_conv.h).
struct ConvForm {
  const Node* conv = nullptr;
  WindowGeometry geo;
  int64_t k = 1, group = 1, cg = 1, kg = 1;
  int x_arg = -1, w_arg = -1, b_arg = -1;
  // kiln.BlockedConv: the weights are Wb [K/B, C/group, kh, kw, B] with B =
  // weight_block (ops/conv_blocking.h); 0: a Conv's W [K, C/group, k...].
  int64_t weight_block = 0;
  // A pointwise BlockedConv's weights chunked by input channel: Wb [C/L, K/B,
  // L, 1, 1, B] with L = weight_chunk; 0: not chunked.
  int64_t weight_chunk = 0;
};

// The "conv" kind's match: one Conv (or kiln.BlockedConv) and an elementwise
// epilogue of its shape.
// UNIMPLEMENTED naming the node otherwise.
absl::StatusOr<ConvForm> AnalyzeConv(const Graph& workload);

// True when the epilogue may index every value at (n, k, 0, p) instead of
// (n, k, p / ow, p % ow) (2-D): each value's two trailing dims are both the
// output's spatial extents or both broadcast (1), so its row-major offset is p.
bool FlatSpatialIndexOk(const Graph& workload, const ConvForm& f);

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
// rows = pixel blocks (of vw*ur) per task; the weights are read in place, the
// input too unless the task packs it (on large maps, or where it runs
// reduction chunks: kc), and the leftover pixels form one narrower block; ks
// (absent: 1) splits the output-channel blocks ks ways across tasks, for
// small maps with fewer pixel blocks than threads. The default schedule of a
// pointwise conv is a pw=1 point with the fewest ks that makes 4 tasks.
// dw=1 (only for 2-D depthwise convs: one input and one output channel per
// group) is the plane variant: a task is (image, `rows` channels); per channel
// the zero-padded input plane is copied into sh*sw stride-phase planes, so
// every tap reads at a constant offset from the output pixel's flattened
// position (row * padded width + column); vw lanes and ur vectors per register
// block run over those positions (the few past each row's end are computed
// and dropped), and the rows are stored from a result plane through the
// epilogue. The default schedule of a depthwise conv is a dw=1 point.
WorkloadLowering ConvLowering();

// A ConvTranspose with its geometry on three spatial axes (D, H, W; missing
// leading axes have extent 1). pb: the begin pads as the reference derives
// them (explicit pads, auto_pad or output_shape). Output o of an axis takes
// tap t of input i = (o + pb - t*d) / s where that divides and 0 <= i < in.
struct ConvTransposeForm {
  const Node* node = nullptr;
  int nsp = 2;
  int64_t n = 1, c = 1, m = 1, group = 1, cg = 1, mg = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1};
  int64_t pb[3] = {0, 0, 0};
  int x_arg = -1, w_arg = -1, b_arg = -1;
  // For output o = blk*s + r of axis a (D or H), kernel tap kk reads input
  // blk + base[a] + (r + (k-1-kk)*d + c0[a]) / s when that numerator is a
  // multiple of s (numerator >= 0 by construction).
  int64_t base[3] = {0, 0, 0}, c0[3] = {0, 0, 0};
  // Width: output column q*sw + rw reads input column q + (rw + pw - kw*dw)/sw;
  // pack column = input column + left.
  int64_t left = 0, off_max = 0;
};

// The "conv_transpose" kind's match (UNIMPLEMENTED naming the node otherwise).
absl::StatusOr<ConvTransposeForm> AnalyzeConvTranspose(const Graph& workload);

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
