// Normalisation and the softmax family: BatchNormalization (inference),
// InstanceNormalization, LayerNormalization, Softmax, LogSoftmax, Hardmax.
//
// Softmax-family semantics follow opset 13 (one axis, default -1). Before opset
// 13 the input was coerced to 2-D at `axis` (default 1); the importer marks such
// nodes with the internal int attribute "_kiln_opset" (the model's opset), and
// a value < 13 selects the coerced semantics.
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "compiler_core/frontend/ops/op_families.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/shape_inference.h"
#include "base/status_macros.h"

namespace kiln::ops {
namespace {

absl::Status RequireVector(const Node& node, const InputTypes& in, int i, const TensorType& x) {
  const TensorType* t = in[i];
  if (t == nullptr) return absl::OkStatus();
  if (t->rank() != 1 || !SameDim(t->dims[0], x.dims[1])) {
    return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, i), "' ", t->ToString(),
                                                   " must be [C] for input ", x.ToString()));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// BatchNormalization, inference mode: Y = (X - mean) / sqrt(var + eps) * scale + B
// per channel (axis 1). training_mode=1 is rejected.

OpDef BatchNormOp() {
  OpDef def;
  def.op_type = "BatchNormalization";
  def.min_inputs = def.max_inputs = 5;
  def.attrs = {{"epsilon", AttrKind::kFloat}, {"momentum", AttrKind::kFloat}, {"training_mode", AttrKind::kInt},
               {"spatial", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    if (node.GetInt("training_mode", 0) != 0) {
      return absl::InvalidArgumentError("training_mode=1 is not supported (inference only)");
    }
    if (node.GetInt("spatial", 1) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("attribute 'spatial' must be 1, got ", node.GetInt("spatial", 1)));
    }
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireF32(node, in));
    const TensorType& x = *in[0];
    if (x.rank() < 2) return absl::InvalidArgumentError(absl::StrCat("input must have rank >= 2, got ", x.ToString()));
    for (int i = 1; i < 5; ++i) RETURN_IF_ERROR(RequireVector(node, in, i, x));
    return std::vector<TensorType>{x};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const std::vector<int64_t>& d = in[0]->dims();
    const int64_t n = d[0], c = d[1], plane = in[0]->num_elements() / std::max<int64_t>(n * c, 1);
    const double eps = node.GetFloat("epsilon", 1e-5f);
    const float* x = in[0]->data<float>();
    const float *scale = in[1]->data<float>(), *bias = in[2]->data<float>();
    const float *mean = in[3]->data<float>(), *var = in[4]->data<float>();
    float* y = out[0].data<float>();
    for (int64_t ci = 0; ci < c; ++ci) {
      const double a = scale[ci] / std::sqrt(static_cast<double>(var[ci]) + eps);
      const double b = bias[ci] - mean[ci] * a;
      for (int64_t ni = 0; ni < n; ++ni) {
        const int64_t off = (ni * c + ci) * plane;
        for (int64_t i = 0; i < plane; ++i) y[off + i] = static_cast<float>(x[off + i] * a + b);
      }
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

}  // namespace

void RegisterNnNormOps(std::vector<OpDef>* defs) {
  defs->push_back(BatchNormOp());
  defs->push_back(InstanceNormOp());
  defs->push_back(LayerNormOp());
  defs->push_back(SoftmaxOp("Softmax", SoftmaxKind::kSoftmax));
  defs->push_back(SoftmaxOp("LogSoftmax", SoftmaxKind::kLogSoftmax));
  defs->push_back(SoftmaxOp("Hardmax", SoftmaxKind::kHardmax));
}

}  // namespace kiln::ops
