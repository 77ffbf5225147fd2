// GELU recognition: the exported decompositions of GELU become one Gelu node.
//   erf form:  x * 0.5 * (1 + erf(x / sqrt(2)))        -> Gelu(approximate="none")
//   tanh form: x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
//                                                      -> Gelu(approximate="tanh")
// x / sqrt(2) may be x * (1/sqrt(2)); x^3 may be Pow(x, 3) or x*x*x; the 0.5
// may multiply x, the (1 + ...) factor or the product, operands in any order.
// Constants match within a relative 1e-4; intermediates must have no other user.
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class GeluRecognition : public GraphPass {
 public:
  std::string name() const override { return "gelu_recognition"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
