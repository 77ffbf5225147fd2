// Constant folding through the operator table's reference kernels.
#include "compiler_core/passes/constant_folding.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/ir/float16.h"

namespace kiln {
namespace {

// Evaluates `node` when every input is a constant and every output is small
// and statically typed; returns the outputs, or nullopt when it must stay.
absl::StatusOr<std::optional<std::vector<Tensor>>> TryEvaluate(const Node& node, int64_t max_elements) {
  const OpDef* def = FindOpDef(node.domain(), node.op_type());
  if (def == nullptr || !def->eval) return std::nullopt;
  InputTensors in;
  int64_t input_elements = 0;
  for (const Value* v : node.inputs()) {
    if (v != nullptr && !v->is_constant()) return std::nullopt;
    in.push_back(v ? &v->constant() : nullptr);
    if (v != nullptr) input_elements += v->constant().num_elements();
  }
  std::vector<Tensor> outs;
  int64_t output_elements = 0;
  for (const Value* o : node.outputs()) {
    const TensorType& t = o->type();
    if (!t.IsStatic() || t.dtype == DType::kUnknown || IsNarrowFloat(t.dtype)) return std::nullopt;
    output_elements += NumElements(t.StaticDims());
    outs.emplace_back(t.dtype, t.StaticDims());
  }
  if (output_elements > max_elements && output_elements > input_elements) return std::nullopt;
  absl::Status s = def->eval(node, in, outs);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(NodeContext(node), s.message()));
  return std::optional<std::vector<Tensor>>(std::move(outs));
}

}  // namespace

absl::StatusOr<bool> ConstantFolding::Run(Graph& graph) {
  // Nodes are visited in topological order, so chains fold in one run.
  std::vector<Node*> order;
  for (const auto& n : graph.nodes()) order.push_back(n.get());
  bool changed = false;
  for (Node* n : order) {
    absl::StatusOr<std::optional<std::vector<Tensor>>> outs = TryEvaluate(*n, max_output_elements_);
    if (!outs.ok()) return outs.status();
    if (!outs->has_value()) continue;
    std::vector<Tensor>& tensors = **outs;
    // The values keep their names, readers and graph-output slots; they just
    // stop having a producer.
    std::vector<Value*> values = n->outputs();
    graph.RemoveNode(n);
    for (size_t i = 0; i < values.size(); ++i) values[i]->set_constant(std::move(tensors[i]));
    changed = true;
  }
  if (changed) graph.RemoveDeadValues();
  return changed;
}

}  // namespace kiln
