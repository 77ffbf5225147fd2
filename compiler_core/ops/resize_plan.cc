// Resize's per-axis arithmetic: source coordinates and taps.
#include "compiler_core/ops/resize_plan.h"

#include <algorithm>
#include <cmath>

namespace kiln::ops {

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
