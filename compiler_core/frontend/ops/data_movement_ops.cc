// Data-movement operators: every output element is some input element (or a
// pad value), so code generation turns them into index arithmetic
// (codegen/loop_ir/lower_data_movement.cc): Transpose, Reshape, Flatten,
// Squeeze, Unsqueeze, Identity, Slice, Concat, Pad, Tile and Expand.
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

// Copies the input's bytes into the output (same element count): every view op.
absl::Status CopyBytes(const Node&, const InputTensors& in, std::vector<Tensor>& out) {
  std::memcpy(out[0].raw(), in[0]->raw(), static_cast<size_t>(out[0].size_bytes()));
  return absl::OkStatus();
}

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
      int64_t e = 0;
      if (__builtin_add_overflow(d.value, plan.begin[i], &e) || __builtin_add_overflow(e, plan.end[i], &e) ||
          e > kMaxTensorElements) {
        return absl::InvalidArgumentError(absl::StrCat("pads (", plan.begin[i], ", ", plan.end[i], ") make axis ", i,
                                                       " of ", in[0]->ToString(), " too large"));
      }
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
      int64_t tiled = 0;
      if (__builtin_mul_overflow(out[k].value, reps[k], &tiled) || tiled > kMaxTensorElements) {
        return absl::InvalidArgumentError(
            absl::StrCat("repeats[", k, "] = ", reps[k], " makes dim ", k, " (", out[k].value, ") too large"));
      }
      out[k] = Dim::Static(tiled);
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

OpDef ReshapeOp() {
  OpDef def;
  def.op_type = "Reshape";
  def.min_inputs = def.max_inputs = 2;
  def.attrs = {{"allowzero", AttrKind::kInt}};
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    ASSIGN_OR_RETURN(std::vector<int64_t> shape, ConstantInts(node, 1, "shape"));
    const bool allowzero = node.GetInt("allowzero", 0) != 0;
    const std::vector<Dim>& x = in[0]->dims;
    std::vector<Dim> out(shape.size());
    int infer_axis = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t s = shape[i];
      if (s == -1) {
        if (infer_axis >= 0) return absl::InvalidArgumentError("shape has more than one -1");
        infer_axis = static_cast<int>(i);
      } else if (s == 0 && !allowzero) {
        if (i >= x.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("shape[", i, "] is 0 (copy) but the input has rank ", x.size()));
        }
        out[i] = x[i];
      } else if (s < 0) {
        return absl::InvalidArgumentError(absl::StrCat("shape[", i, "] is ", s));
      } else {
        out[i] = Dim::Static(s);
      }
    }
    if (allowzero && infer_axis >= 0 &&
        std::find(shape.begin(), shape.end(), 0) != shape.end()) {
      return absl::InvalidArgumentError("shape has both 0 and -1 with allowzero=1");
    }
    bool in_static = in[0]->IsStatic();
    if (infer_axis >= 0 || in_static) {
      ASSIGN_OR_RETURN(std::vector<int64_t> xd, StaticDimsOf(node, 0, *in[0], "the reshape needs its size"));
      const int64_t total = NumElements(xd);
      int64_t known = 1;
      for (size_t i = 0; i < out.size(); ++i) {
        if (static_cast<int>(i) == infer_axis) continue;
        if (!out[i].is_static()) return SymbolicError(node, 0, static_cast<int>(i), out[i], "is copied");
        if (__builtin_mul_overflow(known, out[i].value, &known) || known > kMaxTensorElements) {
          return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", in[0]->ToString(), " to [",
                                                         absl::StrJoin(shape, ","), "]: too many elements"));
        }
      }
      if (infer_axis >= 0) {
        if (known == 0 || total % known != 0) {
          return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", in[0]->ToString(), " to [",
                                                         absl::StrJoin(shape, ","), "]"));
        }
        out[infer_axis] = Dim::Static(total / known);
      } else if (known != total) {
        return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", in[0]->ToString(), " (", total,
                                                       " elements) to [", absl::StrJoin(shape, ","), "]"));
      }
    }
    return std::vector<TensorType>{MakeType(in[0]->dtype, std::move(out))};
  };
  def.eval = CopyBytes;
  return def;
}

OpDef FlattenOp() {
  OpDef def;
  def.op_type = "Flatten";
  def.attrs = {{"axis", AttrKind::kInt}};
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    const int64_t r = in[0]->rank();
    int64_t axis = node.GetInt("axis", 1);
    if (axis < -r || axis > r) {
      return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " is out of range for rank ", r));
    }
    if (axis < 0) axis += r;
    ASSIGN_OR_RETURN(std::vector<int64_t> d, StaticDimsOf(node, 0, *in[0], "is flattened"));
    int64_t a = 1, b = 1;
    for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= d[i];
    return std::vector<TensorType>{TensorType::Static(in[0]->dtype, {a, b})};
  };
  def.eval = CopyBytes;
  return def;
}

OpDef SqueezeOp() {
  OpDef def;
  def.op_type = "Squeeze";
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    const std::vector<Dim>& x = in[0]->dims;
    const int64_t r = in[0]->rank();
    std::vector<bool> drop(r, false);
    if (in.size() > 1 && in[1] != nullptr) {
      ASSIGN_OR_RETURN(std::vector<int64_t> axes, ConstantInts(node, 1, "axes"));
      for (int64_t a : axes) {
        ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(a, r, "axis"));
        if (!x[ax].is_static()) return SymbolicError(node, 0, static_cast<int>(ax), x[ax], "is squeezed");
        if (x[ax].value != 1) {
          return absl::InvalidArgumentError(
              absl::StrCat("cannot squeeze axis ", ax, " of ", in[0]->ToString(), ": extent is not 1"));
        }
        drop[ax] = true;
      }
    } else {
      for (int64_t i = 0; i < r; ++i) {
        if (!x[i].is_static()) {
          return SymbolicError(node, 0, static_cast<int>(i), x[i], "may be squeezed (no axes given)");
        }
        drop[i] = x[i].value == 1;
      }
    }
    std::vector<Dim> out;
    for (int64_t i = 0; i < r; ++i) {
      if (!drop[i]) out.push_back(x[i]);
    }
    return std::vector<TensorType>{MakeType(in[0]->dtype, std::move(out))};
  };
  def.eval = CopyBytes;
  return def;
}

OpDef UnsqueezeOp() {
  OpDef def;
  def.op_type = "Unsqueeze";
  def.min_inputs = def.max_inputs = 2;
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    ASSIGN_OR_RETURN(std::vector<int64_t> axes, ConstantInts(node, 1, "axes"));
    const int64_t r = in[0]->rank() + static_cast<int64_t>(axes.size());
    std::vector<bool> inserted(r, false);
    for (int64_t a : axes) {
      ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(a, r, "axis"));
      if (inserted[ax]) return absl::InvalidArgumentError(absl::StrCat("axis ", a, " is repeated"));
      inserted[ax] = true;
    }
    std::vector<Dim> out;
    size_t k = 0;
    for (int64_t i = 0; i < r; ++i) out.push_back(inserted[i] ? Dim::Static(1) : in[0]->dims[k++]);
    return std::vector<TensorType>{MakeType(in[0]->dtype, std::move(out))};
  };
  def.eval = CopyBytes;
  return def;
}

OpDef ExpandOp() {
  OpDef def;
  def.op_type = "Expand";
  def.min_inputs = def.max_inputs = 2;
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    ASSIGN_OR_RETURN(std::vector<int64_t> shape, ConstantInts(node, 1, "shape"));
    std::vector<Dim> sd;
    for (int64_t s : shape) {
      if (s < 0) return absl::InvalidArgumentError(absl::StrCat("shape has negative extent ", s));
      sd.push_back(Dim::Static(s));
    }
    std::string mismatch = absl::StrCat("cannot expand ", in[0]->ToString(), " to [",
                                        absl::StrJoin(shape, ","), "]");
    ASSIGN_OR_RETURN(std::vector<Dim> out, BroadcastDims(node, 0, in[0]->dims, 1, sd, mismatch));
    return std::vector<TensorType>{MakeType(in[0]->dtype, std::move(out))};
  };
  def.eval = [](const Node&, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const std::vector<int64_t>& od = out[0].dims();
    std::vector<int64_t> strides = BroadcastStrides(in[0]->dims(), od.size());
    MapElements(*in[0], out[0], nullptr, [&](const std::vector<int64_t>& c) {
      int64_t s = 0;
      for (size_t k = 0; k < c.size(); ++k) s += c[k] * strides[k];
      return s;
    });
    return absl::OkStatus();
  };
  return def;
}

OpDef IdentityOp() {
  OpDef def;
  def.op_type = "Identity";
  def.infer = [](const Node&, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    return std::vector<TensorType>{MakeType(in[0]->dtype, in[0]->dims)};
  };
  def.eval = [](const Node&, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    out[0] = *in[0];
    return absl::OkStatus();
  };
  return def;
}

}  // namespace

void RegisterDataMovementOps(std::vector<OpDef>* defs) {
  // Views of the same contiguous bytes: free after anything.
  defs->push_back(LayoutOnly(ReshapeOp()));
  defs->push_back(LayoutOnly(FlattenOp()));
  defs->push_back(LayoutOnly(SqueezeOp()));
  defs->push_back(LayoutOnly(UnsqueezeOp()));
  defs->push_back(LayoutOnly(IdentityOp()));
  defs->push_back(WithClass(OpClass::kDataMovement, TransposeOp()));
  defs->push_back(ReadsOutputSizedInput0(WithClass(OpClass::kDataMovement, SliceOp())));
  defs->push_back(WithClass(OpClass::kDataMovement, ConcatOp()));
  defs->push_back(WithClass(OpClass::kDataMovement, PadOp()));
  defs->push_back(WithClass(OpClass::kDataMovement, TileOp()));
  defs->push_back(WithClass(OpClass::kDataMovement, ExpandOp()));
}

}  // namespace kiln::ops
