// Index operators: outputs computed from positions along an axis rather than
// element by element (codegen/loop_ir/lower_index.cc): Gather, GatherElements,
// DepthToSpace, SpaceToDepth, Split, Trilu, ArgMax/ArgMin and CumSum.
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
#include "compiler_core/frontend/ops/index_ops.h"

namespace kiln::ops {

absl::StatusOr<std::vector<int64_t>> SplitSizes(const Node& node, int64_t dim) {
  const int64_t n = node.GetInt(kSplitNumOutputsAttr, 1);
  if (node.input(1) != nullptr) {
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ConstantInts(node, 1, "split"));
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0) return absl::InvalidArgumentError(absl::StrCat("split has negative size ", s));
      // Compared before adding: a size past what is left of the extent cannot fit (nor overflow the sum).
      if (s > dim - sum) {
        return absl::InvalidArgumentError(
            absl::StrCat("split [", absl::StrJoin(sizes, ","), "] is longer than extent ", dim));
      }
      sum += s;
    }
    if (static_cast<int64_t>(sizes.size()) != n || sum != dim) {
      return absl::InvalidArgumentError(absl::StrCat("split [", absl::StrJoin(sizes, ","), "] does not cut extent ",
                                                     dim, " into ", n, " pieces"));
    }
    return sizes;
  }
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("split into ", n, " pieces"));
  const int64_t chunk = dim / n + (dim % n != 0 ? 1 : 0);
  // n > dim + 1 would leave more than one empty piece (and n may be any attribute value).
  if (n - 1 > dim || chunk * (n - 1) > dim) {
    return absl::InvalidArgumentError(absl::StrCat("extent ", dim, " cannot be split into ", n, " pieces"));
  }
  std::vector<int64_t> sizes(n, chunk);
  sizes.back() = dim - chunk * (n - 1);
  return sizes;
}

namespace {

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

// GatherND: the last axis of `indices` (length k) addresses data's axes
// [b, b + k) after the b = batch_dims leading axes both share; the output is
// indices.shape[:-1] + data.shape[b + k:].
OpDef GatherNDOp() {
  OpDef def;
  def.op_type = "GatherND";
  def.min_inputs = def.max_inputs = 2;
  def.attrs = {{"batch_dims", AttrKind::kInt}};
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    RETURN_IF_ERROR(CheckIndices(node, *in[1], 1));
    const int64_t r = in[0]->rank(), q = in[1]->rank(), b = node.GetInt("batch_dims", 0);
    if (r < 1 || q < 1) return absl::InvalidArgumentError("data and indices must have rank >= 1");
    if (b < 0 || b >= std::min(r, q)) {
      return absl::InvalidArgumentError(absl::StrCat("batch_dims ", b, " must be in [0, ", std::min(r, q), ")"));
    }
    const Dim& last = in[1]->dims[q - 1];
    if (!last.is_static()) return absl::InvalidArgumentError("the last extent of indices must be static");
    const int64_t k = last.value;
    if (k < 1 || k > r - b) {
      return absl::InvalidArgumentError(absl::StrCat("indices' last extent ", k, " must be in [1, ", r - b, "]"));
    }
    for (int64_t d = 0; d < b; ++d) {
      const Dim &x = in[0]->dims[d], &i = in[1]->dims[d];
      if (x.is_static() && i.is_static() && x.value != i.value) {
        return absl::InvalidArgumentError(absl::StrCat("batch axis ", d, ": data has ", x.value, ", indices ", i.value));
      }
    }
    std::vector<Dim> out(in[1]->dims.begin(), in[1]->dims.end() - 1);
    out.insert(out.end(), in[0]->dims.begin() + b + k, in[0]->dims.end());
    return std::vector<TensorType>{MakeType(in[0]->dtype, std::move(out))};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const Tensor& x = *in[0];
    const Tensor& idx = *in[1];
    const int64_t b = node.GetInt("batch_dims", 0), q = idx.rank(), k = idx.dims()[q - 1];
    int64_t batches = 1, per_batch = 1, slice = 1;
    for (int64_t d = 0; d < b; ++d) batches *= x.dims()[d];
    for (int64_t d = b; d < q - 1; ++d) per_batch *= idx.dims()[d];
    for (int64_t d = b + k; d < x.rank(); ++d) slice *= x.dims()[d];
    const std::vector<int64_t> strides = RowMajorStrides(x.dims());
    const int64_t es = DTypeSize(x.dtype());
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(out[0].raw());
    for (int64_t bi = 0; bi < batches; ++bi) {
      for (int64_t t = 0; t < per_batch; ++t) {
        const int64_t tuple = (bi * per_batch + t) * k;
        int64_t offset = bi * (b > 0 ? strides[b - 1] : 0);
        for (int64_t j = 0; j < k; ++j) {
          ASSIGN_OR_RETURN(int64_t i, IndexAt(idx, tuple + j, x.dims()[b + j]));
          offset += i * strides[b + j];
        }
        std::memcpy(dst + (bi * per_batch + t) * slice * es, src + offset * es, slice * es);
      }
    }
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

// ---------------------------------------------------------------- Split

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

// ---------------------------------------------------------------------------
// Trilu: keeps the upper (upper=1: j - i >= k) or lower (j - i <= k) triangle
// of the last two axes, zeroing the rest; k from the optional scalar input.

OpDef TriluOp() {
  OpDef def;
  def.op_type = "Trilu";
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.attrs = {{"upper", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    int64_t u = node.GetInt("upper", 1);
    if (u != 0 && u != 1) return absl::InvalidArgumentError(absl::StrCat("attribute 'upper' must be 0 or 1, got ", u));
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    if (in[0]->rank() < 2) {
      return absl::InvalidArgumentError(absl::StrCat("input must have rank >= 2, got ", in[0]->ToString()));
    }
    if (DTypeSize(in[0]->dtype) == 0) return absl::InvalidArgumentError("input has an unsupported dtype");
    if (const TensorType* k = in.size() > 1 ? in[1] : nullptr) {
      if (k->dtype != DType::kInt64 || NumElements(k->StaticDims()) != 1 || !k->IsStatic()) {
        return absl::InvalidArgumentError(absl::StrCat("input 'k' must be an i64 scalar, got ", k->ToString()));
      }
    }
    return std::vector<TensorType>{*in[0]};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const int64_t k = in.size() > 1 && in[1] ? in[1]->data<int64_t>()[0] : 0;
    const bool upper = node.GetInt("upper", 1) != 0;
    const std::vector<int64_t>& d = in[0]->dims();
    const int64_t rows = d[d.size() - 2], cols = d[d.size() - 1];
    const int64_t mats = rows * cols == 0 ? 0 : in[0]->num_elements() / (rows * cols);
    const int64_t es = DTypeSize(in[0]->dtype());
    const char* x = static_cast<const char*>(in[0]->raw());
    char* y = static_cast<char*>(out[0].raw());
    for (int64_t m = 0; m < mats; ++m) {
      for (int64_t i = 0; i < rows; ++i) {
        // Kept columns [lo, hi).
        int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
        int64_t hi = upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
        if (hi <= lo) continue;
        const int64_t off = ((m * rows + i) * cols + lo) * es;
        std::memcpy(y + off, x + off, (hi - lo) * es);
      }
    }
    return absl::OkStatus();
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

void RegisterIndexOps(std::vector<OpDef>* defs) {
  defs->push_back(ReadsOutputSizedInput0(WithClass(OpClass::kDataMovement, GatherOp())));
  defs->push_back(ReadsOutputSizedInput0(WithClass(OpClass::kDataMovement, GatherElementsOp())));
  defs->push_back(ReadsOutputSizedInput0(WithClass(OpClass::kDataMovement, GatherNDOp())));
  defs->push_back(WithClass(OpClass::kDataMovement, DepthToSpaceOp()));
  defs->push_back(WithClass(OpClass::kDataMovement, SpaceToDepthOp()));
  defs->push_back(WithClass(OpClass::kDataMovement, SplitOp()));
  defs->push_back(WithClass(OpClass::kOpaque, TriluOp()));
  defs->push_back(WithClass(OpClass::kReduction, ArgOp("ArgMax", true)));
  defs->push_back(WithClass(OpClass::kReduction, ArgOp("ArgMin", false)));
  defs->push_back(WithClass(OpClass::kOpaque, CumSumOp()));
}

}  // namespace kiln::ops
