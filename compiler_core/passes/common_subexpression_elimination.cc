// CSE over the graph IR, keyed on (domain, op, attributes, input values).
#include "compiler_core/passes/common_subexpression_elimination.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/digest.h"

namespace kiln {
namespace {

// Constants up to this size are compared by content.
constexpr int64_t kMaxMergedConstantBytes = 1 << 20;

// Tensor attributes are compared by content, not by their (abridged) dump.
std::string AttrKey(const AttrValue& v) {
  if (const Tensor* t = std::get_if<Tensor>(&v)) {
    return absl::StrCat(t->DebugString(0), ":", Sha256Hex(t->bytes()));
  }
  return AttrValueToString(v);
}

}  // namespace

absl::StatusOr<bool> CommonSubexpressionElimination::Run(Graph& graph) {
  bool changed = false;
  std::set<const Value*> outputs(graph.outputs().begin(), graph.outputs().end());

  // Equal constants (type and bytes) become one value.
  std::map<std::string, Value*> constants;
  for (Value* v : graph.constants()) {
    if (v->constant().size_bytes() > kMaxMergedConstantBytes || outputs.count(v)) continue;
    std::string key = absl::StrCat(v->type().ToString(), "|", Sha256Hex(v->constant().bytes()));
    auto [it, inserted] = constants.emplace(key, v);
    if (!inserted && !v->users().empty()) {
      graph.ReplaceAllUses(v, it->second);
      changed = true;
    }
  }

  std::map<std::string, Node*> seen;
  std::vector<Node*> order;
  for (const auto& n : graph.nodes()) order.push_back(n.get());
  for (Node* n : order) {
    std::string key = absl::StrCat(n->domain(), "|", n->op_type(), "|", n->num_outputs(), "|");
    for (const Value* in : n->inputs()) absl::StrAppend(&key, reinterpret_cast<uintptr_t>(in), ",");
    for (const auto& [name, value] : n->attrs()) absl::StrAppend(&key, "|", name, "=", AttrKey(value));
    // A node that computes a graph output keeps it: outputs keep their names.
    bool computes_output = false;
    for (const Value* v : n->outputs()) computes_output |= outputs.count(v) > 0;
    auto it = seen.find(key);
    if (it == seen.end() || computes_output) {
      seen.emplace(key, n);
      continue;
    }
    Node* first = it->second;
    for (int i = 0; i < n->num_outputs(); ++i) graph.ReplaceAllUses(n->output(i), first->output(i));
    graph.RemoveNode(n);
    changed = true;
  }
  if (changed) graph.RemoveDeadValues();
  return changed;
}

}  // namespace kiln
