// The graph verifier: structural invariants only (see verifier.h).
#include "compiler_core/frontend/verifier.h"

#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "compiler_core/frontend/op_registry.h"

namespace kiln {
namespace {

absl::Status NodeError(const Node& n, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(NodeContext(n), reason));
}

absl::Status Verify(const Graph& graph, bool require_types) {
  auto TypeKnown = [require_types](const Value& v) {
    return !require_types || (v.type().known && v.type().dtype != DType::kUnknown);
  };
  std::unordered_set<const Value*> owned;
  for (Value* v : graph.values()) {
    owned.insert(v);
    int definitions = (v->is_graph_input() ? 1 : 0) + (v->is_constant() ? 1 : 0) + (v->producer() ? 1 : 0);
    if (definitions > 1) {
      return absl::InvalidArgumentError(absl::StrCat("value '", v->name(), "' is defined more than once"));
    }
  }
  std::unordered_set<const Value*> defined;
  for (Value* v : graph.inputs()) {
    if (v == nullptr || !owned.count(v)) return absl::InvalidArgumentError("graph input is not a value of the graph");
    if (!defined.insert(v).second) {
      return absl::InvalidArgumentError(absl::StrCat("graph input '", v->name(), "' is listed twice"));
    }
    if (!TypeKnown(*v)) {
      return absl::InvalidArgumentError(absl::StrCat("graph input '", v->name(), "' has no known type"));
    }
  }
  for (Value* v : graph.constants()) {
    defined.insert(v);
    if (v->constant().dtype() != v->type().dtype || v->constant().dims() != v->type().StaticDims()) {
      return absl::InvalidArgumentError(absl::StrCat("constant '", v->name(), "' has type ", v->type().ToString(),
                                                     " but holds ", v->constant().DebugString(0)));
    }
  }
  for (const auto& node : graph.nodes()) {
    const Node& n = *node;
    if (n.op_type().empty()) return NodeError(n, "empty op type");
    for (Value* in : n.inputs()) {
      if (in == nullptr) continue;
      if (!owned.count(in)) return NodeError(n, "input is not a value of the graph");
      if (!defined.count(in)) {
        if (in->producer() != nullptr) {
          return NodeError(n, absl::StrCat("input '", in->name(), "' is used before node '",
                                           in->producer()->name(), "' defines it (not in topological order)"));
        }
        return NodeError(n, absl::StrCat("input '", in->name(),
                                         "' is not defined by any node, input or initializer"));
      }
      if (!TypeKnown(*in)) return NodeError(n, absl::StrCat("input '", in->name(), "' has no known type"));
    }
    if (n.num_outputs() == 0) return NodeError(n, "node has no outputs");
    for (Value* out : n.outputs()) {
      if (out == nullptr || !owned.count(out)) return NodeError(n, "output is not a value of the graph");
      if (out->producer() != &n) {
        return NodeError(n, absl::StrCat("output '", out->name(), "' is defined more than once"));
      }
      if (!defined.insert(out).second) {
        return NodeError(n, absl::StrCat("output '", out->name(), "' is defined more than once"));
      }
      if (!TypeKnown(*out)) return NodeError(n, absl::StrCat("output '", out->name(), "' has no known type"));
    }
  }
  if (graph.outputs().empty()) return absl::InvalidArgumentError("graph has no outputs");
  for (Value* v : graph.outputs()) {
    if (v == nullptr || !owned.count(v)) return absl::InvalidArgumentError("graph output is not a value of the graph");
    if (!defined.count(v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph output '", v->name(), "' is not defined by any node, input or initializer"));
    }
    if (!TypeKnown(*v)) {
      return absl::InvalidArgumentError(absl::StrCat("graph output '", v->name(), "' has no known type"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyGraph(const Graph& graph) { return Verify(graph, /*require_types=*/true); }

absl::Status VerifyGraphStructure(const Graph& graph) { return Verify(graph, /*require_types=*/false); }

}  // namespace kiln
