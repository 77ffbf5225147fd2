// Reductions: Reduce* (axes as attribute or constant input), ArgMax/ArgMin,
// TopK and CumSum, over f32/f64/i32/i64.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/frontend/ops/op_families.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/shape_inference.h"
#include "base/status_macros.h"

namespace kiln::ops {
namespace {

bool IsNumeric(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kInt32 || t == DType::kInt64;
}

absl::Status RequireNumeric(const Node& node, const TensorType& t, int i) {
  if (!IsNumeric(t.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, i), "' has dtype ",
                                                   DTypeName(t.dtype), "; expected f32, f64, i32 or i64"));
  }
  return absl::OkStatus();
}

absl::Status RequireBool01(const Node& node, const char* name, int64_t def) {
  int64_t v = node.GetInt(name, def);
  if (v != 0 && v != 1) {
    return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be 0 or 1, got ", v));
  }
  return absl::OkStatus();
}

// Outer x axis x inner decomposition of `dims` around `axis`.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisSplit SplitAt(const std::vector<int64_t>& dims, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    if (i < axis) s.outer *= dims[i];
    else if (i == axis) s.n = dims[i];
    else s.inner *= dims[i];
  }
  return s;
}

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
// ArgMax / ArgMin: i64 indices along `axis`; ties go to the first index unless
// select_last_index=1.

template <typename T>
void ArgKernel(bool is_max, bool last, const Tensor& x, int64_t axis, Tensor& y) {
  AxisSplit s = SplitAt(x.dims(), axis);
  const T* px = x.data<T>();
  int64_t* py = y.data<int64_t>();
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const T* base = px + o * s.n * s.inner + i;
      int64_t best = 0;
      for (int64_t k = 1; k < s.n; ++k) {
        T v = base[k * s.inner], b = base[best * s.inner];
        bool better = is_max ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
        if (better) best = k;
      }
      py[o * s.inner + i] = best;
    }
  }
}

OpDef ArgOp(std::string op_type, bool is_max) {
  OpDef def;
  def.op_type = std::move(op_type);
  def.attrs = {{"axis", AttrKind::kInt}, {"keepdims", AttrKind::kInt}, {"select_last_index", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    RETURN_IF_ERROR(RequireBool01(node, "keepdims", 1));
    return RequireBool01(node, "select_last_index", 0);
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    const TensorType& x = *in[0];
    RETURN_IF_ERROR(RequireNumeric(node, x, 0));
    if (x.rank() == 0) return absl::InvalidArgumentError("input must have rank >= 1");
    ASSIGN_OR_RETURN(int64_t axis, ResolveAxis(node.GetInt("axis", 0), x.rank(), "attribute 'axis'"));
    if (x.dims[axis].is_static() && x.dims[axis].value == 0) {
      return absl::InvalidArgumentError(absl::StrCat("cannot reduce empty axis ", axis, " of ", x.ToString()));
    }
    std::vector<Dim> dims = x.dims;
    if (node.GetInt("keepdims", 1) != 0) dims[axis] = Dim::Static(1);
    else dims.erase(dims.begin() + axis);
    return std::vector<TensorType>{MakeType(DType::kInt64, std::move(dims))};
  };
  def.eval = [is_max](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t axis, ResolveAxis(node.GetInt("axis", 0), in[0]->rank(), "attribute 'axis'"));
    bool last = node.GetInt("select_last_index", 0) != 0;
    return DispatchDType(in[0]->dtype(), [&](auto tag) -> absl::Status {
      ArgKernel<decltype(tag)>(is_max, last, *in[0], axis, out[0]);
      return absl::OkStatus();
    });
  };
  return def;
}

// ---------------------------------------------------------------------------
// TopK: the k largest (or smallest) along `axis`, values and i64 indices, always
// sorted; equal values keep the lower index first. K must be a constant.

absl::StatusOr<int64_t> TopKCount(const Node& node) {
  ASSIGN_OR_RETURN(std::vector<int64_t> k, ConstantIntInput(node, 1));
  if (k.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("input 'K' must hold one element, got ", k.size()));
  }
  if (k[0] < 0) return absl::InvalidArgumentError(absl::StrCat("K must be >= 0, got ", k[0]));
  return k[0];
}

OpDef TopKOp() {
  OpDef def;
  def.op_type = "TopK";
  def.min_inputs = def.max_inputs = 2;
  def.num_outputs = 2;
  def.attrs = {{"axis", AttrKind::kInt}, {"largest", AttrKind::kInt}, {"sorted", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    RETURN_IF_ERROR(RequireBool01(node, "largest", 1));
    return RequireBool01(node, "sorted", 1);
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    const TensorType& x = *in[0];
    RETURN_IF_ERROR(RequireNumeric(node, x, 0));
    if (x.rank() == 0) return absl::InvalidArgumentError("input must have rank >= 1");
    ASSIGN_OR_RETURN(int64_t axis, ResolveAxis(node.GetInt("axis", -1), x.rank(), "attribute 'axis'"));
    ASSIGN_OR_RETURN(int64_t k, TopKCount(node));
    const Dim& d = x.dims[axis];
    if (!d.is_static()) return SymbolicError(node, 0, axis, d, "is the TopK axis");
    if (k > d.value) {
      return absl::InvalidArgumentError(absl::StrCat("K = ", k, " exceeds dimension ", axis, " of ", x.ToString()));
    }
    std::vector<Dim> dims = x.dims;
    dims[axis] = Dim::Static(k);
    return std::vector<TensorType>{MakeType(x.dtype, dims), MakeType(DType::kInt64, dims)};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t axis, ResolveAxis(node.GetInt("axis", -1), in[0]->rank(), "attribute 'axis'"));
    ASSIGN_OR_RETURN(int64_t k, TopKCount(node));
    const bool largest = node.GetInt("largest", 1) != 0;
    return DispatchDType(in[0]->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      AxisSplit s = SplitAt(in[0]->dims(), axis);
      const T* px = in[0]->data<T>();
      T* pv = out[0].data<T>();
      int64_t* pi = out[1].data<int64_t>();
      std::vector<int64_t> idx(s.n);
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t i = 0; i < s.inner; ++i) {
          const T* base = px + o * s.n * s.inner + i;
          std::iota(idx.begin(), idx.end(), 0);
          auto cmp = [&](int64_t a, int64_t b) {
            T va = base[a * s.inner], vb = base[b * s.inner];
            if (va != vb) return largest ? va > vb : va < vb;
            return a < b;
          };
          std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), cmp);
          for (int64_t j = 0; j < k; ++j) {
            int64_t at = (o * k + j) * s.inner + i;
            pv[at] = base[idx[j] * s.inner];
            pi[at] = idx[j];
          }
        }
      }
      return absl::OkStatus();
    });
  };
  return def;
}

// ---------------------------------------------------------------------------
// CumSum: running sum along the axis given by the (scalar, i32/i64) second
// input; exclusive=1 leaves out the current element, reverse=1 runs backwards.

OpDef CumSumOp() {
  OpDef def;
  def.op_type = "CumSum";
  def.min_inputs = def.max_inputs = 2;
  def.attrs = {{"exclusive", AttrKind::kInt}, {"reverse", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    RETURN_IF_ERROR(RequireBool01(node, "exclusive", 0));
    return RequireBool01(node, "reverse", 0);
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireNumeric(node, *in[0], 0));
    if (in[0]->rank() == 0) return absl::InvalidArgumentError("input must have rank >= 1");
    const TensorType& a = *in[1];
    if ((a.dtype != DType::kInt64 && a.dtype != DType::kInt32) || a.rank() > 1 ||
        (a.rank() == 1 && !(a.dims[0].is_static() && a.dims[0].value == 1))) {
      return absl::InvalidArgumentError(absl::StrCat("axis input must be an i32/i64 scalar, got ", a.ToString()));
    }
    if (node.input(1)->is_constant()) {
      ASSIGN_OR_RETURN(std::vector<int64_t> axis, ConstantIntInput(node, 1));
      RETURN_IF_ERROR(ResolveAxis(axis[0], in[0]->rank(), "axis input").status());
    }
    return std::vector<TensorType>{*in[0]};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const Tensor& at = *in[1];
    int64_t raw = at.dtype() == DType::kInt64 ? at.data<int64_t>()[0] : at.data<int32_t>()[0];
    ASSIGN_OR_RETURN(int64_t axis, ResolveAxis(raw, in[0]->rank(), "axis input"));
    const bool exclusive = node.GetInt("exclusive", 0) != 0, reverse = node.GetInt("reverse", 0) != 0;
    return DispatchDType(in[0]->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
      AxisSplit s = SplitAt(in[0]->dims(), axis);
      const T* px = in[0]->data<T>();
      T* py = out[0].data<T>();
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t i = 0; i < s.inner; ++i) {
          Acc acc = 0;
          for (int64_t j = 0; j < s.n; ++j) {
            int64_t k = reverse ? s.n - 1 - j : j;
            int64_t at_ = (o * s.n + k) * s.inner + i;
            if (exclusive) {
              py[at_] = static_cast<T>(acc);
              acc += static_cast<Acc>(px[at_]);
            } else {
              acc += static_cast<Acc>(px[at_]);
              py[at_] = static_cast<T>(acc);
            }
          }
        }
      }
      return absl::OkStatus();
    });
  };
  return def;
}

}  // namespace

void RegisterReduceOps(std::vector<OpDef>* defs) {
  defs->push_back(ReduceOp("ReduceSum", ReduceKind::kSum));
  defs->push_back(ReduceOp("ReduceMean", ReduceKind::kMean));
  defs->push_back(ReduceOp("ReduceMax", ReduceKind::kMax));
  defs->push_back(ReduceOp("ReduceMin", ReduceKind::kMin));
  defs->push_back(ReduceOp("ReduceProd", ReduceKind::kProd));
  defs->push_back(ReduceOp("ReduceL1", ReduceKind::kL1));
  defs->push_back(ReduceOp("ReduceL2", ReduceKind::kL2));
  defs->push_back(ReduceOp("ReduceSumSquare", ReduceKind::kSumSquare));
  defs->push_back(ReduceOp("ReduceLogSum", ReduceKind::kLogSum));
  defs->push_back(ReduceOp("ReduceLogSumExp", ReduceKind::kLogSumExp));
  defs->push_back(ArgOp("ArgMax", true));
  defs->push_back(ArgOp("ArgMin", false));
  defs->push_back(TopKOp());
  defs->push_back(CumSumOp());
}

}  // namespace kiln::ops
