// One fusion group per compute node (the walking skeleton's policy).
#include "compiler_core/fusion.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {

std::string GroupKindOf(const Node& node) {
  static const std::set<std::string> kElementwise = {"Add", "Sub", "Mul", "Div", "Relu", "Sigmoid"};
  if (!node.domain().empty()) return "";
  if (kElementwise.count(node.op_type())) return "elementwise";
  if (node.op_type() == "MatMul" || node.op_type() == "Gemm") return "matmul";
  return "";
}

absl::StatusOr<Partition> PartitionGraph(const Graph& graph) {
  Partition p;
  for (const auto& node : graph.nodes()) {
    std::string kind = GroupKindOf(*node);
    if (kind.empty()) {
      return absl::UnimplementedError(absl::StrCat("node '", node->name(), "' (", node->op_type(),
                                                   "): no code generator for this operator yet"));
    }
    for (Value* v : node->inputs()) {
      if (v && v->type().known && v->type().dtype != DType::kFloat32) {
        return absl::UnimplementedError(absl::StrCat("node '", node->name(), "' (", node->op_type(),
                                                     "): input '", v->name(), "' is ",
                                                     DTypeName(v->type().dtype),
                                                     "; code generation supports f32 only"));
      }
    }
    FusionGroup g;
    g.index = static_cast<int>(p.groups.size());
    g.kind = kind;
    g.nodes.push_back(node.get());
    std::set<Value*> seen;
    for (Value* v : node->inputs()) {
      if (v && seen.insert(v).second) g.inputs.push_back(v);
    }
    for (Value* v : node->outputs()) g.outputs.push_back(v);
    p.groups.push_back(std::move(g));
  }
  return p;
}

std::string Partition::ToText() const {
  std::string s;
  for (const FusionGroup& g : groups) {
    std::vector<std::string> nodes, ins, outs;
    for (const Node* n : g.nodes) nodes.push_back(absl::StrCat(n->name(), ":", n->op_type()));
    for (Value* v : g.inputs) ins.push_back(absl::StrCat("%", v->name()));
    for (Value* v : g.outputs) outs.push_back(absl::StrCat("%", v->name()));
    absl::StrAppend(&s, "group ", g.index, " ", g.kind, " [", absl::StrJoin(nodes, ", "), "] (",
                    absl::StrJoin(ins, ", "), ") -> (", absl::StrJoin(outs, ", "), ")\n");
  }
  return s;
}

}  // namespace kiln
