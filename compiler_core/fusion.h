// The fusion partitioner: cuts an optimised graph into fusion groups, each of
// which becomes one kernel. For now every compute node is its own group; the
// fusion issue replaces the policy, not this interface.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/graph.h"

namespace kiln {

struct FusionGroup {
  int index = 0;
  // "elementwise" or "matmul": the kind of loop nest the group lowers to.
  std::string kind;
  std::vector<const Node*> nodes;  // topological order
  // Values read from outside the group (graph inputs, constants, other groups'
  // results) in order of first use; and values the group writes that are read
  // outside it or are graph outputs.
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;
};

struct Partition {
  std::vector<FusionGroup> groups;  // in execution (topological) order
  // One line per group: "group 0 matmul [mm0:MatMul] (%x, %w) -> (%t)".
  std::string ToText() const;
};

// The kind a single operator lowers to, or "" if Kiln cannot compile it yet.
std::string GroupKindOf(const Node& node);

// Fails with UNIMPLEMENTED naming the node when an operator has no lowering.
absl::StatusOr<Partition> PartitionGraph(const Graph& graph);

}  // namespace kiln
