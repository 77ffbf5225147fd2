// Softmax recognition: softmax written out over one axis becomes one Softmax
// node (opset-13 semantics, axis attribute):
//   e = Exp(x - ReduceMax(x, [a]))  or  e = Exp(x);  y = e / ReduceSum(e, [a])
// with keepdims=1. Intermediates must have no other user.
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class SoftmaxRecognition : public GraphPass {
 public:
  std::string name() const override { return "softmax_recognition"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
