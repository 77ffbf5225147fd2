// Algebraic simplification, one rule at a time over a snapshot of the nodes.
#include "compiler_core/passes/algebraic_simplification.h"

#include <cmath>
#include <cstring>
#include <numeric>
#include <set>

#include "base/status_macros.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

bool SameStaticType(const Value* a, const Value* b) {
  return a != nullptr && b != nullptr && a->type().IsStatic() && a->type() == b->type();
}

bool IsShapeOnly(const Node* n) {
  return IsOp(n, "Reshape") || IsOp(n, "Flatten") || IsOp(n, "Squeeze") || IsOp(n, "Unsqueeze");
}

// A node that is an identity whenever its output type equals its input's.
bool IsIdentityWhenSameType(const Node* n) {
  return IsOp(n, "Identity") || IsOp(n, "Cast") || IsOp(n, "Expand") || IsShapeOnly(n);
}

bool IsInferenceDropout(const Node* n) {
  if (!IsOp(n, "Dropout")) return false;
  const Value* training = n->input(2);
  if (training == nullptr) return true;
  return training->is_constant() && training->constant().dtype() == DType::kBool &&
         training->constant().num_elements() == 1 && training->constant().data<bool>()[0] == false;
}

// The permutation of a Transpose, its default (reversed axes) resolved.
std::optional<std::vector<int64_t>> Permutation(const Node* t) {
  const TensorType& in = t->input(0)->type();
  if (!in.known) return std::nullopt;
  std::vector<int64_t> perm(in.rank());
  std::iota(perm.rbegin(), perm.rend(), 0);
  perm = t->GetInts("perm", perm);
  if (static_cast<int64_t>(perm.size()) != in.rank()) return std::nullopt;
  return perm;
}

class Simplifier {
 public:
  explicit Simplifier(Graph& graph) : graph_(graph) {}

  absl::StatusOr<bool> Visit(Node* n) {
    Value* x = n->input(0);
    if (x == nullptr) return false;
    if (IsOp(n, "Identity") || IsInferenceDropout(n)) return ForwardOutput(graph_, n, x);
    if (IsIdentityWhenSameType(n) && SameStaticType(x, n->output(0))) return ForwardOutput(graph_, n, x);
    if (IsOp(n, "Add") || IsOp(n, "Mul") || IsOp(n, "Sub") || IsOp(n, "Div")) return VisitBinary(n);
    if (IsOp(n, "Transpose")) return VisitTranspose(n);
    if (IsShapeOnly(n)) return VisitReshapeChain(n);
    if (IsOp(n, "Gemm")) return VisitGemm(n);
    return false;
  }

 private:
  absl::StatusOr<bool> VisitBinary(Node* n) {
    if (n->num_inputs() != 2) return false;
    const bool add = IsOp(n, "Add") || IsOp(n, "Sub");
    const double neutral = add ? 0.0 : 1.0;
    const bool commutative = IsOp(n, "Add") || IsOp(n, "Mul");
    for (int k : {1, 0}) {
      if (k == 0 && !commutative) break;
      Value* c = n->input(k);
      Value* x = n->input(1 - k);
      if (IsConstantNear(c, neutral, 0.0) && SameStaticType(x, n->output(0))) return ForwardOutput(graph_, n, x);
    }
    if (IsOp(n, "Div")) return DivToMul(n);
    return false;
  }

  // x / c  ->  x * (1/c) for a float constant c with finite, non-zero elements.
  absl::StatusOr<bool> DivToMul(Node* n) {
    Value* c = n->input(1);
    if (c == nullptr || !c->is_constant()) return false;
    const Tensor& t = c->constant();
    if (t.dtype() != DType::kFloat32 && t.dtype() != DType::kFloat64) return false;
    std::optional<std::vector<double>> vals = ConstantValues(c);
    if (!vals) return false;
    Tensor r(t.dtype(), t.dims());
    for (size_t i = 0; i < vals->size(); ++i) {
      const double v = (*vals)[i];
      if (v == 0 || !std::isfinite(v)) return false;
      if (t.dtype() == DType::kFloat32) r.data<float>()[i] = 1.0f / static_cast<float>(v);
      else r.data<double>()[i] = 1.0 / v;
    }
    Value* recip = AddFreshConstant(graph_, c->name() + "_reciprocal", std::move(r));
    RETURN_IF_ERROR(ReplacePatternWithNode(graph_, {n}, n, "Mul", {n->input(0), recip}).status());
    return true;
  }

  // Transpose(Transpose(x, p1), p2) = Transpose(x, p1[p2[i]]).
  absl::StatusOr<bool> VisitTranspose(Node* n) {
    std::optional<std::vector<int64_t>> perm = Permutation(n);
    if (!perm) return false;
    std::vector<int64_t> identity(perm->size());
    std::iota(identity.begin(), identity.end(), 0);
    if (*perm == identity) return ForwardOutput(graph_, n, n->input(0));
    Node* inner = n->input(0)->producer();
    if (!IsOp(inner, "Transpose")) return false;
    std::optional<std::vector<int64_t>> perm1 = Permutation(inner);
    if (!perm1 || perm1->size() != perm->size()) return false;
    std::vector<int64_t> composed(perm->size());
    for (size_t i = 0; i < perm->size(); ++i) composed[i] = (*perm1)[(*perm)[i]];
    Value* x = inner->input(0);
    if (composed == identity) return ForwardOutput(graph_, n, x);
    RETURN_IF_ERROR(
        ReplacePatternWithNode(graph_, {n}, n, "Transpose", {x}, {{"perm", composed}}).status());
    return true;
  }

  // Gemm(A, B, transB=1) with a constant 2-D B -> Gemm(A, B^T, transB=0).
  absl::StatusOr<bool> VisitGemm(Node* n) {
    Value* b = n->input(1);
    if (n->GetInt("transB", 0) == 0 || b == nullptr || !b->is_constant() || b->constant().dims().size() != 2) {
      return false;
    }
    const Tensor& t = b->constant();
    const int64_t rows = t.dims()[0], cols = t.dims()[1], size = DTypeSize(t.dtype());
    if (size <= 0) return false;
    Tensor bt(t.dtype(), {cols, rows});
    const char* src = t.bytes().data();
    char* dst = static_cast<char*>(bt.raw());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) std::memcpy(dst + (c * rows + r) * size, src + (r * cols + c) * size, size);
    }
    Value* transposed = AddFreshConstant(graph_, b->name() + "_transposed", std::move(bt));
    std::vector<Value*> inputs = n->inputs();
    inputs[1] = transposed;
    std::map<std::string, AttrValue> attrs = n->attrs();
    attrs.erase("transB");
    RETURN_IF_ERROR(ReplacePatternWithNode(graph_, {n}, n, "Gemm", inputs, attrs).status());
    return true;
  }

  // A chain of shape-only ops is one Reshape to the final (static) shape.
  absl::StatusOr<bool> VisitReshapeChain(Node* n) {
    Node* inner = n->input(0)->producer();
    if (!IsShapeOnly(inner)) return false;
    const TensorType& out = n->output(0)->type();
    if (!out.IsStatic()) return false;
    Value* x = inner->input(0);
    if (SameStaticType(x, n->output(0))) return ForwardOutput(graph_, n, x);
    std::vector<int64_t> dims = out.StaticDims();
    Value* shape = AddFreshConstant(graph_, n->output(0)->name() + "_shape",
                                    Tensor::FromVector<int64_t>(DType::kInt64, {static_cast<int64_t>(dims.size())}, dims));
    RETURN_IF_ERROR(ReplacePatternWithNode(graph_, {n}, n, "Reshape", {x, shape}).status());
    return true;
  }

  Graph& graph_;
};

}  // namespace

absl::StatusOr<bool> AlgebraicSimplification::Run(Graph& graph) {
  std::vector<Node*> order;
  for (const auto& n : graph.nodes()) order.push_back(n.get());
  std::set<const Node*> live(order.begin(), order.end());
  Simplifier simplifier(graph);
  bool changed = false;
  for (Node* n : order) {
    if (!live.count(n)) continue;
    // A rewrite removes `n` and may re-create its input's producer (visited
    // already): refresh the set of original nodes still present.
    ASSIGN_OR_RETURN(bool c, simplifier.Visit(n));
    if (!c) continue;
    changed = true;
    std::set<const Node*> now;
    for (const auto& m : graph.nodes()) now.insert(m.get());
    for (auto it = live.begin(); it != live.end();) it = now.count(*it) ? std::next(it) : live.erase(it);
  }
  if (changed) FinishRewrites(graph);
  return changed;
}

}  // namespace kiln
