// Neural-network operators: convolution (Conv, ConvTranspose) and pooling
// (MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool) over NC[D][H]W
// tensors with 1 to 3 spatial axes. Normalisation, Softmax and Resize live in
// nn_norm_ops.cc and nn_resize_ops.cc and are registered from here.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/frontend/ops/op_families.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/shape_inference.h"
#include "base/status_macros.h"

namespace kiln::ops {

// Defined in nn_norm_ops.cc and nn_resize_ops.cc (part of the NN family).
void RegisterNnNormOps(std::vector<OpDef>* defs);
void RegisterNnResizeOps(std::vector<OpDef>* defs);

namespace {

constexpr int kMaxSpatial = 3;

std::string JoinInts(const std::vector<int64_t>& v) { return absl::StrCat("[", absl::StrJoin(v, ","), "]"); }

absl::Status ValidateAutoPad(const Node& node) {
  std::string p = node.GetString("auto_pad", "NOTSET");
  if (p != "NOTSET" && p != "SAME_UPPER" && p != "SAME_LOWER" && p != "VALID") {
    return absl::InvalidArgumentError(absl::StrCat(
        "attribute 'auto_pad' must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '", p, "'"));
  }
  return absl::OkStatus();
}

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

// Computes the forward (Conv / pooling) window. `kernel` comes from the weights
// or kernel_shape; ceil_mode only for pooling.
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

// Indices j in [0, count) with j * stride + offset in [0, limit).
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

// ---------------------------------------------------------------------------
// Conv: Y[n, m] = B[m] + sum over the group's channels and the window of
// X * W, W being [M, C/group, k...].

const std::vector<AttrSpec> kConvAttrs = {{"auto_pad", AttrKind::kString}, {"dilations", AttrKind::kInts},
                                         {"group", AttrKind::kInt},       {"kernel_shape", AttrKind::kInts},
                                         {"pads", AttrKind::kInts},       {"strides", AttrKind::kInts}};

absl::Status ValidateConv(const Node& node) {
  RETURN_IF_ERROR(ValidateAutoPad(node));
  if (node.GetInt("group", 1) < 1) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'group' must be >= 1, got ", node.GetInt("group", 1)));
  }
  return absl::OkStatus();
}

// The kernel's spatial extents from W (checked against kernel_shape when given).
absl::StatusOr<std::vector<int64_t>> KernelFromWeights(const Node& node, const TensorType& w) {
  std::vector<int64_t> k;
  for (int i = 2; i < w.rank(); ++i) {
    if (!w.dims[i].is_static()) return SymbolicError(node, 1, i, w.dims[i], "is a kernel dimension");
    k.push_back(w.dims[i].value);
  }
  if (node.has_attr("kernel_shape") && node.GetInts("kernel_shape", {}) != k) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'kernel_shape' ",
                                                   JoinInts(node.GetInts("kernel_shape", {})),
                                                   " does not match the weights ", w.ToString()));
  }
  return k;
}

absl::StatusOr<std::vector<TensorType>> InferConv(const Node& node, const InputTypes& in) {
  RETURN_IF_ERROR(RequireF32(node, in));
  const TensorType& x = *in[0];
  const TensorType& w = *in[1];
  RETURN_IF_ERROR(RequireSpatialRank(x, "input X"));
  if (w.rank() != x.rank()) {
    return absl::InvalidArgumentError(absl::StrCat("weights ", w.ToString(), " must have the rank of X ", x.ToString()));
  }
  const int64_t group = node.GetInt("group", 1);
  const Dim& c = x.dims[1];
  const Dim& m = w.dims[0];
  const Dim& cg = w.dims[1];
  if (c.is_static() && cg.is_static() && c.value != cg.value * group) {
    return absl::InvalidArgumentError(absl::StrCat("input channels of X ", x.ToString(), " != weights ", w.ToString(),
                                                   " dimension 1 x group ", group));
  }
  if (!c.is_static()) return SymbolicError(node, 0, 1, c, "is the channel dimension");
  if (m.is_static() && m.value % group != 0) {
    return absl::InvalidArgumentError(absl::StrCat("output channels of weights ", w.ToString(),
                                                   " are not divisible by group ", group));
  }
  if (const TensorType* b = in.size() > 2 ? in[2] : nullptr) {
    if (b->rank() != 1 || !SameDim(b->dims[0], m)) {
      return absl::InvalidArgumentError(absl::StrCat("bias ", b->ToString(), " must be [M] for weights ", w.ToString()));
    }
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> kernel, KernelFromWeights(node, w));
  ASSIGN_OR_RETURN(Window win, ForwardWindow(node, x, 0, kernel, true));
  return std::vector<TensorType>{MakeType(DType::kFloat32, NcDims(x, m, win.out))};
}

absl::Status EvalConv(const Node& node, const InputTensors& in, std::vector<Tensor>& out) {
  const TensorType xt = TensorType::Static(in[0]->dtype(), in[0]->dims());
  std::vector<int64_t> kernel(in[1]->dims().begin() + 2, in[1]->dims().end());
  ASSIGN_OR_RETURN(Window win0, ForwardWindow(node, xt, 0, kernel, true));
  const Window w = win0.To3D();
  const int64_t n_batch = in[0]->dims()[0], c_in = in[0]->dims()[1], m_out = in[1]->dims()[0];
  const int64_t group = node.GetInt("group", 1);
  const int64_t cg = c_in / group, mg = m_out / group;
  const int64_t in_plane = w.in[0] * w.in[1] * w.in[2];
  const int64_t out_plane = w.out[0] * w.out[1] * w.out[2];
  const int64_t k_plane = w.kernel[0] * w.kernel[1] * w.kernel[2];
  const float* x = in[0]->data<float>();
  const float* wt = in[1]->data<float>();
  const float* bias = in.size() > 2 && in[2] ? in[2]->data<float>() : nullptr;
  float* y = out[0].data<float>();
  std::vector<double> acc(out_plane);
  // Valid output ranges per kernel offset, per axis.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> ranges(3);
  for (int a = 0; a < 3; ++a) {
    for (int64_t k = 0; k < w.kernel[a]; ++k) {
      int64_t lo, hi;
      ValidRange(k * w.dilation[a] - w.pad_begin[a], w.stride[a], w.in[a], w.out[a], &lo, &hi);
      ranges[a].push_back({lo, hi});
    }
  }
  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t m = 0; m < m_out; ++m) {
      const int64_t g = m / mg;
      std::fill(acc.begin(), acc.end(), bias ? bias[m] : 0.0);
      for (int64_t c = 0; c < cg; ++c) {
        const float* xp = x + (n * c_in + g * cg + c) * in_plane;
        const float* wp = wt + (m * cg + c) * k_plane;
        for (int64_t kd = 0; kd < w.kernel[0]; ++kd) {
          for (int64_t kh = 0; kh < w.kernel[1]; ++kh) {
            for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
              const double wv = wp[(kd * w.kernel[1] + kh) * w.kernel[2] + kw];
              if (wv == 0) continue;
              auto [d0, d1] = ranges[0][kd];
              auto [h0, h1] = ranges[1][kh];
              auto [w0, w1] = ranges[2][kw];
              for (int64_t od = d0; od < d1; ++od) {
                const int64_t id = od * w.stride[0] + kd * w.dilation[0] - w.pad_begin[0];
                for (int64_t oh = h0; oh < h1; ++oh) {
                  const int64_t ih = oh * w.stride[1] + kh * w.dilation[1] - w.pad_begin[1];
                  const int64_t base = (id * w.in[1] + ih) * w.in[2] + kw * w.dilation[2] - w.pad_begin[2];
                  double* arow = acc.data() + (od * w.out[1] + oh) * w.out[2];
                  const int64_t sw = w.stride[2];
                  for (int64_t ow = w0; ow < w1; ++ow) arow[ow] += wv * xp[base + ow * sw];
                }
              }
            }
          }
        }
      }
      float* yp = y + (n * m_out + m) * out_plane;
      for (int64_t i = 0; i < out_plane; ++i) yp[i] = static_cast<float>(acc[i]);
    }
  }
  return absl::OkStatus();
}

OpDef ConvOp() {
  OpDef def;
  def.op_type = "Conv";
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.attrs = kConvAttrs;
  def.validate = ValidateConv;
  def.infer = InferConv;
  def.eval = EvalConv;
  return def;
}

// ---------------------------------------------------------------------------
// ConvTranspose: the gradient of Conv; W is [C, M/group, k...]. Output extents
// from output_shape (pads derived) or from strides, pads and output_padding.

absl::StatusOr<Window> TransposeWindow(const Node& node, const TensorType& x, const std::vector<int64_t>& kernel) {
  Window w;
  w.nsp = static_cast<int>(x.rank()) - 2;
  for (int i = 0; i < w.nsp; ++i) {
    const Dim& d = x.dims[i + 2];
    if (!d.is_static()) return SymbolicError(node, 0, i + 2, d, "is a spatial dimension");
    w.in.push_back(d.value);
  }
  w.kernel = kernel;
  if (static_cast<int>(w.kernel.size()) != w.nsp) {
    return absl::InvalidArgumentError(absl::StrCat("kernel shape ", JoinInts(w.kernel), " does not match the ",
                                                   w.nsp, " spatial axes of ", x.ToString()));
  }
  ASSIGN_OR_RETURN(w.stride, SpatialAttr(node, "strides", w.nsp, 1, 1));
  ASSIGN_OR_RETURN(w.dilation, SpatialAttr(node, "dilations", w.nsp, 1, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> pads, SpatialAttr(node, "pads", 2 * w.nsp, 0, 0));
  ASSIGN_OR_RETURN(std::vector<int64_t> out_pad, SpatialAttr(node, "output_padding", w.nsp, 0, 0));
  std::vector<int64_t> out_shape = node.GetInts("output_shape", {});
  if (out_shape.size() == static_cast<size_t>(w.nsp + 2)) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (!out_shape.empty() && out_shape.size() != static_cast<size_t>(w.nsp)) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'output_shape' ", JoinInts(out_shape),
                                                   " does not match the spatial axes of ", x.ToString()));
  }
  const std::string auto_pad = node.GetString("auto_pad", "NOTSET");
  w.pad_begin.resize(w.nsp);
  w.pad_end.resize(w.nsp);
  w.out.resize(w.nsp);
  for (int i = 0; i < w.nsp; ++i) {
    const int64_t dk = (w.kernel[i] - 1) * w.dilation[i] + 1;
    const int64_t full = w.stride[i] * (w.in[i] - 1) + out_pad[i] + dk;
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    if (!out_shape.empty() || same) {
      w.out[i] = !out_shape.empty() ? out_shape[i] : w.in[i] * w.stride[i];
      const int64_t total = full - w.out[i];
      if (total < 0) {
        w.pad_begin[i] = 0;  // the extra extent is zero-filled at the end
      } else {
        w.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      }
      w.pad_end[i] = total - w.pad_begin[i];
    } else {
      if (auto_pad == "NOTSET") {
        w.pad_begin[i] = pads[i];
        w.pad_end[i] = pads[i + w.nsp];
      }
      w.out[i] = full - w.pad_begin[i] - w.pad_end[i];
    }
    if (w.out[i] < 1) {
      return absl::InvalidArgumentError(absl::StrCat("output extent ", w.out[i], " on spatial axis ", i,
                                                     " is not positive for input ", x.ToString(), " and pads ",
                                                     JoinInts(pads)));
    }
  }
  return w;
}

OpDef ConvTransposeOp() {
  OpDef def;
  def.op_type = "ConvTranspose";
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.attrs = kConvAttrs;
  def.attrs.push_back({"output_padding", AttrKind::kInts});
  def.attrs.push_back({"output_shape", AttrKind::kInts});
  def.validate = ValidateConv;
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireF32(node, in));
    const TensorType& x = *in[0];
    const TensorType& w = *in[1];
    RETURN_IF_ERROR(RequireSpatialRank(x, "input X"));
    if (w.rank() != x.rank()) {
      return absl::InvalidArgumentError(absl::StrCat("weights ", w.ToString(), " must have the rank of X ", x.ToString()));
    }
    const int64_t group = node.GetInt("group", 1);
    if (!SameDim(x.dims[1], w.dims[0])) {
      return absl::InvalidArgumentError(absl::StrCat("input channels of X ", x.ToString(),
                                                     " != weights dimension 0 of ", w.ToString()));
    }
    if (!x.dims[1].is_static()) return SymbolicError(node, 0, 1, x.dims[1], "is the channel dimension");
    if (x.dims[1].value % group != 0) {
      return absl::InvalidArgumentError(absl::StrCat("channels of X ", x.ToString(), " are not divisible by group ", group));
    }
    if (!w.dims[1].is_static()) return SymbolicError(node, 1, 1, w.dims[1], "is the output channel dimension");
    const int64_t m = w.dims[1].value * group;
    if (const TensorType* b = in.size() > 2 ? in[2] : nullptr) {
      if (b->rank() != 1 || !(b->dims[0].is_static() && b->dims[0].value == m)) {
        return absl::InvalidArgumentError(absl::StrCat("bias ", b->ToString(), " must be [", m, "]"));
      }
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> kernel, KernelFromWeights(node, w));
    ASSIGN_OR_RETURN(Window win, TransposeWindow(node, x, kernel));
    return std::vector<TensorType>{MakeType(DType::kFloat32, NcDims(x, Dim::Static(m), win.out))};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const TensorType xt = TensorType::Static(in[0]->dtype(), in[0]->dims());
    std::vector<int64_t> kernel(in[1]->dims().begin() + 2, in[1]->dims().end());
    ASSIGN_OR_RETURN(Window win0, TransposeWindow(node, xt, kernel));
    const Window w = win0.To3D();
    const int64_t n_batch = in[0]->dims()[0], c_in = in[0]->dims()[1];
    const int64_t group = node.GetInt("group", 1);
    const int64_t cg = c_in / group, mg = in[1]->dims()[1], m_out = mg * group;
    const int64_t in_plane = w.in[0] * w.in[1] * w.in[2];
    const int64_t out_plane = w.out[0] * w.out[1] * w.out[2];
    const int64_t k_plane = w.kernel[0] * w.kernel[1] * w.kernel[2];
    const float* x = in[0]->data<float>();
    const float* wt = in[1]->data<float>();
    const float* bias = in.size() > 2 && in[2] ? in[2]->data<float>() : nullptr;
    float* y = out[0].data<float>();
    // Valid input ranges per kernel offset: i * s + k * d - pad in [0, out).
    std::vector<std::vector<std::pair<int64_t, int64_t>>> ranges(3);
    for (int a = 0; a < 3; ++a) {
      for (int64_t k = 0; k < w.kernel[a]; ++k) {
        int64_t lo, hi;
        ValidRange(k * w.dilation[a] - w.pad_begin[a], w.stride[a], w.out[a], w.in[a], &lo, &hi);
        ranges[a].push_back({lo, hi});
      }
    }
    std::vector<double> acc(out_plane);
    for (int64_t n = 0; n < n_batch; ++n) {
      for (int64_t m = 0; m < m_out; ++m) {
        const int64_t g = m / mg, ml = m % mg;
        std::fill(acc.begin(), acc.end(), bias ? bias[m] : 0.0);
        for (int64_t c = 0; c < cg; ++c) {
          const float* xp = x + (n * c_in + g * cg + c) * in_plane;
          const float* wp = wt + ((g * cg + c) * mg + ml) * k_plane;
          for (int64_t kd = 0; kd < w.kernel[0]; ++kd) {
            for (int64_t kh = 0; kh < w.kernel[1]; ++kh) {
              for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
                const double wv = wp[(kd * w.kernel[1] + kh) * w.kernel[2] + kw];
                if (wv == 0) continue;
                auto [d0, d1] = ranges[0][kd];
                auto [h0, h1] = ranges[1][kh];
                auto [w0, w1] = ranges[2][kw];
                const int64_t sw = w.stride[2];
                const int64_t ow_off = kw * w.dilation[2] - w.pad_begin[2];
                for (int64_t id = d0; id < d1; ++id) {
                  const int64_t od = id * w.stride[0] + kd * w.dilation[0] - w.pad_begin[0];
                  for (int64_t ih = h0; ih < h1; ++ih) {
                    const int64_t oh = ih * w.stride[1] + kh * w.dilation[1] - w.pad_begin[1];
                    const float* row = xp + (id * w.in[1] + ih) * w.in[2];
                    const int64_t base = (od * w.out[1] + oh) * w.out[2] + ow_off;
                    for (int64_t iw = w0; iw < w1; ++iw) acc[base + iw * sw] += wv * row[iw];
                  }
                }
              }
            }
          }
        }
        float* yp = y + (n * m_out + m) * out_plane;
        for (int64_t i = 0; i < out_plane; ++i) yp[i] = static_cast<float>(acc[i]);
      }
    }
    return absl::OkStatus();
  };
  return def;
}

// ---------------------------------------------------------------------------
// MaxPool / AveragePool. Positions in the padding are skipped; AveragePool with
// count_include_pad=1 divides by the window's size clipped to the padded input.
// MaxPool's optional Indices output holds flat indices into X (row-major, or
// column-major over the spatial axes with storage_order=1).

absl::StatusOr<std::vector<TensorType>> InferPool(const Node& node, const InputTypes& in, bool is_max) {
  const TensorType& x = *in[0];
  if (is_max) {
    if (x.dtype != DType::kFloat32 && x.dtype != DType::kFloat64 && x.dtype != DType::kInt8 &&
        x.dtype != DType::kUInt8) {
      return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, 0), "' has dtype ", DTypeName(x.dtype),
                                                     "; expected f32, f64, i8 or u8"));
    }
  } else {
    RETURN_IF_ERROR(RequireF32(node, in));
  }
  RETURN_IF_ERROR(RequireSpatialRank(x, "input X"));
  if (!node.has_attr("kernel_shape")) return absl::InvalidArgumentError("attribute 'kernel_shape' is required");
  ASSIGN_OR_RETURN(Window win, ForwardWindow(node, x, 0, node.GetInts("kernel_shape", {}), true));
  std::vector<TensorType> out = {MakeType(x.dtype, NcDims(x, x.dims[1], win.out))};
  if (node.num_outputs() > 1) out.push_back(MakeType(DType::kInt64, out[0].dims));
  return out;
}

template <typename T>
void PoolKernel(const Node& node, bool is_max, const Window& w, const Tensor& xt, std::vector<Tensor>& out) {
  const int64_t planes = xt.dims()[0] * xt.dims()[1];
  const int64_t in_plane = w.in[0] * w.in[1] * w.in[2];
  const int64_t out_plane = w.out[0] * w.out[1] * w.out[2];
  const bool include_pad = node.GetInt("count_include_pad", 0) != 0;
  const bool col_major = node.GetInt("storage_order", 0) != 0;
  const T* x = xt.data<T>();
  T* y = out[0].data<T>();
  int64_t* idx = out.size() > 1 ? out[1].data<int64_t>() : nullptr;
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * in_plane;
    for (int64_t od = 0; od < w.out[0]; ++od) {
      for (int64_t oh = 0; oh < w.out[1]; ++oh) {
        for (int64_t ow = 0; ow < w.out[2]; ++ow) {
          const int64_t o[3] = {od, oh, ow};
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int64_t best_at = -1, count = 0, padded = 1;
          int64_t lo[3], hi[3];
          for (int a = 0; a < 3; ++a) {
            int64_t start = o[a] * w.stride[a] - w.pad_begin[a];
            int64_t end = std::min(start + (w.kernel[a] - 1) * w.dilation[a] + 1, w.in[a] + w.pad_end[a]);
            padded *= (end - start + w.dilation[a] - 1) / w.dilation[a];
            lo[a] = start;
            hi[a] = end;
          }
          for (int64_t id = lo[0]; id < hi[0]; id += w.dilation[0]) {
            if (id < 0 || id >= w.in[0]) continue;
            for (int64_t ih = lo[1]; ih < hi[1]; ih += w.dilation[1]) {
              if (ih < 0 || ih >= w.in[1]) continue;
              for (int64_t iw = lo[2]; iw < hi[2]; iw += w.dilation[2]) {
                if (iw < 0 || iw >= w.in[2]) continue;
                const int64_t at = (id * w.in[1] + ih) * w.in[2] + iw;
                const double v = static_cast<double>(xp[at]);
                if (is_max) {
                  if (v > best || best_at < 0) {
                    best = v;
                    best_at = col_major ? (iw * w.in[1] + ih) * w.in[0] + id : at;
                  }
                } else {
                  sum += v;
                  ++count;
                }
              }
            }
          }
          const int64_t oi = p * out_plane + (od * w.out[1] + oh) * w.out[2] + ow;
          if (is_max) {
            y[oi] = static_cast<T>(best);
            if (idx) idx[oi] = p * in_plane + best_at;
          } else {
            const int64_t div = include_pad ? padded : count;
            y[oi] = static_cast<T>(div > 0 ? sum / static_cast<double>(div) : 0.0);
          }
        }
      }
    }
  }
}

OpDef PoolOp(bool is_max) {
  OpDef def;
  def.op_type = is_max ? "MaxPool" : "AveragePool";
  if (is_max) {  // optional Indices
    def.min_outputs = 1;
    def.num_outputs = 2;
  }
  def.attrs = {{"auto_pad", AttrKind::kString}, {"ceil_mode", AttrKind::kInt}, {"dilations", AttrKind::kInts},
               {"kernel_shape", AttrKind::kInts}, {"pads", AttrKind::kInts}, {"strides", AttrKind::kInts}};
  def.attrs.push_back(is_max ? AttrSpec{"storage_order", AttrKind::kInt} : AttrSpec{"count_include_pad", AttrKind::kInt});
  def.validate = [](const Node& node) -> absl::Status {
    RETURN_IF_ERROR(ValidateAutoPad(node));
    for (const char* name : {"ceil_mode", "storage_order", "count_include_pad"}) {
      int64_t v = node.GetInt(name, 0);
      if (v != 0 && v != 1) {
        return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be 0 or 1, got ", v));
      }
    }
    return absl::OkStatus();
  };
  def.infer = [is_max](const Node& node, const InputTypes& in) { return InferPool(node, in, is_max); };
  def.eval = [is_max](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const TensorType xt = TensorType::Static(in[0]->dtype(), in[0]->dims());
    ASSIGN_OR_RETURN(Window win, ForwardWindow(node, xt, 0, node.GetInts("kernel_shape", {}), true));
    const Window w = win.To3D();
    return DispatchDType(in[0]->dtype(), [&](auto tag) -> absl::Status {
      PoolKernel<decltype(tag)>(node, is_max, w, *in[0], out);
      return absl::OkStatus();
    });
  };
  return def;
}

OpDef GlobalPoolOp(bool is_max) {
  OpDef def;
  def.op_type = is_max ? "GlobalMaxPool" : "GlobalAveragePool";
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireF32(node, in));
    const TensorType& x = *in[0];
    if (x.rank() < 3) {
      return absl::InvalidArgumentError(absl::StrCat("input must be N x C x D1 ... (rank >= 3), got ", x.ToString()));
    }
    std::vector<Dim> dims = x.dims;
    for (size_t i = 2; i < dims.size(); ++i) dims[i] = Dim::Static(1);
    return std::vector<TensorType>{MakeType(DType::kFloat32, std::move(dims))};
  };
  def.eval = [is_max](const Node&, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const std::vector<int64_t>& d = in[0]->dims();
    const int64_t planes = d[0] * d[1];
    const int64_t plane = in[0]->num_elements() / std::max<int64_t>(planes, 1);
    const float* x = in[0]->data<float>();
    float* y = out[0].data<float>();
    for (int64_t p = 0; p < planes; ++p) {
      const float* xp = x + p * plane;
      if (is_max) {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < plane; ++i) m = std::max(m, xp[i]);
        y[p] = m;
      } else {
        double s = 0;
        for (int64_t i = 0; i < plane; ++i) s += xp[i];
        y[p] = static_cast<float>(plane > 0 ? s / static_cast<double>(plane) : 0.0);
      }
    }
    return absl::OkStatus();
  };
  return def;
}

}  // namespace

void RegisterNnOps(std::vector<OpDef>* defs) {
  defs->push_back(ConvOp());
  defs->push_back(ConvTransposeOp());
  defs->push_back(PoolOp(true));
  defs->push_back(PoolOp(false));
  defs->push_back(GlobalPoolOp(true));
  defs->push_back(GlobalPoolOp(false));
  RegisterNnNormOps(defs);
  RegisterNnResizeOps(defs);
}

}  // namespace kiln::ops
