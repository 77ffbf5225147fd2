// The per-axis arithmetic of Resize/Upsample shared by the reference kernel
// (ops/nn_resize_ops.cc) and the loop-IR lowering (loop_ir/lower_resize.cc):
// how each axis is resized, the source coordinate of an output index, and the
// input taps (index, weight) it reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::ops {

// How each axis is resized (built by each user from the node's attributes and
// constant operands).
struct ResizePlan {
  std::vector<int64_t> out;
  std::vector<double> scale;
  std::vector<double> roi_start, roi_end;
  std::string mode = "nearest";         // nearest, linear, cubic
  std::string coord = "half_pixel";     // coordinate_transformation_mode
  std::string nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

// Input coordinate of output index o on an axis of `in` elements. Like the
// ONNX reference, the resized length is in * scale (not rounded), which
// matters for align_corners and tf_crop_and_resize when scales are given.
double ResizeSourceCoord(const ResizePlan& p, int axis, int64_t o, int64_t in);

struct ResizeTap {
  int64_t index;
  double weight;
};

// Taps of output index o (clamped indices; cubic weights renormalised with
// exclude_outside); empty means "outside the crop: the extrapolation value".
std::vector<ResizeTap> ResizeTaps(const ResizePlan& p, int axis, int64_t o, int64_t in);

}  // namespace kiln::ops
