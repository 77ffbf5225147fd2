// Dead-code elimination: removes nodes none of whose outputs reaches a graph
// output, and constants nothing reads.
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class DeadCodeElimination : public GraphPass {
 public:
  std::string name() const override { return "dce"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
