// Softmax recognition, anchored on the Exp node.
#include "compiler_core/passes/softmax_recognition.h"

#include <set>

#include "base/status_macros.h"
#include "compiler_core/passes/graph_rewriting.h"
#include "compiler_core/passes/reduce_axes.h"

namespace kiln {

absl::StatusOr<bool> SoftmaxRecognition::Run(Graph& graph) {
  std::vector<Node*> anchors;
  for (const auto& n : graph.nodes()) {
    if (IsOp(n.get(), "Exp")) anchors.push_back(n.get());
  }
  bool changed = false;
  for (Node* exp : anchors) {
    Value* e = exp->output(0);
    if (e->users().size() != 2 || IsGraphOutput(graph, e)) continue;
    Node* sum = nullptr;
    Node* div = nullptr;
    for (Node* u : e->users()) {
      if (IsOp(u, "ReduceSum") && u->input(0) == e) sum = u;
      else if (IsOp(u, "Div") && u->input(0) == e) div = u;
    }
    if (!sum || !div || div->input(1) != sum->output(0)) continue;
    std::optional<std::vector<int64_t>> axes = KeptReducedAxes(sum);
    if (!axes || axes->size() != 1) continue;
    std::vector<Node*> nodes = {exp, sum, div};
    Value* x = exp->input(0);
    // The optional max subtraction, over the same axis.
    Node* sub = x->producer();
    if (IsOp(sub, "Sub")) {
      Node* max = sub->input(1)->producer();
      if (IsOp(max, "ReduceMax") && max->input(0) == sub->input(0) && KeptReducedAxes(max) == axes) {
        nodes.push_back(sub);
        nodes.push_back(max);
        x = sub->input(0);
      }
    }
    const TensorType& t = x->type();
    if (!t.known || t.dtype != DType::kFloat32 || !(div->output(0)->type() == t)) continue;
    if (!IsPrivateToPattern(graph, nodes, div)) continue;
    RETURN_IF_ERROR(ReplacePatternWithNode(graph, nodes, div, "Softmax", {x}, {{"axis", (*axes)[0]}}).status());
    changed = true;
  }
  if (changed) FinishRewrites(graph);
  return changed;
}

}  // namespace kiln
