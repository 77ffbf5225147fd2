// Shape operators and views: Constant, Shape, Size, ConstantOfShape, Range,
// Reshape, Flatten, Squeeze, Unsqueeze, Expand. Data movement proper (Pad,
// Transpose, Slice, Gather, ...) is in tensor_movement_ops.cc. Operand forms
// are the newest opset's (axes, shape, ... as inputs): the importer rewrites
// older attribute forms (onnx_importer.h).
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/frontend/ops/op_families.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/ops/tensor_movement_ops.h"
#include "compiler_core/frontend/shape_inference.h"
#include "base/status_macros.h"

namespace kiln::ops {
namespace {

using TypesOr = absl::StatusOr<std::vector<TensorType>>;

// Copies the input's bytes into the output (same element count): every view op.
absl::Status CopyBytes(const Node&, const InputTensors& in, std::vector<Tensor>& out) {
  std::memcpy(out[0].raw(), in[0]->raw(), static_cast<size_t>(out[0].size_bytes()));
  return absl::OkStatus();
}

OpDef ConstantOp() {
  OpDef def;
  def.op_type = "Constant";
  def.min_inputs = def.max_inputs = 0;
  def.attrs = {{"value", AttrKind::kTensor},      {"value_float", AttrKind::kFloat},
               {"value_floats", AttrKind::kFloats}, {"value_int", AttrKind::kInt},
               {"value_ints", AttrKind::kInts}};
  def.validate = [](const Node& node) -> absl::Status {
    return ConstantValueFromAttrs(node.attrs()).status();
  };
  def.infer = [](const Node& node, const InputTypes&) -> TypesOr {
    ASSIGN_OR_RETURN(Tensor t, ConstantValueFromAttrs(node.attrs()));
    return std::vector<TensorType>{TensorType::Static(t.dtype(), t.dims())};
  };
  def.eval = [](const Node& node, const InputTensors&, std::vector<Tensor>& out) -> absl::Status {
    ASSIGN_OR_RETURN(out[0], ConstantValueFromAttrs(node.attrs()));
    return absl::OkStatus();
  };
  return def;
}

// Shape's [start, end) over the dims (opset 15), clamped like Slice.
std::pair<int64_t, int64_t> ShapeRange(const Node& node, int64_t rank) {
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::min(std::max<int64_t>(v, 0), rank);
  };
  int64_t start = clamp(node.GetInt("start", 0));
  int64_t end = clamp(node.GetInt("end", rank));
  return {start, std::max(start, end)};
}

OpDef ShapeOp() {
  OpDef def;
  def.op_type = "Shape";
  def.attrs = {{"start", AttrKind::kInt}, {"end", AttrKind::kInt}};
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    auto [start, end] = ShapeRange(node, in[0]->rank());
    return std::vector<TensorType>{TensorType::Static(DType::kInt64, {end - start})};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    auto [start, end] = ShapeRange(node, in[0]->rank());
    for (int64_t i = start; i < end; ++i) out[0].data<int64_t>()[i - start] = in[0]->dims()[i];
    return absl::OkStatus();
  };
  return def;
}

OpDef SizeOp() {
  OpDef def;
  def.op_type = "Size";
  def.infer = [](const Node&, const InputTypes&) -> TypesOr {
    return std::vector<TensorType>{TensorType::Static(DType::kInt64, {})};
  };
  def.eval = [](const Node&, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    out[0].data<int64_t>()[0] = in[0]->num_elements();
    return absl::OkStatus();
  };
  return def;
}

// The fill value of ConstantOfShape: the `value` attribute (one element) or f32 0.
absl::StatusOr<Tensor> FillValue(const Node& node) {
  auto it = node.attrs().find("value");
  if (it == node.attrs().end()) return Tensor(DType::kFloat32, {1});
  const Tensor& v = std::get<Tensor>(it->second);
  if (v.num_elements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'value' must hold one element, got ", v.num_elements()));
  }
  return v;
}

OpDef ConstantOfShapeOp() {
  OpDef def;
  def.op_type = "ConstantOfShape";
  def.attrs = {{"value", AttrKind::kTensor}};
  def.validate = [](const Node& node) { return FillValue(node).status(); };
  def.infer = [](const Node& node, const InputTypes&) -> TypesOr {
    ASSIGN_OR_RETURN(Tensor v, FillValue(node));
    ASSIGN_OR_RETURN(std::vector<int64_t> shape, ConstantInts(node, 0, "shape"));
    RETURN_IF_ERROR(CheckedElementCount(shape).status());
    return std::vector<TensorType>{TensorType::Static(v.dtype(), shape)};
  };
  def.eval = [](const Node& node, const InputTensors&, std::vector<Tensor>& out) -> absl::Status {
    ASSIGN_OR_RETURN(Tensor v, FillValue(node));
    const int64_t es = DTypeSize(v.dtype());
    char* p = static_cast<char*>(out[0].raw());
    for (int64_t i = 0; i < out[0].num_elements(); ++i) std::memcpy(p + i * es, v.raw(), es);
    return absl::OkStatus();
  };
  return def;
}

struct RangeArgs {
  double start, delta;
  int64_t count;
};

absl::StatusOr<RangeArgs> GetRangeArgs(const Node& node) {
  ASSIGN_OR_RETURN(double start, ConstantScalar(node, 0, "start"));
  ASSIGN_OR_RETURN(double limit, ConstantScalar(node, 1, "limit"));
  ASSIGN_OR_RETURN(double delta, ConstantScalar(node, 2, "delta"));
  if (delta == 0) return absl::InvalidArgumentError("delta must not be 0");
  double n = std::ceil((limit - start) / delta);
  if (!(n < static_cast<double>(kMaxTensorElements))) {
    return absl::InvalidArgumentError(absl::StrCat("range of ", n, " elements is too large"));
  }
  return RangeArgs{start, delta, n > 0 ? static_cast<int64_t>(n) : 0};
}

OpDef RangeOp() {
  OpDef def;
  def.op_type = "Range";
  def.min_inputs = def.max_inputs = 3;
  def.infer = [](const Node& node, const InputTypes& in) -> TypesOr {
    for (int i = 1; i < 3; ++i) {
      if (in[i]->dtype != in[0]->dtype) {
        return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, i), "' has dtype ",
                                                       DTypeName(in[i]->dtype), ", expected ",
                                                       DTypeName(in[0]->dtype)));
      }
    }
    ASSIGN_OR_RETURN(RangeArgs r, GetRangeArgs(node));
    return std::vector<TensorType>{TensorType::Static(in[0]->dtype, {r.count})};
  };
  def.eval = [](const Node&, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    Tensor& y = out[0];
    return DispatchDType(y.dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>) {
        T start = in[0]->data<T>()[0], delta = in[2]->data<T>()[0];
        for (int64_t i = 0; i < y.num_elements(); ++i) y.data<T>()[i] = start + static_cast<T>(i) * delta;
      } else {
        int64_t start = ElementAsInt(*in[0], 0), delta = ElementAsInt(*in[2], 0);
        for (int64_t i = 0; i < y.num_elements(); ++i) y.data<T>()[i] = static_cast<T>(start + i * delta);
      }
      return absl::OkStatus();
    });
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
        known *= out[i].value;
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

}  // namespace

void RegisterTensorOps(std::vector<OpDef>* defs) {
  defs->push_back(ConstantOp());
  defs->push_back(ShapeOp());
  defs->push_back(SizeOp());
  defs->push_back(ConstantOfShapeOp());
  defs->push_back(RangeOp());
  defs->push_back(ReshapeOp());
  defs->push_back(FlattenOp());
  defs->push_back(SqueezeOp());
  defs->push_back(UnsqueezeOp());
  defs->push_back(ExpandOp());
  RegisterTensorMovementOps(defs);
}

}  // namespace kiln::ops
