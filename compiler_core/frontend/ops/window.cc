// Sliding-window geometry (see window.h).
#include "compiler_core/frontend/ops/window.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/ops/op_helpers.h"

namespace kiln::ops {

std::string JoinInts(const std::vector<int64_t>& v) { return absl::StrCat("[", absl::StrJoin(v, ","), "]"); }

absl::Status ValidateAutoPad(const Node& node) {
  std::string p = node.GetString("auto_pad", "NOTSET");
  if (p != "NOTSET" && p != "SAME_UPPER" && p != "SAME_LOWER" && p != "VALID") {
    return absl::InvalidArgumentError(absl::StrCat(
        "attribute 'auto_pad' must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '", p, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> SpatialAttr(const Node& node, const char* name, int n, int64_t def,
                                                 int64_t min_value) {
  std::vector<int64_t> v = node.GetInts(name, std::vector<int64_t>(n, def));
  if (static_cast<int>(v.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' has ", v.size(), " entries, expected ",
                                                   n, " (one per spatial axis)"));
  }
  for (int64_t x : v) {
    if (x < min_value) {
      return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be >= ", min_value, ", got ",
                                                     JoinInts(v)));
    }
  }
  return v;
}

absl::StatusOr<Window> ForwardWindow(const Node& node, const TensorType& x, int x_input,
                                     std::vector<int64_t> kernel, bool use_dilations) {
  Window w;
  w.nsp = static_cast<int>(x.rank()) - 2;
  for (int i = 0; i < w.nsp; ++i) {
    const Dim& d = x.dims[i + 2];
    if (!d.is_static()) return SymbolicError(node, x_input, i + 2, d, "is a spatial dimension");
    w.in.push_back(d.value);
  }
  w.kernel = std::move(kernel);
  if (static_cast<int>(w.kernel.size()) != w.nsp) {
    return absl::InvalidArgumentError(absl::StrCat("kernel shape ", JoinInts(w.kernel), " does not match the ",
                                                   w.nsp, " spatial axes of ", x.ToString()));
  }
  for (int64_t k : w.kernel) {
    if (k < 1) return absl::InvalidArgumentError(absl::StrCat("kernel shape ", JoinInts(w.kernel), " is not positive"));
  }
  ASSIGN_OR_RETURN(w.stride, SpatialAttr(node, "strides", w.nsp, 1, 1));
  if (use_dilations) {
    ASSIGN_OR_RETURN(w.dilation, SpatialAttr(node, "dilations", w.nsp, 1, 1));
  } else {
    w.dilation.assign(w.nsp, 1);
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> pads, SpatialAttr(node, "pads", 2 * w.nsp, 0, 0));
  const std::string auto_pad = node.GetString("auto_pad", "NOTSET");
  const bool ceil_mode = node.GetInt("ceil_mode", 0) != 0;
  w.pad_begin.resize(w.nsp);
  w.pad_end.resize(w.nsp);
  w.out.resize(w.nsp);
  for (int i = 0; i < w.nsp; ++i) {
    const int64_t dk = (w.kernel[i] - 1) * w.dilation[i] + 1;
    const int64_t s = w.stride[i];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      w.out[i] = (w.in[i] + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (w.out[i] - 1) * s + dk - w.in[i]);
      w.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pad_end[i] = total - w.pad_begin[i];
      continue;
    }
    if (auto_pad == "NOTSET") {
      w.pad_begin[i] = pads[i];
      w.pad_end[i] = pads[i + w.nsp];
    }  // VALID: no padding
    const int64_t span = w.in[i] + w.pad_begin[i] + w.pad_end[i] - dk;
    if (span < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "window (kernel ", JoinInts(w.kernel), ", dilations ", JoinInts(w.dilation), ") is larger than the padded input ",
          x.ToString(), " with pads ", JoinInts(pads)));
    }
    w.out[i] = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    // A last window that would start inside the end padding is dropped.
    if (ceil_mode && (w.out[i] - 1) * s >= w.in[i] + w.pad_begin[i]) --w.out[i];
  }
  return w;
}

void ValidRange(int64_t offset, int64_t stride, int64_t limit, int64_t count, int64_t* lo, int64_t* hi) {
  int64_t a = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t last = limit - 1 - offset;
  int64_t b = last < 0 ? 0 : last / stride + 1;
  *lo = std::min(a, count);
  *hi = std::max(*lo, std::min(b, count));
}

std::vector<Dim> NcDims(const TensorType& x, const Dim& c, const std::vector<int64_t>& spatial) {
  std::vector<Dim> dims = {x.dims[0], c};
  for (int64_t s : spatial) dims.push_back(Dim::Static(s));
  return dims;
}

absl::Status RequireSpatialRank(const TensorType& x, const char* what) {
  if (x.rank() < 3 || x.rank() > 2 + kMaxSpatial) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be N x C x D1 [x D2 [x D3]] (rank 3 to 5), got ", x.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace kiln::ops
