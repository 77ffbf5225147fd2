// Shape operators: their outputs depend only on shapes and constants
// (Constant, Shape, Size, ConstantOfShape, Range). Once shapes are bound they
// fold to constants before code generation, so they have no lowering.
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

}  // namespace

void RegisterShapeOps(std::vector<OpDef>* defs) {
  defs->push_back(WithClass(OpClass::kShape, ConstantOp()));
  defs->push_back(WithClass(OpClass::kShape, ShapeOp()));
  defs->push_back(WithClass(OpClass::kShape, SizeOp()));
  defs->push_back(WithClass(OpClass::kShape, ConstantOfShapeOp()));
  defs->push_back(WithClass(OpClass::kShape, RangeOp()));
}

}  // namespace kiln::ops
