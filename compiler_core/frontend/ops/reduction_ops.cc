// Reductions (codegen/loop_ir/lower_reduction.cc): Reduce* (axes as
// attribute or constant input), Softmax, LogSoftmax and Hardmax, the
// normalisations LayerNormalization and InstanceNormalization, and the global
// pools, over f32/f64/i32/i64 where ONNX allows.
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
#include "compiler_core/frontend/ops/op_families.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/shape_inference.h"

namespace kiln::ops {
namespace {

// ---------------------------------------------------------------------------
// Reduce*: axes from the attribute (opset < 18; ReduceSum < 13) or the optional
// constant second input; empty axes reduce everything unless
// noop_with_empty_axes=1, which makes the op an identity.

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

// Which axes are reduced (empty mask = identity).
absl::StatusOr<std::vector<bool>> ReducedAxes(const Node& node, int64_t rank) {
  std::vector<int64_t> axes;
  bool from_input = node.input(1) != nullptr;
  if (from_input) {
    if (node.has_attr("axes")) {
      return absl::InvalidArgumentError("axes are given both as attribute and as input");
    }
    ASSIGN_OR_RETURN(axes, ConstantIntInput(node, 1));
  } else {
    axes = node.GetInts("axes", {});
  }
  if (axes.empty()) {
    if (node.GetInt("noop_with_empty_axes", 0) != 0) return std::vector<bool>{};
    return std::vector<bool>(rank, true);
  }
  std::vector<bool> mask(rank, false);
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int64_t r, ResolveAxis(a, rank, "an entry of 'axes'"));
    if (mask[r]) return absl::InvalidArgumentError(absl::StrCat("axis ", a, " appears twice in 'axes'"));
    mask[r] = true;
  }
  return mask;
}

template <typename T, typename Acc>
void ReduceKernel(ReduceKind kind, const Tensor& x, const std::vector<bool>& mask, Tensor& y) {
  const std::vector<int64_t>& d = x.dims();
  const int rank = static_cast<int>(d.size());
  // Output strides aligned to the input's axes, 0 on reduced axes.
  std::vector<int64_t> ostride(rank, 0);
  int64_t s = 1, count = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (mask[i]) {
      count *= d[i];
    } else {
      ostride[i] = s;
      s *= d[i];
    }
  }
  const int64_t out_n = y.num_elements();
  Acc init = 0;
  if (kind == ReduceKind::kProd) init = 1;
  if (kind == ReduceKind::kMax) {
    init = std::numeric_limits<Acc>::has_infinity ? -std::numeric_limits<Acc>::infinity()
                                                  : std::numeric_limits<Acc>::lowest();
  }
  if (kind == ReduceKind::kMin) {
    init = std::numeric_limits<Acc>::has_infinity ? std::numeric_limits<Acc>::infinity()
                                                  : std::numeric_limits<Acc>::max();
  }
  std::vector<Acc> acc(out_n, init);
  // LogSumExp: subtract the per-output max for stability.
  std::vector<Acc> shift(out_n, 0);
  const T* px = x.data<T>();
  const int64_t n = x.num_elements();
  auto walk = [&](auto&& f) {
    std::vector<int64_t> coord(rank, 0);
    int64_t o = 0;
    for (int64_t i = 0; i < n; ++i) {
      f(o, static_cast<Acc>(px[i]));
      for (int a = rank - 1; a >= 0; --a) {
        o += ostride[a];
        if (++coord[a] < d[a]) break;
        o -= ostride[a] * d[a];
        coord[a] = 0;
      }
    }
  };
  if (kind == ReduceKind::kLogSumExp) {
    std::vector<Acc> mx(out_n, -std::numeric_limits<Acc>::infinity());
    walk([&](int64_t o, Acc v) { mx[o] = std::max(mx[o], v); });
    for (int64_t o = 0; o < out_n; ++o) shift[o] = std::isfinite(static_cast<double>(mx[o])) ? mx[o] : 0;
  }
  walk([&](int64_t o, Acc v) {
    switch (kind) {
      case ReduceKind::kSum:
      case ReduceKind::kMean:
      case ReduceKind::kLogSum: acc[o] += v; break;
      case ReduceKind::kMax: acc[o] = std::max(acc[o], v); break;
      case ReduceKind::kMin: acc[o] = std::min(acc[o], v); break;
      case ReduceKind::kProd: acc[o] *= v; break;
      case ReduceKind::kL1: acc[o] += v < 0 ? -v : v; break;
      case ReduceKind::kL2:
      case ReduceKind::kSumSquare: acc[o] += v * v; break;
      case ReduceKind::kLogSumExp: acc[o] += static_cast<Acc>(std::exp(static_cast<double>(v - shift[o]))); break;
    }
  });
  T* py = y.data<T>();
  for (int64_t o = 0; o < out_n; ++o) {
    double v = static_cast<double>(acc[o]);
    switch (kind) {
      case ReduceKind::kMean:
        if constexpr (std::is_integral_v<Acc>) {
          py[o] = static_cast<T>(count == 0 ? 0 : acc[o] / count);
          continue;
        }
        v = v / static_cast<double>(count);
        break;
      case ReduceKind::kL2: v = std::sqrt(v); break;
      case ReduceKind::kLogSum: v = std::log(v); break;
      case ReduceKind::kLogSumExp: v = std::log(v) + static_cast<double>(shift[o]); break;
      default:
        py[o] = static_cast<T>(acc[o]);
        continue;
    }
    py[o] = static_cast<T>(v);
  }
}

OpDef ReduceOp(std::string op_type, ReduceKind kind) {
  OpDef def;
  def.op_type = std::move(op_type);
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.attrs = {{"axes", AttrKind::kInts}, {"keepdims", AttrKind::kInt}, {"noop_with_empty_axes", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    RETURN_IF_ERROR(RequireBool01(node, "keepdims", 1));
    return RequireBool01(node, "noop_with_empty_axes", 0);
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    const TensorType& x = *in[0];
    RETURN_IF_ERROR(RequireNumeric(node, x, 0));
    ASSIGN_OR_RETURN(std::vector<bool> mask, ReducedAxes(node, x.rank()));
    if (mask.empty()) return std::vector<TensorType>{x};
    const bool keep = node.GetInt("keepdims", 1) != 0;
    std::vector<Dim> dims;
    for (int64_t i = 0; i < x.rank(); ++i) {
      if (!mask[i]) dims.push_back(x.dims[i]);
      else if (keep) dims.push_back(Dim::Static(1));
    }
    return std::vector<TensorType>{MakeType(x.dtype, std::move(dims))};
  };
  def.eval = [kind](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<bool> mask, ReducedAxes(node, in[0]->rank()));
    if (mask.empty()) {
      out[0] = *in[0];
      return absl::OkStatus();
    }
    return DispatchDType(in[0]->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>) {
        ReduceKernel<T, double>(kind, *in[0], mask, out[0]);
      } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, int32_t>) {
        if (kind == ReduceKind::kL2 || kind == ReduceKind::kLogSum || kind == ReduceKind::kLogSumExp) {
          ReduceKernel<T, double>(kind, *in[0], mask, out[0]);
        } else {
          ReduceKernel<T, int64_t>(kind, *in[0], mask, out[0]);
        }
      }
      return absl::OkStatus();
    });
  };
  return def;
}

// ---------------------------------------------------------------------------
// Softmax, LogSoftmax, Hardmax over one axis (opset >= 13) or over the
// flattened trailing axes [axis, rank) (opset < 13, see the file comment).

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

struct SoftmaxSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

bool LegacySoftmax(const Node& node) { return node.GetInt("_kiln_opset", 13) < 13; }

absl::StatusOr<int64_t> SoftmaxAxis(const Node& node, int64_t rank) {
  return ResolveAxis(node.GetInt("axis", LegacySoftmax(node) ? 1 : -1), rank, "attribute 'axis'");
}

absl::StatusOr<SoftmaxSplit> SoftmaxAxes(const Node& node, const std::vector<int64_t>& dims) {
  const bool legacy = LegacySoftmax(node);
  const int64_t rank = static_cast<int64_t>(dims.size());
  ASSIGN_OR_RETURN(int64_t axis, SoftmaxAxis(node, rank));
  SoftmaxSplit s;
  for (int64_t i = 0; i < rank; ++i) {
    if (i < axis) s.outer *= dims[i];
    else if (i == axis || legacy) s.n *= dims[i];
    else s.inner *= dims[i];
  }
  return s;
}

OpDef SoftmaxOp(std::string op_type, SoftmaxKind kind) {
  OpDef def;
  def.op_type = std::move(op_type);
  def.attrs = {{"axis", AttrKind::kInt}, {"_kiln_opset", AttrKind::kInt}};
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireF32(node, in));
    const TensorType& x = *in[0];
    if (x.rank() == 0) return absl::InvalidArgumentError("input must have rank >= 1");
    RETURN_IF_ERROR(SoftmaxAxis(node, x.rank()).status());
    return std::vector<TensorType>{x};
  };
  def.eval = [kind](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    ASSIGN_OR_RETURN(SoftmaxSplit s, SoftmaxAxes(node, in[0]->dims()));
    const float* x = in[0]->data<float>();
    float* y = out[0].data<float>();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t base = o * s.n * s.inner + i;
        auto at = [&](int64_t k) { return base + k * s.inner; };
        float mx = -std::numeric_limits<float>::infinity();
        int64_t arg = 0;
        for (int64_t k = 0; k < s.n; ++k) {
          if (x[at(k)] > mx) {
            mx = x[at(k)];
            arg = k;
          }
        }
        if (kind == SoftmaxKind::kHardmax) {
          for (int64_t k = 0; k < s.n; ++k) y[at(k)] = k == arg ? 1.0f : 0.0f;
          continue;
        }
        double sum = 0;
        for (int64_t k = 0; k < s.n; ++k) sum += std::exp(static_cast<double>(x[at(k)]) - mx);
        const double log_sum = std::log(sum);
        for (int64_t k = 0; k < s.n; ++k) {
          double v = static_cast<double>(x[at(k)]) - mx;
          y[at(k)] = static_cast<float>(kind == SoftmaxKind::kSoftmax ? std::exp(v) / sum : v - log_sum);
        }
      }
    }
    return absl::OkStatus();
  };
  return def;
}

// ---------------------------------------------------------------------------
// LayerNormalization: normalise over axes [axis, rank); Scale and B broadcast
// to those axes. Optional outputs Mean and InvStdDev have X's shape with the
// normalised axes set to 1 (f32).

OpDef LayerNormOp() {
  OpDef def;
  def.op_type = "LayerNormalization";
  def.min_outputs = 1;  // optional Mean and InvStdDev
  def.num_outputs = 3;
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.attrs = {{"axis", AttrKind::kInt}, {"epsilon", AttrKind::kFloat}, {"stash_type", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    int64_t st = node.GetInt("stash_type", 1);
    if (st != 1) return absl::InvalidArgumentError(absl::StrCat("attribute 'stash_type' must be 1 (f32), got ", st));
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireF32(node, in));
    const TensorType& x = *in[0];
    ASSIGN_OR_RETURN(int64_t axis, ResolveAxis(node.GetInt("axis", -1), x.rank(), "attribute 'axis'"));
    std::vector<Dim> norm(x.dims.begin() + axis, x.dims.end());
    for (int i = 1; i < 3; ++i) {
      const TensorType* t = in.size() > static_cast<size_t>(i) ? in[i] : nullptr;
      if (t == nullptr) continue;
      std::string mismatch = absl::StrCat("input '", InputName(node, i), "' ", t->ToString(),
                                          " cannot be broadcast to the normalised axes of ", x.ToString());
      if (t->rank() > static_cast<int64_t>(norm.size())) return absl::InvalidArgumentError(mismatch);
      ASSIGN_OR_RETURN(std::vector<Dim> b, BroadcastDims(node, 0, norm, i, t->dims, mismatch));
      for (size_t k = 0; k < b.size(); ++k) {
        if (!SameDim(b[k], norm[k])) return absl::InvalidArgumentError(mismatch);
      }
    }
    std::vector<TensorType> out = {x};
    std::vector<Dim> stat_dims = x.dims;
    for (size_t k = axis; k < stat_dims.size(); ++k) stat_dims[k] = Dim::Static(1);
    for (int i = 1; i < node.num_outputs(); ++i) out.push_back(MakeType(DType::kFloat32, stat_dims));
    return out;
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const std::vector<int64_t>& d = in[0]->dims();
    ASSIGN_OR_RETURN(int64_t axis, ResolveAxis(node.GetInt("axis", -1), in[0]->rank(), "attribute 'axis'"));
    const std::vector<int64_t> norm(d.begin() + axis, d.end());
    const int64_t inner = NumElements(norm);
    const int64_t outer = NumElements(std::vector<int64_t>(d.begin(), d.begin() + axis));
    const double eps = node.GetFloat("epsilon", 1e-5f);
    // Scale and bias expanded to the normalised axes.
    auto expand = [&](const Tensor* t, float def) {
      std::vector<float> v(inner, def);
      if (t == nullptr) return v;
      std::vector<int64_t> st = BroadcastStrides(t->dims(), norm.size());
      for (int64_t i = 0; i < inner; ++i) v[i] = t->data<float>()[BroadcastOffset(i, norm, st)];
      return v;
    };
    const std::vector<float> scale = expand(in[1], 1.0f);
    const std::vector<float> bias = expand(in.size() > 2 ? in[2] : nullptr, 0.0f);
    const float* x = in[0]->data<float>();
    float* y = out[0].data<float>();
    for (int64_t o = 0; o < outer; ++o) {
      const float* xp = x + o * inner;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < inner; ++i) mean += xp[i];
      mean /= static_cast<double>(std::max<int64_t>(inner, 1));
      for (int64_t i = 0; i < inner; ++i) var += (xp[i] - mean) * (xp[i] - mean);
      var /= static_cast<double>(std::max<int64_t>(inner, 1));
      const double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t i = 0; i < inner; ++i) y[o * inner + i] = static_cast<float>((xp[i] - mean) * inv * scale[i] + bias[i]);
      if (out.size() > 1) out[1].data<float>()[o] = static_cast<float>(mean);
      if (out.size() > 2) out[2].data<float>()[o] = static_cast<float>(inv);
    }
    return absl::OkStatus();
  };
  return def;
}

// ---------------------------------------------------------------------------
// InstanceNormalization: per (n, c), normalise over the spatial axes.

OpDef InstanceNormOp() {
  OpDef def;
  def.op_type = "InstanceNormalization";
  def.min_inputs = def.max_inputs = 3;
  def.attrs = {{"epsilon", AttrKind::kFloat}};
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireF32(node, in));
    const TensorType& x = *in[0];
    if (x.rank() < 3) return absl::InvalidArgumentError(absl::StrCat("input must have rank >= 3, got ", x.ToString()));
    for (int i = 1; i < 3; ++i) RETURN_IF_ERROR(RequireVector(node, in, i, x));
    return std::vector<TensorType>{x};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const std::vector<int64_t>& d = in[0]->dims();
    const int64_t n = d[0], c = d[1], plane = in[0]->num_elements() / std::max<int64_t>(n * c, 1);
    const double eps = node.GetFloat("epsilon", 1e-5f);
    const float* x = in[0]->data<float>();
    const float *scale = in[1]->data<float>(), *bias = in[2]->data<float>();
    float* y = out[0].data<float>();
    for (int64_t p = 0; p < n * c; ++p) {
      const int64_t ci = p % c;
      const float* xp = x + p * plane;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < plane; ++i) mean += xp[i];
      mean /= static_cast<double>(std::max<int64_t>(plane, 1));
      for (int64_t i = 0; i < plane; ++i) var += (xp[i] - mean) * (xp[i] - mean);
      var /= static_cast<double>(std::max<int64_t>(plane, 1));
      const double a = scale[ci] / std::sqrt(var + eps);
      for (int64_t i = 0; i < plane; ++i) y[p * plane + i] = static_cast<float>((xp[i] - mean) * a + bias[ci]);
    }
    return absl::OkStatus();
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

void RegisterReductionOps(std::vector<OpDef>* defs) {
  defs->push_back(WithClass(OpClass::kReduction, ReduceOp("ReduceSum", ReduceKind::kSum)));
  defs->push_back(WithClass(OpClass::kReduction, ReduceOp("ReduceMean", ReduceKind::kMean)));
  defs->push_back(WithClass(OpClass::kReduction, ReduceOp("ReduceMax", ReduceKind::kMax)));
  defs->push_back(WithClass(OpClass::kReduction, ReduceOp("ReduceMin", ReduceKind::kMin)));
  defs->push_back(WithClass(OpClass::kReduction, ReduceOp("ReduceProd", ReduceKind::kProd)));
  defs->push_back(WithClass(OpClass::kReduction, ReduceOp("ReduceL1", ReduceKind::kL1)));
  defs->push_back(WithClass(OpClass::kReduction, ReduceOp("ReduceL2", ReduceKind::kL2)));
  defs->push_back(WithClass(OpClass::kReduction, ReduceOp("ReduceSumSquare", ReduceKind::kSumSquare)));
  defs->push_back(WithClass(OpClass::kReduction, ReduceOp("ReduceLogSum", ReduceKind::kLogSum)));
  defs->push_back(WithClass(OpClass::kReduction, ReduceOp("ReduceLogSumExp", ReduceKind::kLogSumExp)));
  defs->push_back(WithClass(OpClass::kReduction, SoftmaxOp("Softmax", SoftmaxKind::kSoftmax)));
  defs->push_back(WithClass(OpClass::kReduction, SoftmaxOp("LogSoftmax", SoftmaxKind::kLogSoftmax)));
  defs->push_back(WithClass(OpClass::kOpaque, SoftmaxOp("Hardmax", SoftmaxKind::kHardmax)));
  defs->push_back(WithClass(OpClass::kReduction, LayerNormOp()));
  defs->push_back(WithClass(OpClass::kReduction, InstanceNormOp()));
  defs->push_back(WithClass(OpClass::kReduction, GlobalPoolOp(true)));
  defs->push_back(WithClass(OpClass::kReduction, GlobalPoolOp(false)));
}

}  // namespace kiln::ops
