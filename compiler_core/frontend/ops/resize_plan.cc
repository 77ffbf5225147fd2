// Resize's per-axis arithmetic: the plan, source coordinates and taps.
#include "compiler_core/frontend/ops/resize_plan.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/ops/op_helpers.h"

namespace kiln::ops {
namespace {

// The f32 elements of constant input i; empty when the input is omitted or empty.
absl::StatusOr<std::vector<double>> ConstantFloats(const Node& node, int i) {
  Value* v = node.input(i);
  if (v == nullptr) return std::vector<double>{};
  if (!v->is_constant()) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " '", v->name(),
                                                   "' must be a constant (initializer): the output shape depends on it"));
  }
  const Tensor& t = v->constant();
  if (t.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " '", v->name(), "' must be f32, got ",
                                                   DTypeName(t.dtype())));
  }
  return std::vector<double>(t.data<float>(), t.data<float>() + t.num_elements());
}

}  // namespace

absl::StatusOr<ResizePlan> MakeResizePlan(const Node& node, const std::vector<Dim>& dims, bool is_upsample) {
  ResizePlan p;
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  // Upsample and Resize-10 are Op(X, scales); Resize-11+ always has roi/scales slots.
  bool legacy = is_upsample || (node.num_inputs() == 2 && node.input(1) != nullptr);
  if (is_upsample && node.num_inputs() == 1) {
    if (!node.has_attr("scales")) return absl::InvalidArgumentError("scales are missing (attribute or input 1)");
    for (float f : node.GetFloats("scales", {})) scales.push_back(f);
  } else if (legacy) {
    ASSIGN_OR_RETURN(scales, ConstantFloats(node, 1));
  } else {
    ASSIGN_OR_RETURN(p.roi_start, ConstantFloats(node, 1));
    ASSIGN_OR_RETURN(scales, ConstantFloats(node, 2));
    if (node.input(3) != nullptr) {
      ASSIGN_OR_RETURN(sizes, ConstantIntInput(node, 3));
    }
  }
  p.mode = node.GetString("mode", "nearest");
  if (p.mode == "bilinear") p.mode = "linear";
  if (legacy) {
    // As ONNX's Resize 10->11 version converter: asymmetric, nearest = floor.
    p.coord = "asymmetric";
    p.nearest = "floor";
  } else {
    p.coord = node.GetString("coordinate_transformation_mode", "half_pixel");
    p.nearest = node.GetString("nearest_mode", "round_prefer_floor");
    p.cubic_a = node.GetFloat("cubic_coeff_a", -0.75f);
    p.exclude_outside = node.GetInt("exclude_outside", 0) != 0;
    p.extrapolation = node.GetFloat("extrapolation_value", 0.0f);
  }
  if (!sizes.empty() && !scales.empty()) {
    return absl::InvalidArgumentError("only one of 'scales' and 'sizes' may be given");
  }
  if (sizes.empty() && scales.empty()) return absl::InvalidArgumentError("one of 'scales' and 'sizes' is required");
  const size_t n = sizes.empty() ? scales.size() : sizes.size();
  if (static_cast<int64_t>(n) != rank) {
    return absl::InvalidArgumentError(absl::StrCat(sizes.empty() ? "scales" : "sizes", " have ", n,
                                                   " entries for an input of rank ", rank));
  }
  if (p.coord == "tf_crop_and_resize") {
    if (static_cast<int64_t>(p.roi_start.size()) != 2 * rank) {
      return absl::InvalidArgumentError(absl::StrCat("roi must have ", 2 * rank, " entries for tf_crop_and_resize, got ",
                                                     p.roi_start.size()));
    }
    p.roi_end.assign(p.roi_start.begin() + rank, p.roi_start.end());
    p.roi_start.resize(rank);
  } else {
    p.roi_start.assign(rank, 0.0);
    p.roi_end.assign(rank, 1.0);
  }
  p.out.resize(rank);
  p.scale.resize(rank);
  for (int64_t i = 0; i < rank; ++i) {
    const Dim& d = dims[i];
    const bool identity = sizes.empty() ? scales[i] == 1.0 && p.coord != "tf_crop_and_resize"
                                        : d.is_static() && sizes[i] == d.value;
    if (identity) {
      p.out[i] = d.is_static() ? d.value : -1;
      p.scale[i] = 1.0;
      continue;
    }
    if (!d.is_static()) return SymbolicError(node, 0, i, d, "is resized");
    if (sizes.empty()) {
      if (!(scales[i] > 0)) {
        return absl::InvalidArgumentError(absl::StrCat("scales must be positive, got [", absl::StrJoin(scales, ","), "]"));
      }
      p.scale[i] = scales[i];
      p.out[i] = static_cast<int64_t>(
          std::floor(static_cast<double>(d.value) * (p.roi_end[i] - p.roi_start[i]) * scales[i] + 1e-9));
    } else {
      if (sizes[i] < 0) return absl::InvalidArgumentError("sizes must be non-negative");
      p.out[i] = sizes[i];
      p.scale[i] = d.value > 0 ? static_cast<double>(sizes[i]) / d.value : 1.0;
    }
  }
  return p;
}

double ResizeSourceCoord(const ResizePlan& p, int axis, int64_t o, int64_t in) {
  const double s = p.scale[axis];
  const double out = static_cast<double>(in) * s;
  const std::string& c = p.coord;
  if (c == "half_pixel") return (o + 0.5) / s - 0.5;
  if (c == "pytorch_half_pixel") return out > 1 ? (o + 0.5) / s - 0.5 : 0.0;
  if (c == "align_corners") return out == 1 ? 0.0 : static_cast<double>(o) * (in - 1) / (out - 1);
  if (c == "asymmetric") return o / s;
  if (c == "tf_half_pixel_for_nn") return (o + 0.5) / s;
  // tf_crop_and_resize
  const double a = p.roi_start[axis], b = p.roi_end[axis];
  return out > 1 ? a * (in - 1) + o * (b - a) * (in - 1) / (out - 1) : 0.5 * (a + b) * (in - 1);
}

std::vector<ResizeTap> ResizeTaps(const ResizePlan& p, int axis, int64_t o, int64_t in) {
  const double x = ResizeSourceCoord(p, axis, o, in);
  if (p.coord == "tf_crop_and_resize" && (x < 0 || x > in - 1)) return {};
  auto clamp = [in](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
  if (p.mode == "nearest") {
    double f = std::floor(x);
    int64_t i;
    if (p.nearest == "floor") i = static_cast<int64_t>(f);
    else if (p.nearest == "ceil") i = static_cast<int64_t>(std::ceil(x));
    else if (x - f == 0.5) i = static_cast<int64_t>(p.nearest == "round_prefer_ceil" ? f + 1 : f);
    else i = static_cast<int64_t>(std::round(x));
    return {{clamp(i), 1.0}};
  }
  const int64_t x0 = static_cast<int64_t>(std::floor(x));
  const double t = x - static_cast<double>(x0);
  if (p.mode == "linear") return {{clamp(x0), 1.0 - t}, {clamp(x0 + 1), t}};
  const double A = p.cubic_a;
  const double w[4] = {((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A,
                       ((A + 2) * t - (A + 3)) * t * t + 1,
                       ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1,
                       ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A};
  std::vector<ResizeTap> taps;
  double total = 0;
  for (int k = 0; k < 4; ++k) {
    int64_t i = x0 - 1 + k;
    if (p.exclude_outside && (i < 0 || i >= in)) continue;
    taps.push_back({clamp(i), w[k]});
    total += w[k];
  }
  if (p.exclude_outside && total != 0) {
    for (ResizeTap& tp : taps) tp.weight /= total;
  }
  return taps;
}

}  // namespace kiln::ops
