// The interface of a graph pass, in the style of XLA's HloPassInterface: a
// name and Run(graph) -> "did it change anything". Options travel in the
// pass object; a pass keeps no global state.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"

namespace kiln {

class GraphPass {
 public:
  virtual ~GraphPass() = default;
  // Stable, lower_snake_case: the name --dump-after and timings use.
  virtual std::string name() const = 0;
  // Rewrites `graph` in place. Errors are for bad input the pass cannot handle;
  // a pass that finds nothing to do returns false.
  virtual absl::StatusOr<bool> Run(Graph& graph) = 0;
};

}  // namespace kiln
