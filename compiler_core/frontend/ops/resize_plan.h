// The per-axis arithmetic of Resize/Upsample shared by the reference kernel
// and shape function (ops/resize_ops.cc) and the loop-IR lowering
// (loop_ir/lower_resize.cc): how each axis is resized, the source coordinate
// of an output index, and the input taps (index, weight) it reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"

namespace kiln::ops {

// How each axis is resized.
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

// The plan of a Resize (opset 10 and 11+ forms) or Upsample node from its
// attributes and constant roi/scales/sizes, for input extents `dims` (symbols
// allowed on axes that are not resized). INVALID_ARGUMENT naming what is wrong.
absl::StatusOr<ResizePlan> MakeResizePlan(const Node& node, const std::vector<Dim>& dims, bool is_upsample);

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
