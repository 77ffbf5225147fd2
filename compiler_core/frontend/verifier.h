// Structural invariants of a Graph, checked between passes and after import: every
// value defined once, nodes in topological order, no dangling names, types known.
#pragma once

#include "absl/status/status.h"
#include "compiler_core/ir/graph.h"

namespace kiln {

// OK when the graph is well formed; otherwise INVALID_ARGUMENT naming the first
// offending node (or graph input/output) and the reason. Operator semantics
// (arity, attributes, shapes) are shape inference's business, not checked here.
absl::Status VerifyGraph(const Graph& graph);

// The same checks except that value types may still be unknown: what holds
// before shape inference.
absl::Status VerifyGraphStructure(const Graph& graph);

}  // namespace kiln
