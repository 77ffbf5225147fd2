// Einsum decomposition: an Einsum of one or two operands with static shapes
// becomes the operators code generation has lowerings for:
//   one operand:  ReduceSum over the labels not in the output, Transpose;
//   two operands: ReduceSum over each operand's own labels not in the output,
//                 Transpose to [batch, free, contracted] / [batch, contracted,
//                 free], Reshape to [batch..., M, K] / [batch..., K, N], MatMul,
//                 Reshape to [batch..., free A..., free B...], Transpose to
//                 the output's order.
// A label repeated within one operand (a diagonal) or contracted labels whose
// extents broadcast leave the Einsum as it is (the interpreter runs it; code
// generation names it).
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class EinsumDecomposition : public GraphPass {
 public:
  std::string name() const override { return "einsum_decomposition"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
