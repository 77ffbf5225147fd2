// Constant folding: a node whose inputs are all constants is evaluated with its
// reference kernel at compile time and its outputs become constants (they keep
// their names, so a folded graph output stays an output).
#pragma once

#include <cstdint>

#include "compiler_core/passes/pass.h"

namespace kiln {

class ConstantFolding : public GraphPass {
 public:
  // Outputs larger than this many elements are left to run time (folding
  // would only grow the weights) unless they are no larger than the node's
  // constant inputs together: a Reshape, Transpose, Slice or bias sum of
  // weights folds at any size.
  explicit ConstantFolding(int64_t max_output_elements = int64_t{1} << 20)
      : max_output_elements_(max_output_elements) {}
  std::string name() const override { return "constant_folding"; }
  absl::StatusOr<bool> Run(Graph& graph) override;

 private:
  int64_t max_output_elements_;
};

}  // namespace kiln
