// Data movement operators: Pad, Transpose, Concat, Split, Slice, Gather,
// GatherElements, Tile, DepthToSpace, SpaceToDepth. Kernels move bytes, so they
// cover every dtype; operands that decide shapes (pads, starts, repeats, ...)
// must be constants once shapes are bound (ConstantInts).
#include "compiler_core/frontend/ops/tensor_movement_ops.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/shape_inference.h"
#include "base/status_macros.h"

namespace kiln::ops {
namespace {

using TypesOr = absl::StatusOr<std::vector<TensorType>>;

// ---------------------------------------------------------------- Pad

struct PadPlan {
  std::vector<int64_t> begin, end;  // per axis of the input
};

absl::StatusOr<PadPlan> GetPadPlan(const Node& node, int64_t rank) {
  ASSIGN_OR_RETURN(std::vector<int64_t> pads, ConstantInts(node, 1, "pads"));
  std::vector<int64_t> axes;
  if (node.input(3) != nullptr) {
    ASSIGN_OR_RETURN(axes, ConstantInts(node, 3, "axes"));
    for (int64_t& a : axes) {
      ASSIGN_OR_RETURN(a, NormalizeAxis(a, rank, "axis"));
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  const size_t n = axes.size();
  if (pads.size() != 2 * n) {
    return absl::InvalidArgumentError(
        absl::StrCat("pads has ", pads.size(), " values, expected ", 2 * n, " (2 per padded axis)"));
  }
  PadPlan plan{std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 0)};
  std::set<int64_t> seen;
  for (size_t i = 0; i < n; ++i) {
    if (!seen.insert(axes[i]).second) {
      return absl::InvalidArgumentError(absl::StrCat("axis ", axes[i], " is repeated"));
    }
    plan.begin[axes[i]] = pads[i];
    plan.end[axes[i]] = pads[i + n];
  }
  return plan;
}

int64_t Reflect(int64_t i, int64_t d) {
  if (d == 1) return 0;
  const int64_t p = 2 * (d - 1);
  i = ((i % p) + p) % p;
  return i < d ? i : p - i;
}

OpDef PadOp() {
  OpDef def;
  def.op_type = "Pad";
  def.min_inputs = 2;
  def.max_inputs = 4;
  def.attrs = {{"mode", AttrKind::kString}};
  def.validate = [](const Node& node) -> absl::Status {
    std::string mode = node.GetString("mode", "constant");
    if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
      return absl::InvalidArgumentError(absl::StrCat("unsupported mode '", mode, "'"));
    }
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    const int64_t r = in[0]->rank();
    ASSIGN_OR_RETURN(PadPlan plan, GetPadPlan(node, r));
    const std::string mode = node.GetString("mode", "constant");
    std::vector<Dim> out = in[0]->dims;
    for (int64_t i = 0; i < r; ++i) {
      if (plan.begin[i] == 0 && plan.end[i] == 0) continue;
      const Dim& d = in[0]->dims[i];
      if (!d.is_static()) return SymbolicError(node, 0, static_cast<int>(i), d, "is padded");
      int64_t e = d.value + plan.begin[i] + plan.end[i];
      if (e < 0) {
        return absl::InvalidArgumentError(absl::StrCat("pads make axis ", i, " of ", in[0]->ToString(),
                                                       " negative (", e, ")"));
      }
      if (mode != "constant" && d.value == 0) {
        return absl::InvalidArgumentError(absl::StrCat("mode '", mode, "' cannot pad empty axis ", i));
      }
      out[i] = Dim::Static(e);
    }
    if (in.size() > 2 && in[2] != nullptr && in[2]->rank() > 1) {
      return absl::InvalidArgumentError("constant_value must be a scalar or one element");
    }
    return std::vector<TensorType>{MakeType(in[0]->dtype, std::move(out))};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const Tensor& x = *in[0];
    const int64_t r = x.rank();
    ASSIGN_OR_RETURN(PadPlan plan, GetPadPlan(node, r));
    const std::string mode = node.GetString("mode", "constant");
    // The fill element, converted to the data's dtype.
    Tensor fill(x.dtype(), {1});
    if (in.size() > 2 && in[2] != nullptr && in[2]->num_elements() > 0) {
      if (in[2]->dtype() == x.dtype()) {
        std::memcpy(fill.raw(), in[2]->raw(), DTypeSize(x.dtype()));
      } else {
        double v = ElementAsDouble(*in[2], 0);
        RETURN_IF_ERROR(DispatchDType(x.dtype(), [&](auto tag) -> absl::Status {
          using T = decltype(tag);
          fill.data<T>()[0] = static_cast<T>(v);
          return absl::OkStatus();
        }));
      }
    }
    const std::vector<int64_t>& xd = x.dims();
    const std::vector<int64_t> strides = RowMajorStrides(xd);
    MapElements(x, out[0], fill.raw(), [&](const std::vector<int64_t>& c) -> int64_t {
      int64_t s = 0;
      for (int64_t k = 0; k < r; ++k) {
        int64_t i = c[k] - plan.begin[k];
        if (i < 0 || i >= xd[k]) {
          if (mode == "constant") return -1;
          if (mode == "edge") i = std::clamp<int64_t>(i, 0, xd[k] - 1);
          else if (mode == "reflect") i = Reflect(i, xd[k]);
          else i = ((i % xd[k]) + xd[k]) % xd[k];  // wrap
        }
        s += i * strides[k];
      }
      return s;
    });
    return absl::OkStatus();
  };
  return def;
}

// ---------------------------------------------------------------- Transpose

absl::StatusOr<std::vector<int64_t>> Perm(const Node& node, int64_t rank) {
  std::vector<int64_t> perm;
  for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  perm = node.GetInts("perm", perm);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t i = 0; ok && i < rank; ++i) ok = sorted[i] == i;
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("perm [", absl::StrJoin(perm, ","), "] is not a permutation of rank ", rank));
  }
  return perm;
}

OpDef TransposeOp() {
  OpDef def;
  def.op_type = "Transpose";
  def.attrs = {{"perm", AttrKind::kInts}};
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    ASSIGN_OR_RETURN(std::vector<int64_t> perm, Perm(node, in[0]->rank()));
    std::vector<Dim> out;
    for (int64_t p : perm) out.push_back(in[0]->dims[p]);
    return std::vector<TensorType>{MakeType(in[0]->dtype, std::move(out))};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<int64_t> perm, Perm(node, in[0]->rank()));
    std::vector<int64_t> is = RowMajorStrides(in[0]->dims());
    MapElements(*in[0], out[0], nullptr, [&](const std::vector<int64_t>& c) {
      int64_t s = 0;
      for (size_t k = 0; k < c.size(); ++k) s += c[k] * is[perm[k]];
      return s;
    });
    return absl::OkStatus();
  };
  return def;
}

// ---------------------------------------------------------------- Concat

OpDef ConcatOp() {
  OpDef def;
  def.op_type = "Concat";
  def.min_inputs = 1;
  def.max_inputs = 1 << 20;
  def.attrs = {{"axis", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    if (!node.has_attr("axis")) return absl::InvalidArgumentError("attribute 'axis' is required");
    for (int i = 0; i < node.num_inputs(); ++i) {
      if (node.input(i) == nullptr) return absl::InvalidArgumentError(absl::StrCat("input ", i, " is omitted"));
    }
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    const int64_t r = in[0]->rank();
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 0), r, "axis"));
    std::vector<Dim> out = in[0]->dims;
    int64_t total = 0;
    for (int i = 0; i < static_cast<int>(in.size()); ++i) {
      const TensorType& t = *in[i];
      if (t.dtype != in[0]->dtype || t.rank() != r) {
        return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, i), "' is ", t.ToString(),
                                                       ", incompatible with ", in[0]->ToString()));
      }
      for (int64_t k = 0; k < r; ++k) {
        const Dim& d = t.dims[k];
        if (k == axis) {
          if (!d.is_static()) return SymbolicError(node, i, static_cast<int>(k), d, "is concatenated");
          total += d.value;
        } else if (!SameDim(d, out[k])) {
          if (d.is_static() && out[k].is_static()) {
            return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, i), "' is ",
                                                           t.ToString(), ", incompatible with ",
                                                           in[0]->ToString(), " on axis ", k));
          }
          return SymbolicError(node, d.is_static() ? 0 : i, static_cast<int>(k), d.is_static() ? out[k] : d,
                               "must equal the other inputs' extent");
        }
      }
    }
    out[axis] = Dim::Static(total);
    return std::vector<TensorType>{MakeType(in[0]->dtype, std::move(out))};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const std::vector<int64_t>& od = out[0].dims();
    const int64_t axis = node.GetInt("axis", 0) < 0 ? node.GetInt("axis", 0) + out[0].rank() : node.GetInt("axis", 0);
    const int64_t es = DTypeSize(out[0].dtype());
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= od[k];
    for (int64_t k = axis + 1; k < out[0].rank(); ++k) inner *= od[k];
    char* dst = static_cast<char*>(out[0].raw());
    for (int64_t o = 0; o < outer; ++o) {
      for (const Tensor* t : in) {
        const int64_t chunk = t->dims()[axis] * inner * es;
        std::memcpy(dst, static_cast<const char*>(t->raw()) + o * chunk, chunk);
        dst += chunk;
      }
    }
    return absl::OkStatus();
  };
  return def;
}

// ---------------------------------------------------------------- Split

// Sizes of all pieces along the axis of extent `dim`.
absl::StatusOr<std::vector<int64_t>> SplitSizes(const Node& node, int64_t dim) {
  const int64_t n = node.GetInt(kSplitNumOutputsAttr, 1);
  if (node.input(1) != nullptr) {
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ConstantInts(node, 1, "split"));
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0) return absl::InvalidArgumentError(absl::StrCat("split has negative size ", s));
      sum += s;
    }
    if (static_cast<int64_t>(sizes.size()) != n || sum != dim) {
      return absl::InvalidArgumentError(absl::StrCat("split [", absl::StrJoin(sizes, ","), "] does not cut extent ",
                                                     dim, " into ", n, " pieces"));
    }
    return sizes;
  }
  const int64_t chunk = (dim + n - 1) / n;
  if (chunk * (n - 1) > dim) {
    return absl::InvalidArgumentError(absl::StrCat("extent ", dim, " cannot be split into ", n, " pieces"));
  }
  std::vector<int64_t> sizes(n, chunk);
  sizes.back() = dim - chunk * (n - 1);
  return sizes;
}

OpDef SplitOp() {
  OpDef def;
  def.op_type = "Split";
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.attrs = {{"axis", AttrKind::kInt}, {kSplitOutputIndexAttr, AttrKind::kInt},
               {kSplitNumOutputsAttr, AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    const int64_t n = node.GetInt(kSplitNumOutputsAttr, 0);
    const int64_t k = node.GetInt(kSplitOutputIndexAttr, -1);
    if (n < 1 || k < 0 || k >= n) {
      return absl::InvalidArgumentError(absl::StrCat("output index ", k, " of ", n, " is invalid"));
    }
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 0), in[0]->rank(), "axis"));
    const Dim& d = in[0]->dims[axis];
    if (!d.is_static()) return SymbolicError(node, 0, static_cast<int>(axis), d, "is split");
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, SplitSizes(node, d.value));
    std::vector<Dim> out = in[0]->dims;
    out[axis] = Dim::Static(sizes[node.GetInt(kSplitOutputIndexAttr, 0)]);
    return std::vector<TensorType>{MakeType(in[0]->dtype, std::move(out))};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const int64_t axis = node.GetInt("axis", 0) < 0 ? node.GetInt("axis", 0) + in[0]->rank() : node.GetInt("axis", 0);
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, SplitSizes(node, in[0]->dims()[axis]));
    int64_t offset = 0;
    for (int64_t k = 0; k < node.GetInt(kSplitOutputIndexAttr, 0); ++k) offset += sizes[k];
    std::vector<int64_t> is = RowMajorStrides(in[0]->dims());
    MapElements(*in[0], out[0], nullptr, [&](const std::vector<int64_t>& c) {
      int64_t s = 0;
      for (size_t k = 0; k < c.size(); ++k) s += (c[k] + (static_cast<int64_t>(k) == axis ? offset : 0)) * is[k];
      return s;
    });
    return absl::OkStatus();
  };
  return def;
}

// ---------------------------------------------------------------- Slice

struct SlicePlan {
  std::vector<int64_t> start, step, count;  // per input axis
};

// ONNX Slice semantics: negative indices count from the end, then clamp.
absl::StatusOr<SlicePlan> GetSlicePlan(const Node& node, const std::vector<Dim>& dims, int64_t rank) {
  ASSIGN_OR_RETURN(std::vector<int64_t> starts, ConstantInts(node, 1, "starts"));
  ASSIGN_OR_RETURN(std::vector<int64_t> ends, ConstantInts(node, 2, "ends"));
  if (starts.size() != ends.size()) {
    return absl::InvalidArgumentError(absl::StrCat("starts has ", starts.size(), " values but ends has ", ends.size()));
  }
  const size_t n = starts.size();
  std::vector<int64_t> axes, steps(n, 1);
  if (node.input(3) != nullptr) {
    ASSIGN_OR_RETURN(axes, ConstantInts(node, 3, "axes"));
  } else {
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (node.input(4) != nullptr) {
    ASSIGN_OR_RETURN(steps, ConstantInts(node, 4, "steps"));
  }
  if (axes.size() != n || steps.size() != n) {
    return absl::InvalidArgumentError("starts, ends, axes and steps must have the same length");
  }
  SlicePlan plan;
  plan.start.assign(rank, 0);
  plan.step.assign(rank, 1);
  plan.count.assign(rank, -1);  // -1: the whole axis
  std::set<int64_t> seen;
  for (size_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(axes[i], rank, "axis"));
    if (!seen.insert(a).second) return absl::InvalidArgumentError(absl::StrCat("axis ", axes[i], " is repeated"));
    if (steps[i] == 0) return absl::InvalidArgumentError("step must not be 0");
    if (!dims[a].is_static()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, 0), "' dimension ", a,
                                                     " is symbolic ('", DimString(dims[a]),
                                                     "') but is sliced: bind it to a static extent (--shape)"));
    }
    const int64_t d = dims[a].value;
    int64_t s = starts[i], e = ends[i], st = steps[i];
    if (s < 0) s = s < std::numeric_limits<int64_t>::min() + d ? -1 : s + d;
    if (e < 0) e = e < std::numeric_limits<int64_t>::min() + d ? -1 : e + d;
    int64_t count;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      count = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      count = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    plan.start[a] = s;
    plan.step[a] = st;
    plan.count[a] = d == 0 ? 0 : count;
  }
  return plan;
}

OpDef SliceOp() {
  OpDef def;
  def.op_type = "Slice";
  def.min_inputs = 3;
  def.max_inputs = 5;
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    ASSIGN_OR_RETURN(SlicePlan plan, GetSlicePlan(node, in[0]->dims, in[0]->rank()));
    std::vector<Dim> out = in[0]->dims;
    for (size_t a = 0; a < out.size(); ++a) {
      if (plan.count[a] >= 0) out[a] = Dim::Static(plan.count[a]);
    }
    return std::vector<TensorType>{MakeType(in[0]->dtype, std::move(out))};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    TensorType t = TensorType::Static(in[0]->dtype(), in[0]->dims());
    ASSIGN_OR_RETURN(SlicePlan plan, GetSlicePlan(node, t.dims, in[0]->rank()));
    std::vector<int64_t> is = RowMajorStrides(in[0]->dims());
    MapElements(*in[0], out[0], nullptr, [&](const std::vector<int64_t>& c) {
      int64_t s = 0;
      for (size_t k = 0; k < c.size(); ++k) s += (plan.start[k] + c[k] * plan.step[k]) * is[k];
      return s;
    });
    return absl::OkStatus();
  };
  return def;
}

// ---------------------------------------------------------------- Gather

absl::Status CheckIndices(const Node& node, const TensorType& t, int input) {
  if (t.dtype != DType::kInt64 && t.dtype != DType::kInt32) {
    return absl::InvalidArgumentError(absl::StrCat("indices '", InputName(node, input), "' must be i64 or i32, got ",
                                                   DTypeName(t.dtype)));
  }
  return absl::OkStatus();
}

// Index k of `indices` normalised against extent `n`, or an error.
absl::StatusOr<int64_t> IndexAt(const Tensor& indices, int64_t k, int64_t n) {
  int64_t i = ElementAsInt(indices, k);
  if (i < -n || i >= n) {
    return absl::InvalidArgumentError(absl::StrCat("index ", i, " is out of range for extent ", n));
  }
  return i < 0 ? i + n : i;
}

OpDef GatherOp() {
  OpDef def;
  def.op_type = "Gather";
  def.min_inputs = def.max_inputs = 2;
  def.attrs = {{"axis", AttrKind::kInt}};
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    RETURN_IF_ERROR(CheckIndices(node, *in[1], 1));
    if (in[0]->rank() < 1) return absl::InvalidArgumentError("data must have rank >= 1");
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 0), in[0]->rank(), "axis"));
    std::vector<Dim> out(in[0]->dims.begin(), in[0]->dims.begin() + axis);
    out.insert(out.end(), in[1]->dims.begin(), in[1]->dims.end());
    out.insert(out.end(), in[0]->dims.begin() + axis + 1, in[0]->dims.end());
    return std::vector<TensorType>{MakeType(in[0]->dtype, std::move(out))};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const Tensor& x = *in[0];
    const Tensor& idx = *in[1];
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 0), x.rank(), "axis"));
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= x.dims()[k];
    for (int64_t k = axis + 1; k < x.rank(); ++k) inner *= x.dims()[k];
    const int64_t n = x.dims()[axis];
    const int64_t es = DTypeSize(x.dtype());
    const int64_t m = idx.num_elements();
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(out[0].raw());
    for (int64_t j = 0; j < m; ++j) {
      ASSIGN_OR_RETURN(int64_t i, IndexAt(idx, j, n));
      for (int64_t o = 0; o < outer; ++o) {
        std::memcpy(dst + ((o * m + j) * inner) * es, src + ((o * n + i) * inner) * es, inner * es);
      }
    }
    return absl::OkStatus();
  };
  return def;
}

OpDef GatherElementsOp() {
  OpDef def;
  def.op_type = "GatherElements";
  def.min_inputs = def.max_inputs = 2;
  def.attrs = {{"axis", AttrKind::kInt}};
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    RETURN_IF_ERROR(CheckIndices(node, *in[1], 1));
    if (in[0]->rank() != in[1]->rank() || in[0]->rank() < 1) {
      return absl::InvalidArgumentError(absl::StrCat("data ", in[0]->ToString(), " and indices ",
                                                     in[1]->ToString(), " must have the same rank >= 1"));
    }
    RETURN_IF_ERROR(NormalizeAxis(node.GetInt("axis", 0), in[0]->rank(), "axis").status());
    return std::vector<TensorType>{MakeType(in[0]->dtype, in[1]->dims)};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const Tensor& x = *in[0];
    const Tensor& idx = *in[1];
    ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node.GetInt("axis", 0), x.rank(), "axis"));
    for (int64_t k = 0; k < x.rank(); ++k) {
      if (k != axis && idx.dims()[k] > x.dims()[k]) {
        return absl::InvalidArgumentError(absl::StrCat("indices extent ", idx.dims()[k], " on axis ", k,
                                                       " exceeds the data's ", x.dims()[k]));
      }
    }
    std::vector<int64_t> is = RowMajorStrides(x.dims());
    absl::Status status;
    int64_t linear = 0;
    MapElements(x, out[0], nullptr, [&](const std::vector<int64_t>& c) -> int64_t {
      int64_t s = 0;
      for (size_t k = 0; k < c.size(); ++k) {
        int64_t ck = c[k];
        if (static_cast<int64_t>(k) == axis) {
          auto i = IndexAt(idx, linear, x.dims()[axis]);
          if (!i.ok()) {
            status.Update(i.status());
            ck = 0;
          } else {
            ck = *i;
          }
        }
        s += ck * is[k];
      }
      ++linear;
      return s;
    });
    return status;
  };
  return def;
}

// ---------------------------------------------------------------- Tile

OpDef TileOp() {
  OpDef def;
  def.op_type = "Tile";
  def.min_inputs = def.max_inputs = 2;
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    ASSIGN_OR_RETURN(std::vector<int64_t> reps, ConstantInts(node, 1, "repeats"));
    if (static_cast<int64_t>(reps.size()) != in[0]->rank()) {
      return absl::InvalidArgumentError(absl::StrCat("repeats has ", reps.size(), " values for rank ", in[0]->rank()));
    }
    std::vector<Dim> out = in[0]->dims;
    for (size_t k = 0; k < reps.size(); ++k) {
      if (reps[k] < 0) return absl::InvalidArgumentError(absl::StrCat("repeats[", k, "] is negative"));
      if (reps[k] == 1) continue;
      if (!out[k].is_static()) return SymbolicError(node, 0, static_cast<int>(k), out[k], "is tiled");
      out[k] = Dim::Static(out[k].value * reps[k]);
    }
    return std::vector<TensorType>{MakeType(in[0]->dtype, std::move(out))};
  };
  def.eval = [](const Node&, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const std::vector<int64_t>& xd = in[0]->dims();
    std::vector<int64_t> is = RowMajorStrides(xd);
    MapElements(*in[0], out[0], nullptr, [&](const std::vector<int64_t>& c) {
      int64_t s = 0;
      for (size_t k = 0; k < c.size(); ++k) s += (c[k] % xd[k]) * is[k];
      return s;
    });
    return absl::OkStatus();
  };
  return def;
}

// ---------------------------------------------------------------- DepthToSpace / SpaceToDepth

absl::StatusOr<int64_t> BlockSize(const Node& node) {
  if (!node.has_attr("blocksize")) return absl::InvalidArgumentError("attribute 'blocksize' is required");
  int64_t b = node.GetInt("blocksize", 0);
  if (b < 1) return absl::InvalidArgumentError(absl::StrCat("blocksize ", b, " must be >= 1"));
  return b;
}

OpDef DepthToSpaceOp() {
  OpDef def;
  def.op_type = "DepthToSpace";
  def.attrs = {{"blocksize", AttrKind::kInt}, {"mode", AttrKind::kString}};
  def.validate = [](const Node& node) -> absl::Status {
    RETURN_IF_ERROR(BlockSize(node).status());
    std::string mode = node.GetString("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") return absl::InvalidArgumentError(absl::StrCat("unsupported mode '", mode, "'"));
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    if (in[0]->rank() != 4) return absl::InvalidArgumentError(absl::StrCat("input must be 4-D, got ", in[0]->ToString()));
    ASSIGN_OR_RETURN(int64_t b, BlockSize(node));
    ASSIGN_OR_RETURN(std::vector<int64_t> d, StaticDimsOf(node, 0, *in[0], "is rearranged"));
    if (d[1] % (b * b) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("channels ", d[1], " are not divisible by blocksize^2 ", b * b));
    }
    return std::vector<TensorType>{TensorType::Static(in[0]->dtype, {d[0], d[1] / (b * b), d[2] * b, d[3] * b})};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t b, BlockSize(node));
    const bool dcr = node.GetString("mode", "DCR") == "DCR";
    const std::vector<int64_t>& xd = in[0]->dims();
    const int64_t oc = xd[1] / (b * b);
    std::vector<int64_t> is = RowMajorStrides(xd);
    MapElements(*in[0], out[0], nullptr, [&](const std::vector<int64_t>& c) {
      int64_t bh = c[2] % b, bw = c[3] % b;
      int64_t ic = dcr ? (bh * b + bw) * oc + c[1] : c[1] * b * b + bh * b + bw;
      return c[0] * is[0] + ic * is[1] + (c[2] / b) * is[2] + (c[3] / b) * is[3];
    });
    return absl::OkStatus();
  };
  return def;
}

OpDef SpaceToDepthOp() {
  OpDef def;
  def.op_type = "SpaceToDepth";
  def.attrs = {{"blocksize", AttrKind::kInt}};
  def.validate = [](const Node& node) { return BlockSize(node).status(); };
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    if (in[0]->rank() != 4) return absl::InvalidArgumentError(absl::StrCat("input must be 4-D, got ", in[0]->ToString()));
    ASSIGN_OR_RETURN(int64_t b, BlockSize(node));
    ASSIGN_OR_RETURN(std::vector<int64_t> d, StaticDimsOf(node, 0, *in[0], "is rearranged"));
    if (d[2] % b != 0 || d[3] % b != 0) {
      return absl::InvalidArgumentError(absl::StrCat("spatial extents ", d[2], "x", d[3],
                                                     " are not divisible by blocksize ", b));
    }
    return std::vector<TensorType>{TensorType::Static(in[0]->dtype, {d[0], d[1] * b * b, d[2] / b, d[3] / b})};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t b, BlockSize(node));
    const std::vector<int64_t>& xd = in[0]->dims();
    std::vector<int64_t> is = RowMajorStrides(xd);
    MapElements(*in[0], out[0], nullptr, [&](const std::vector<int64_t>& c) {
      int64_t block = c[1] / xd[1], ch = c[1] % xd[1];
      int64_t bh = block / b, bw = block % b;
      return c[0] * is[0] + ch * is[1] + (c[2] * b + bh) * is[2] + (c[3] * b + bw) * is[3];
    });
    return absl::OkStatus();
  };
  return def;
}

}  // namespace

void RegisterTensorMovementOps(std::vector<OpDef>* defs) {
  defs->push_back(PadOp());
  defs->push_back(TransposeOp());
  defs->push_back(ConcatOp());
  defs->push_back(SplitOp());
  defs->push_back(SliceOp());
  defs->push_back(GatherOp());
  defs->push_back(GatherElementsOp());
  defs->push_back(TileOp());
  defs->push_back(DepthToSpaceOp());
  defs->push_back(SpaceToDepthOp());
}

}  // namespace kiln::ops
