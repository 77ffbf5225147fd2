// Shared helpers of the operator definitions.
#include "compiler_core/ops/op_helpers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

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

}  // namespace kiln::ops
