// Common-subexpression elimination: two nodes with the same operator, the
// same attributes and the same inputs compute the same values; the later one's
// readers read the earlier one's outputs and the later node goes. Identical
// constants are merged first, so that subexpressions over equal weights match.
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class CommonSubexpressionElimination : public GraphPass {
 public:
  std::string name() const override { return "cse"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
