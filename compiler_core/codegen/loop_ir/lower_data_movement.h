// The data-movement family's code generation (the operators of
// compiler_core/frontend/ops/data_movement_ops.cc): one index rule per
// operator, which GraphExpr inlines as index arithmetic wherever the operator
// appears, and the "data_movement" lowering: elementwise DAGs mixed with such
// operators as one loop nest per output (knobs as lower_elementwise.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower.h"

namespace kiln::loop_ir {

struct DataMovementRule {
  // The node's output 0 at `index`, read from its input(s) through `ge`.
  std::function<absl::StatusOr<Expr>(GraphExpr& ge, const Node& node, const std::vector<Expr>& index)> at;
  // OK when the node's attributes and constant operands are understood
  // (UNIMPLEMENTED naming the node otherwise); optional.
  std::function<absl::Status(const Node&)> check;
};

// The rule of `op_type`, or nullptr when the operator is not inlined.
const DataMovementRule* FindDataMovementRule(const std::string& op_type);

WorkloadLowering DataMovementLowering();

}  // namespace kiln::loop_ir
