// GELU recognition, anchored on the Erf or Tanh node of the decomposition.
#include "compiler_core/passes/gelu_recognition.h"

#include <cmath>
#include <numbers>
#include <set>

#include "base/status_macros.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

constexpr double kTol = 1e-4;

// `v` = x * c or c * x (or x / (1/c) when `allow_div`); returns x.
Value* MatchScaled(const Value* v, double c, bool allow_div, std::vector<Node*>& nodes) {
  Node* n = v->producer();
  if (IsOp(n, "Mul")) {
    for (int k : {0, 1}) {
      if (IsScalarNear(n->input(k), c, kTol)) {
        nodes.push_back(n);
        return n->input(1 - k);
      }
    }
  }
  if (allow_div && IsOp(n, "Div") && IsScalarNear(n->input(1), 1.0 / c, kTol)) {
    nodes.push_back(n);
    return n->input(0);
  }
  return nullptr;
}

// `v` = x^3 as Pow(x, 3), x*x*x or x*(x*x).
bool IsCube(const Value* v, const Value* x, std::vector<Node*>& nodes) {
  Node* n = v->producer();
  if (IsOp(n, "Pow") && n->input(0) == x && IsScalarNear(n->input(1), 3.0, 0)) {
    nodes.push_back(n);
    return true;
  }
  if (!IsOp(n, "Mul")) return false;
  Value* sq = OtherOperand(n, x);
  Node* s = sq ? sq->producer() : nullptr;
  if (IsOp(s, "Mul") && s->input(0) == x && s->input(1) == x) {
    nodes.push_back(n);
    nodes.push_back(s);
    return true;
  }
  return false;
}

// The input x of erf(x / sqrt(2)) for the Erf node `e`.
Value* MatchErfArgument(Node* e, std::vector<Node*>& nodes) {
  return MatchScaled(e->input(0), 1.0 / std::sqrt(2.0), /*allow_div=*/true, nodes);
}

// The input x of tanh(sqrt(2/pi) * (x + 0.044715 * x^3)) for the Tanh node `t`.
Value* MatchTanhArgument(Node* t, std::vector<Node*>& nodes) {
  Value* inner = MatchScaled(t->input(0), std::sqrt(2.0 / std::numbers::pi), /*allow_div=*/true, nodes);
  Node* add = inner ? inner->producer() : nullptr;
  if (!IsOp(add, "Add")) return nullptr;
  for (int k : {0, 1}) {
    Value* x = add->input(k);
    std::vector<Node*> more;
    Value* cube = MatchScaled(add->input(1 - k), 0.044715, /*allow_div=*/false, more);
    if (cube && IsCube(cube, x, more)) {
      nodes.push_back(add);
      nodes.insert(nodes.end(), more.begin(), more.end());
      return x;
    }
  }
  return nullptr;
}

// From `f` = erf(...) or tanh(...) upwards: 0.5 * x * (1 + f) in the orders
// exporters write it. Returns the node computing the result.
Node* MatchOuter(const Graph& graph, Value* f, Value* x, std::vector<Node*>& nodes) {
  Node* plus = SoleUser(graph, f);
  if (!IsOp(plus, "Add") || !IsScalarNear(OtherOperand(plus, f), 1.0, kTol)) return nullptr;
  nodes.push_back(plus);
  Value* p = plus->output(0);
  Node* m1 = SoleUser(graph, p);
  if (!IsOp(m1, "Mul")) return nullptr;
  nodes.push_back(m1);
  Value* o = OtherOperand(m1, p);
  if (o == nullptr) return nullptr;
  if (o == x || IsScalarNear(o, 0.5, kTol)) {
    // (x * (1 + f)) * 0.5  or  ((1 + f) * 0.5) * x
    Node* m2 = SoleUser(graph, m1->output(0));
    if (!IsOp(m2, "Mul")) return nullptr;
    Value* o2 = OtherOperand(m2, m1->output(0));
    const bool ok = o == x ? IsScalarNear(o2, 0.5, kTol) : o2 == x;
    if (!ok) return nullptr;
    nodes.push_back(m2);
    return m2;
  }
  // (x * 0.5) * (1 + f)
  std::vector<Node*> half;
  if (MatchScaled(o, 0.5, /*allow_div=*/true, half) == x) {
    nodes.insert(nodes.end(), half.begin(), half.end());
    return m1;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<bool> GeluRecognition::Run(Graph& graph) {
  std::vector<Node*> anchors;
  for (const auto& n : graph.nodes()) {
    if (IsOp(n.get(), "Erf") || IsOp(n.get(), "Tanh")) anchors.push_back(n.get());
  }
  std::set<const Node*> removed;
  bool changed = false;
  for (Node* a : anchors) {
    if (removed.count(a)) continue;
    const bool erf = IsOp(a, "Erf");
    std::vector<Node*> nodes = {a};
    Value* x = erf ? MatchErfArgument(a, nodes) : MatchTanhArgument(a, nodes);
    if (x == nullptr) continue;
    Node* root = MatchOuter(graph, a->output(0), x, nodes);
    if (root == nullptr) continue;
    const TensorType& t = x->type();
    if (!(t == root->output(0)->type()) || (t.dtype != DType::kFloat32 && t.dtype != DType::kFloat64)) continue;
    if (!IsPrivateToPattern(graph, nodes, root)) continue;
    removed.insert(nodes.begin(), nodes.end());
    RETURN_IF_ERROR(ReplacePatternWithNode(graph, nodes, root, "Gelu", {x},
                                           {{"approximate", std::string(erf ? "none" : "tanh")}})
                        .status());
    changed = true;
  }
  if (changed) FinishRewrites(graph);
  return changed;
}

}  // namespace kiln
