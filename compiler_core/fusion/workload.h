// Workloads: a fusion group cut out of its model as a standalone graph in a
// canonical form, and the key that names it in the tuning database. The same
// group in two models (or twice in one) has the same key: value and node
// names, weights and position in the model do not enter it; op structure,
// shapes, dtypes and attributes do.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "compiler_core/fusion/partitioner.h"
#include "compiler_core/ir/graph.h"

namespace kiln {

// A small integer constant (a shape, axes, starts, pads, ...), the f32 roi
// and scales of a Resize, or Pad's constant value: structure, not data. Fusion groups do not list it among their inputs; the workload keeps it
// as a constant and its values enter the canonical text and the key.
bool IsStructuralConstant(const Value* v);

struct Workload {
  // Inputs are the group's inputs in order (constants become inputs: weights
  // are data, not structure); outputs are the group's outputs in order.
  // Structural constants stay constants.
  std::unique_ptr<Graph> graph;
  // graph->ToText() with canonical names, then "const %cK = VALUES" per
  // structural constant.
  std::string canonical_text;
  std::string key;             // SHA-256 hex of canonical_text
  std::string kind;            // the group's kind
  std::string op_summary;      // "MatMul", "Add+Relu", ...
  double flops = 0;
  double bytes = 0;
};

absl::StatusOr<Workload> ExtractWorkload(const Graph& graph, const FusionGroup& group);

}  // namespace kiln
