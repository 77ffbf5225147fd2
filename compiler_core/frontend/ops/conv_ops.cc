// Convolutions over NC[D][H]W tensors with 1 to 3 spatial axes
// (codegen/loop_ir/lower_conv.cc): Conv (groups, depthwise, strides, pads,
// dilations, auto_pad) and ConvTranspose (output_padding, output_shape).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/ops/conv_blocking.h"
#include "compiler_core/frontend/ops/op_families.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/ops/window.h"
#include "compiler_core/frontend/shape_inference.h"

namespace kiln::ops {
namespace {

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

// f32 X of 1 to 3 spatial axes and weights of X's rank (Conv, ConvTranspose).
absl::Status CheckConvOperands(const Node& node, const InputTypes& in) {
  RETURN_IF_ERROR(RequireF32(node, in));
  const TensorType& x = *in[0];
  const TensorType& w = *in[1];
  RETURN_IF_ERROR(RequireSpatialRank(x, "input X"));
  if (w.rank() != x.rank()) {
    return absl::InvalidArgumentError(absl::StrCat("weights ", w.ToString(), " must have the rank of X ", x.ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorType>> InferConv(const Node& node, const InputTypes& in) {
  RETURN_IF_ERROR(CheckConvOperands(node, in));
  const TensorType& x = *in[0];
  const TensorType& w = *in[1];
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
// kiln.BlockedConv: a Conv whose weights are blocked by output channel,
// Wb [K/B, C/group, k..., B], or for a pointwise conv also chunked by input
// channel, Wb [C/L, K/B, L, k..., B] (ops/conv_blocking.h); everything else
// as Conv.

// W's type from Wb's: [K/B, C/g, k..., B] or [C/L, K/B, L, k..., B] -> [K, C/g, k...].
absl::StatusOr<TensorType> UnblockedWeightType(const TensorType& wb, const TensorType& x) {
  const std::vector<int64_t> w = wb.IsStatic() ? UnblockedWeightDims(wb.StaticDims(), x.rank()) : std::vector<int64_t>{};
  if (w.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("blocked weights ", wb.ToString(), " for input X ", x.ToString(),
                                                   " must be static [K/B, C/group, k..., B] or [C/L, K/B, L, k..., B]"));
  }
  std::vector<Dim> dims;
  for (int64_t d : w) dims.push_back(Dim::Static(d));
  return MakeType(wb.dtype, dims);
}

OpDef BlockedConvOp() {
  OpDef def;
  def.op_type = "BlockedConv";
  def.domain = std::string(kKilnDomain);
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.attrs = kConvAttrs;
  def.validate = ValidateConv;
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    ASSIGN_OR_RETURN(TensorType w, UnblockedWeightType(*in[1], *in[0]));
    InputTypes conv_in = in;
    conv_in[1] = &w;
    return InferConv(node, conv_in);
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const Tensor w = UnblockConvWeights(*in[1], in[0]->dims().size());
    InputTensors conv_in = in;
    conv_in[1] = &w;
    return EvalConv(node, conv_in, out);
  };
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
    RETURN_IF_ERROR(CheckConvOperands(node, in));
    const TensorType& x = *in[0];
    const TensorType& w = *in[1];
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

}  // namespace

void RegisterConvOps(std::vector<OpDef>* defs) {
  defs->push_back(WithClass(OpClass::kAnchor, ConvOp()));
  defs->push_back(WithClass(OpClass::kAnchor, ConvTransposeOp()));
  defs->push_back(WithClass(OpClass::kAnchor, BlockedConvOp()));
}

}  // namespace kiln::ops
