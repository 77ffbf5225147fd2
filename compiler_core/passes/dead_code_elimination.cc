// Dead-code elimination, walking the nodes backwards so chains die in one run.
#include "compiler_core/passes/dead_code_elimination.h"

#include <algorithm>
#include <set>

namespace kiln {

absl::StatusOr<bool> DeadCodeElimination::Run(Graph& graph) {
  std::set<const Value*> outputs(graph.outputs().begin(), graph.outputs().end());
  std::vector<Node*> order;
  for (const auto& n : graph.nodes()) order.push_back(n.get());
  bool changed = false;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    bool live = std::any_of(n->outputs().begin(), n->outputs().end(), [&](const Value* v) {
      return !v->users().empty() || outputs.count(v);
    });
    if (!live) {
      graph.RemoveNode(n);
      changed = true;
    }
  }
  size_t before = graph.values().size();
  graph.RemoveDeadValues();
  return changed || graph.values().size() != before;
}

}  // namespace kiln
