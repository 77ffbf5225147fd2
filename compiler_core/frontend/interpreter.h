// The reference interpreter: executes a Graph node by node with plain, obviously
// correct loops. Every compiled kernel is checked against its numbers.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"
#include "compiler_core/ir/tensor.h"

namespace kiln {

// Runs `graph` on `inputs` (by graph-input name) and returns every graph output
// by name. A missing or unknown input, or one whose dtype, rank or static
// extents differ from the graph's declaration, is INVALID_ARGUMENT naming it.
// Symbolic input dimensions accept any extent, consistently per symbol.
// Kernel errors are prefixed with the node's name and op type.
absl::StatusOr<std::map<std::string, Tensor>> Evaluate(const Graph& graph,
                                                       const std::map<std::string, Tensor>& inputs);

}  // namespace kiln
