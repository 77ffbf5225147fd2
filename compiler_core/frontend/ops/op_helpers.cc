// Shared helpers of the operator definitions.
#include "compiler_core/frontend/ops/op_helpers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/ir/float16.h"

namespace kiln::ops {

TensorType MakeType(DType dtype, std::vector<Dim> dims) {
  TensorType t;
  t.dtype = dtype;
  t.dims = std::move(dims);
  t.known = true;
  return t;
}

std::string InputName(const Node& node, int i) {
  Value* v = node.input(i);
  return v ? v->name() : std::string("<omitted>");
}

std::string DimString(const Dim& d) {
  if (d.is_static()) return absl::StrCat(d.value);
  return d.symbol.empty() ? std::string("?") : d.symbol;
}

// Two dims that are certainly equal: same static extent or same named symbol.
bool SameDim(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return a.value == b.value;
  return !a.is_static() && !b.is_static() && !a.symbol.empty() && a.symbol == b.symbol;
}

bool IsOne(const Dim& d) { return d.is_static() && d.value == 1; }

absl::Status SymbolicError(const Node& node, int input, int axis, const Dim& d, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "input '", InputName(node, input), "' dimension ", axis, " is symbolic ('", DimString(d),
      "') but ", why, ": bind it to a static extent (--shape)"));
}

absl::Status RequireF32(const Node& node, const InputTypes& in) {
  for (int i = 0; i < static_cast<int>(in.size()); ++i) {
    if (in[i] && in[i]->dtype != DType::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, i), "' has dtype ",
                                                     DTypeName(in[i]->dtype), "; only f32 is supported"));
    }
  }
  return absl::OkStatus();
}

// Numpy broadcast of the (symbolic) shapes of inputs ia and ib. `what` names the
// operands in the mismatch message.
absl::StatusOr<std::vector<Dim>> BroadcastDims(const Node& node, int ia, const std::vector<Dim>& a,
                                               int ib, const std::vector<Dim>& b,
                                               const std::string& mismatch) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<Dim> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Position from the right.
    bool has_a = i < a.size(), has_b = i < b.size();
    int axis_a = static_cast<int>(a.size()) - 1 - static_cast<int>(i);
    int axis_b = static_cast<int>(b.size()) - 1 - static_cast<int>(i);
    Dim& o = out[rank - 1 - i];
    if (!has_a) { o = b[axis_b]; continue; }
    if (!has_b) { o = a[axis_a]; continue; }
    const Dim& da = a[axis_a];
    const Dim& db = b[axis_b];
    if (SameDim(da, db)) { o = da; continue; }
    if (IsOne(da)) { o = db; continue; }
    if (IsOne(db)) { o = da; continue; }
    if (da.is_static() && db.is_static()) return absl::InvalidArgumentError(mismatch);
    if (!da.is_static()) {
      return SymbolicError(node, ia, axis_a, da, absl::StrCat("is broadcast against ", DimString(db)));
    }
    return SymbolicError(node, ib, axis_b, db, absl::StrCat("is broadcast against ", DimString(da)));
  }
  return out;
}

// Row-major strides of `dims` aligned to an output of rank `out_rank`, with 0
// for broadcast (size-1 or missing) axes.
std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& dims, size_t out_rank) {
  std::vector<int64_t> strides(out_rank, 0);
  int64_t s = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    size_t o = out_rank - dims.size() + i;
    strides[o] = dims[i] == 1 ? 0 : s;
    s *= dims[i];
  }
  return strides;
}

// Offset in a broadcast operand of the output element with linear index `linear`.
int64_t BroadcastOffset(int64_t linear, const std::vector<int64_t>& out_dims,
                        const std::vector<int64_t>& strides) {
  int64_t offset = 0;
  for (int i = static_cast<int>(out_dims.size()) - 1; i >= 0; --i) {
    int64_t coord = linear % out_dims[i];
    linear /= out_dims[i];
    offset += coord * strides[i];
  }
  return offset;
}

absl::StatusOr<int64_t> ResolveAxis(int64_t axis, int64_t rank, absl::string_view what) {
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", axis, " but the input has rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

absl::StatusOr<std::vector<int64_t>> ConstantIntInput(const Node& node, int i) {
  Value* v = node.input(i);
  if (v == nullptr || !v->is_constant()) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " '", InputName(node, i),
                                                   "' must be a constant (initializer): the output shape depends on it"));
  }
  const Tensor& t = v->constant();
  std::vector<int64_t> out;
  if (t.dtype() == DType::kInt64) {
    out.assign(t.data<int64_t>(), t.data<int64_t>() + t.num_elements());
  } else if (t.dtype() == DType::kInt32) {
    out.assign(t.data<int32_t>(), t.data<int32_t>() + t.num_elements());
  } else {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " '", v->name(), "' must be i64 or i32, got ",
                                                   DTypeName(t.dtype())));
  }
  return out;
}

// --- Shape-operand helpers ---

namespace {

// Why `v` is not a constant: the symbolic dimension or run-time input it
// depends on (searched upstream through at most 256 nodes).
std::string WhyNotConstant(const Value* v) {
  std::deque<const Value*> queue = {v};
  std::set<const Value*> seen = {v};
  std::string graph_input;
  for (int steps = 0; !queue.empty() && steps < 256; ++steps) {
    const Value* cur = queue.front();
    queue.pop_front();
    const Node* p = cur->producer();
    if (p == nullptr) {
      if (cur->is_graph_input() && graph_input.empty()) graph_input = cur->name();
      continue;
    }
    if ((p->op_type() == "Shape" || p->op_type() == "Size") && p->input(0) != nullptr) {
      const TensorType& t = p->input(0)->type();
      for (size_t d = 0; d < t.dims.size(); ++d) {
        if (!t.dims[d].is_static()) {
          return absl::StrCat("it depends on input '", p->input(0)->name(), "' dimension ", d,
                              ", which is symbolic ('", DimString(t.dims[d]),
                              "'): bind it to a static extent (--shape)");
        }
      }
    }
    for (const Value* in : p->inputs()) {
      if (in != nullptr && seen.insert(in).second) queue.push_back(in);
    }
  }
  if (!graph_input.empty()) {
    return absl::StrCat("it depends on the values of graph input '", graph_input,
                        "', which are known only at run time");
  }
  return "it is computed at run time";
}

absl::StatusOr<const Tensor*> ConstantInput(const Node& node, int i, absl::string_view what) {
  const Value* v = node.input(i);
  if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, " (input ", i, ") is omitted"));
  if (!v->is_constant()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", v->name(), "' must be a constant but ",
                                                   WhyNotConstant(v)));
  }
  return &v->constant();
}

}  // namespace

double ElementAsDouble(const Tensor& t, int64_t k) {
  double out = 0;
  (void)DispatchDType(t.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    out = static_cast<double>(t.data<T>()[k]);
    return absl::OkStatus();
  });
  return out;
}

int64_t ElementAsInt(const Tensor& t, int64_t k) {
  if (t.dtype() == DType::kInt64) return t.data<int64_t>()[k];
  if (t.dtype() == DType::kInt32) return t.data<int32_t>()[k];
  return static_cast<int64_t>(ElementAsDouble(t, k));
}

absl::StatusOr<std::vector<int64_t>> ConstantInts(const Node& node, int i, absl::string_view what) {
  ASSIGN_OR_RETURN(const Tensor* t, ConstantInput(node, i, what));
  if (t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", node.input(i)->name(), "' must be i64 or i32, got ", DTypeName(t->dtype())));
  }
  if (t->rank() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", node.input(i)->name(), "' must be 1-D, got rank ", t->rank()));
  }
  std::vector<int64_t> out(t->num_elements());
  for (int64_t k = 0; k < t->num_elements(); ++k) out[k] = ElementAsInt(*t, k);
  return out;
}

absl::StatusOr<double> ConstantScalar(const Node& node, int i, absl::string_view what) {
  ASSIGN_OR_RETURN(const Tensor* t, ConstantInput(node, i, what));
  if (t->num_elements() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", node.input(i)->name(),
                                                   "' must hold one element, got ", t->num_elements()));
  }
  if (IsNarrowFloat(t->dtype()) || t->dtype() == DType::kUnknown) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", node.input(i)->name(), "' has unsupported dtype ", DTypeName(t->dtype())));
  }
  return ElementAsDouble(*t, 0);
}

absl::StatusOr<std::vector<Dim>> AlignedAtBroadcastAxis(const Node& node, size_t rank0, std::vector<Dim> dims1) {
  if (!node.has_attr(kBroadcastAxisAttr)) return dims1;
  const int64_t rank = static_cast<int64_t>(rank0);
  int64_t axis = node.GetInt(kBroadcastAxisAttr, 0);
  if (axis < 0) axis += rank;
  const int64_t pad = rank - axis - static_cast<int64_t>(dims1.size());
  if (axis < 0 || pad < 0) {
    return absl::InvalidArgumentError(absl::StrCat("legacy broadcast axis ", node.GetInt(kBroadcastAxisAttr, 0),
                                                   " does not fit input 1 of rank ", dims1.size(),
                                                   " into input 0 of rank ", rank));
  }
  dims1.insert(dims1.end(), pad, Dim::Static(1));
  return dims1;
}

absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, absl::string_view what) {
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", axis, " is out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

absl::StatusOr<std::vector<int64_t>> StaticDimsOf(const Node& node, int i, const TensorType& t,
                                                  absl::string_view why) {
  for (size_t d = 0; d < t.dims.size(); ++d) {
    if (!t.dims[d].is_static()) return SymbolicError(node, i, static_cast<int>(d), t.dims[d], why);
  }
  return t.StaticDims();
}

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

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

AxisSplit SplitAt(const std::vector<int64_t>& dims, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    if (i < axis) s.outer *= dims[i];
    else if (i == axis) s.n = dims[i];
    else s.inner *= dims[i];
  }
  return s;
}

absl::Status RequireVector(const Node& node, const InputTypes& in, int i, const TensorType& x) {
  const TensorType* t = in[i];
  if (t == nullptr) return absl::OkStatus();
  if (t->rank() != 1 || !SameDim(t->dims[0], x.dims[1])) {
    return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, i), "' ", t->ToString(),
                                                   " must be [C] for input ", x.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace kiln::ops
