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
    if (IsOp(n, "Conv")) return VisitConvTaps(n);
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
    std::optional<std::vector<int64_t>> perm = TransposePermutation(n);
    if (!perm) return false;
    std::vector<int64_t> identity(perm->size());
    std::iota(identity.begin(), identity.end(), 0);
    if (*perm == identity) return ForwardOutput(graph_, n, n->input(0));
    Node* inner = n->input(0)->producer();
    if (!IsOp(inner, "Transpose")) return false;
    std::optional<std::vector<int64_t>> perm1 = TransposePermutation(inner);
    if (!perm1 || perm1->size() != perm->size()) return false;
    std::vector<int64_t> composed(perm->size());
    for (size_t i = 0; i < perm->size(); ++i) composed[i] = (*perm1)[(*perm)[i]];
    Value* x = inner->input(0);
    if (composed == identity) return ForwardOutput(graph_, n, x);
    RETURN_IF_ERROR(
        ReplacePatternWithNode(graph_, {n}, n, "Transpose", {x}, {{"perm", composed}}).status());
    return true;
  }

  // Gemm(A, B, transB=1) with a constant 2-D B -> Gemm(A, B^T, transB=0),
  // except for one row of A (a classifier head at batch 1): the dot-form
  // GEMV streams B's rows as they are (lower_matmul.h, gv=2).
  absl::StatusOr<bool> VisitGemm(Node* n) {
    Value* b = n->input(1);
    if (n->GetInt("transB", 0) == 0 || b == nullptr || !b->is_constant() || b->constant().dims().size() != 2) {
      return false;
    }
    const TensorType& a = n->input(0)->type();
    const bool one_row =
        a.known && a.IsStatic() && a.rank() == 2 && a.dims[n->GetInt("transA", 0) != 0 ? 1 : 0].value == 1;
    if (one_row) return false;
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

  // Conv taps that read only padding for every output pixel (a dilated
  // window wider than the image: DeepLab's ASPP at rate 36 on a 33x33 map
  // keeps only the centre tap) are cut from a constant weight tensor: the
  // kernel shrinks to the live taps and the begin/end pads shrink by the
  // dilated extent cut, which keeps every output pixel's reads and the output
  // extent. Only where the new pads stay >= 0 (explicit pads, no auto_pad).
  absl::StatusOr<bool> VisitConvTaps(Node* n) {
    Value* w = n->input(1);
    const TensorType& xt = n->input(0)->type();
    const TensorType& yt = n->output(0)->type();
    if (w == nullptr || !w->is_constant() || !xt.IsStatic() || !yt.IsStatic()) return false;
    if (n->GetString("auto_pad", "NOTSET") != "NOTSET") return false;
    const Tensor& wt = w->constant();
    const int64_t rank = static_cast<int64_t>(wt.dims().size()), sp = rank - 2;
    const int64_t esize = DTypeSize(wt.dtype());
    if (sp < 1 || esize <= 0) return false;
    const std::vector<int64_t> x = xt.StaticDims(), y = yt.StaticDims();
    const std::vector<int64_t> strides = n->GetInts("strides", std::vector<int64_t>(sp, 1));
    const std::vector<int64_t> dil = n->GetInts("dilations", std::vector<int64_t>(sp, 1));
    std::vector<int64_t> pads = n->GetInts("pads", std::vector<int64_t>(2 * sp, 0));
    if (static_cast<int64_t>(x.size()) != rank || static_cast<int64_t>(y.size()) != rank ||
        static_cast<int64_t>(strides.size()) != sp || static_cast<int64_t>(dil.size()) != sp ||
        static_cast<int64_t>(pads.size()) != 2 * sp) {
      return false;
    }
    std::vector<int64_t> lo(sp), hi(sp);
    bool trimmed = false;
    for (int64_t a = 0; a < sp; ++a) {
      const int64_t k = wt.dims()[2 + a], d = dil[a], s = strides[a], pb = pads[a];
      const int64_t in = x[2 + a], out = y[2 + a];
      // Tap t reads rows t*d - pb + o*s for o in [0, out).
      auto live = [&](int64_t t) { return t * d - pb < in && t * d - pb + (out - 1) * s >= 0; };
      lo[a] = 0;
      while (lo[a] < k && !live(lo[a])) ++lo[a];
      hi[a] = k - 1;
      while (hi[a] > lo[a] && !live(hi[a])) --hi[a];
      if (lo[a] == k) return false;  // no live tap: leave it to the kernel
      const int64_t new_begin = pb - lo[a] * d, new_end = pads[sp + a] - (k - 1 - hi[a]) * d;
      if (new_begin < 0 || new_end < 0) return false;
      if (lo[a] > 0 || hi[a] < k - 1) trimmed = true;
      pads[a] = new_begin;
      pads[sp + a] = new_end;
    }
    if (!trimmed) return false;
    std::vector<int64_t> dims = {wt.dims()[0], wt.dims()[1]};
    for (int64_t a = 0; a < sp; ++a) dims.push_back(hi[a] - lo[a] + 1);
    Tensor cut(wt.dtype(), dims);
    const char* src = wt.bytes().data();
    char* dst = static_cast<char*>(cut.raw());
    const int64_t n_out = cut.num_elements();
    for (int64_t i = 0; i < n_out; ++i) {
      // Source offset of cut element i: its spatial indices shifted by lo.
      int64_t rest = i, src_index = 0, stride = 1;
      for (int64_t a = rank - 1; a >= 0; --a) {
        const int64_t idx = rest % dims[a];
        rest /= dims[a];
        src_index += (idx + (a >= 2 ? lo[a - 2] : 0)) * stride;
        stride *= wt.dims()[a];
      }
      std::memcpy(dst + i * esize, src + src_index * esize, esize);
    }
    Value* live_w = AddFreshConstant(graph_, w->name() + "_live_taps", std::move(cut));
    std::vector<Value*> inputs = n->inputs();
    inputs[1] = live_w;
    std::map<std::string, AttrValue> attrs = n->attrs();
    attrs["pads"] = pads;
    attrs["kernel_shape"] = std::vector<int64_t>(dims.begin() + 2, dims.end());
    RETURN_IF_ERROR(ReplacePatternWithNode(graph_, {n}, n, "Conv", inputs, attrs).status());
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
