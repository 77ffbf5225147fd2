// Sliding windows over the spatial axes of NC[D][H]W tensors (1 to 3 axes):
// the geometry Conv, ConvTranspose and the pools share (kernel, strides,
// dilations, pads, auto_pad, ceil_mode).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler_core/frontend/op_registry.h"

namespace kiln::ops {

inline constexpr int kMaxSpatial = 3;

// "[1,2,3]".
std::string JoinInts(const std::vector<int64_t>& v);

// auto_pad is NOTSET, SAME_UPPER, SAME_LOWER or VALID.
absl::Status ValidateAutoPad(const Node& node);

// The geometry of a sliding window over the spatial axes: per axis the input
// extent, kernel, stride, dilation, padding at both ends and output extent.
struct Window {
  int nsp = 0;
  std::vector<int64_t> in, kernel, stride, dilation, pad_begin, pad_end, out;

  // Pads everything to kMaxSpatial axes (leading extent-1 axes) for the kernels.
  Window To3D() const {
    Window w = *this;
    int extra = kMaxSpatial - nsp;
    auto grow = [extra](std::vector<int64_t>& v, int64_t fill) { v.insert(v.begin(), extra, fill); };
    grow(w.in, 1), grow(w.kernel, 1), grow(w.stride, 1), grow(w.dilation, 1);
    grow(w.pad_begin, 0), grow(w.pad_end, 0), grow(w.out, 1);
    w.nsp = kMaxSpatial;
    return w;
  }
};

// Reads and checks the per-axis int-list attribute `name` (default `def` per axis).
absl::StatusOr<std::vector<int64_t>> SpatialAttr(const Node& node, const char* name, int n, int64_t def,
                                                 int64_t min_value);

// Computes the forward (Conv / pooling) window. `kernel` comes from the weights
// or kernel_shape; ceil_mode only for pooling.
absl::StatusOr<Window> ForwardWindow(const Node& node, const TensorType& x, int x_input,
                                     std::vector<int64_t> kernel, bool use_dilations);

// Indices j in [0, count) with j * stride + offset in [0, limit).
void ValidRange(int64_t offset, int64_t stride, int64_t limit, int64_t count, int64_t* lo, int64_t* hi);

// [N, c, spatial...] with N from x.
std::vector<Dim> NcDims(const TensorType& x, const Dim& c, const std::vector<int64_t>& spatial);

// x is N x C x D1 [x D2 [x D3]].
absl::Status RequireSpatialRank(const TensorType& x, const char* what);

}  // namespace kiln::ops
