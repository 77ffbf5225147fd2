// HardSwish recognition, anchored on the Clip or HardSigmoid node.
#include "compiler_core/passes/hardswish_recognition.h"

#include <cmath>

#include "base/status_macros.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

constexpr double kTol = 1e-4;

bool ClipBoundNear(const Node* clip, int input, const char* attr, double expected) {
  if (clip->input(input) != nullptr) return IsScalarNear(clip->input(input), expected, kTol);
  if (!clip->has_attr(attr)) return false;
  return std::abs(clip->GetFloat(attr, 0) - expected) <= kTol * std::max(1.0, std::abs(expected));
}

// `n` divides `v` by 6 (Div by 6 or Mul by 1/6); returns whether it does.
bool IsDivBySix(const Node* n, const Value* v) {
  if (IsOp(n, "Div")) return n->input(0) == v && IsScalarNear(n->input(1), 6.0, kTol);
  return IsOp(n, "Mul") && IsScalarNear(OtherOperand(n, v), 1.0 / 6.0, kTol);
}

// x * clip(x + 3, 0, 6) / 6 anchored on the Clip: fills `nodes`, returns x and
// the root node.
std::pair<Value*, Node*> MatchClipForm(const Graph& graph, Node* clip, std::vector<Node*>& nodes) {
  if (!ClipBoundNear(clip, 1, "min", 0.0) || !ClipBoundNear(clip, 2, "max", 6.0)) return {nullptr, nullptr};
  Node* add = clip->input(0)->producer();
  if (!IsOp(add, "Add")) return {nullptr, nullptr};
  Value* x = nullptr;
  for (int k : {0, 1}) {
    if (IsScalarNear(add->input(1 - k), 3.0, kTol)) x = add->input(k);
  }
  if (x == nullptr) return {nullptr, nullptr};
  nodes = {add, clip};
  Value* c = clip->output(0);
  Node* u1 = SoleUser(graph, c);
  if (u1 == nullptr) return {nullptr, nullptr};
  if (IsOp(u1, "Mul") && OtherOperand(u1, c) == x) {
    // (x * clip) / 6
    Node* u2 = SoleUser(graph, u1->output(0));
    if (!IsDivBySix(u2, u1->output(0))) return {nullptr, nullptr};
    nodes.push_back(u1);
    nodes.push_back(u2);
    return {x, u2};
  }
  if (IsDivBySix(u1, c)) {
    // x * (clip / 6)
    Node* u2 = SoleUser(graph, u1->output(0));
    if (!IsOp(u2, "Mul") || OtherOperand(u2, u1->output(0)) != x) return {nullptr, nullptr};
    nodes.push_back(u1);
    nodes.push_back(u2);
    return {x, u2};
  }
  return {nullptr, nullptr};
}

// x * HardSigmoid(x; alpha=1/6, beta=0.5).
std::pair<Value*, Node*> MatchHardSigmoidForm(const Graph& graph, Node* hs, std::vector<Node*>& nodes) {
  if (std::abs(hs->GetFloat("alpha", 0.2f) - 1.0 / 6.0) > 1e-6 || std::abs(hs->GetFloat("beta", 0.5f) - 0.5) > 1e-6) {
    return {nullptr, nullptr};
  }
  Value* x = hs->input(0);
  Node* mul = SoleUser(graph, hs->output(0));
  if (!IsOp(mul, "Mul") || OtherOperand(mul, hs->output(0)) != x) return {nullptr, nullptr};
  nodes = {hs, mul};
  return {x, mul};
}

}  // namespace

absl::StatusOr<bool> HardSwishRecognition::Run(Graph& graph) {
  std::vector<Node*> anchors;
  for (const auto& n : graph.nodes()) {
    if (IsOp(n.get(), "Clip") || IsOp(n.get(), "HardSigmoid")) anchors.push_back(n.get());
  }
  bool changed = false;
  for (Node* a : anchors) {
    std::vector<Node*> nodes;
    auto [x, root] = IsOp(a, "Clip") ? MatchClipForm(graph, a, nodes) : MatchHardSigmoidForm(graph, a, nodes);
    if (x == nullptr) continue;
    const TensorType& t = x->type();
    if (!(t == root->output(0)->type()) || (t.dtype != DType::kFloat32 && t.dtype != DType::kFloat64)) continue;
    if (!IsPrivateToPattern(graph, nodes, root)) continue;
    RETURN_IF_ERROR(ReplacePatternWithNode(graph, nodes, root, "HardSwish", {x}).status());
    changed = true;
  }
  if (changed) FinishRewrites(graph);
  return changed;
}

}  // namespace kiln
