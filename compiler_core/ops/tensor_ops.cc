// Data movement and shape operators, and Constant.
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/ops/op_families.h"
#include "compiler_core/ops/op_helpers.h"
#include "compiler_core/shape_inference.h"
#include "compiler_core/status_macros.h"

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
  def.infer = [](const Node& node, const InputTypes&) -> absl::StatusOr<std::vector<TensorType>> {
    ASSIGN_OR_RETURN(Tensor t, ConstantValueFromAttrs(node.attrs()));
    return std::vector<TensorType>{TensorType::Static(t.dtype(), t.dims())};
  };
  def.eval = [](const Node& node, const InputTensors&, std::vector<Tensor>& out) -> absl::Status {
    ASSIGN_OR_RETURN(out[0], ConstantValueFromAttrs(node.attrs()));
    return absl::OkStatus();
  };
  return def;
}

}  // namespace

void RegisterTensorOps(std::vector<OpDef>* defs) {
  defs->push_back(ConstantOp());
}

}  // namespace kiln::ops
