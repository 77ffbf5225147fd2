// BatchNorm and per-channel scale/shift folding into Conv, Gemm and MatMul.
#include "compiler_core/passes/batchnorm_folding.h"

#include <cmath>
#include <optional>
#include <set>

#include "base/status_macros.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

bool IsF32Constant(const Value* v) {
  return v != nullptr && v->is_constant() && v->constant().dtype() == DType::kFloat32;
}

// The values of constant `c` as a vector over `channels` along `axis` of a
// rank-`rank` tensor, when `c` broadcasts against it varying along that axis
// only (a scalar gives the same value for every channel).
std::optional<std::vector<double>> ChannelVector(const Value* c, int64_t rank, int64_t axis, int64_t channels) {
  if (!IsF32Constant(c)) return std::nullopt;
  const std::vector<int64_t>& d = c->constant().dims();
  const int64_t r = static_cast<int64_t>(d.size());
  if (r > rank) return std::nullopt;
  int64_t along = 1;
  for (int64_t i = 0; i < r; ++i) {
    const int64_t full_axis = rank - r + i;
    if (full_axis == axis) along = d[i];
    else if (d[i] != 1) return std::nullopt;
  }
  if (along != 1 && along != channels) return std::nullopt;
  std::optional<std::vector<double>> vals = ConstantValues(c);
  if (!vals) return std::nullopt;
  std::vector<double> out(channels);
  for (int64_t m = 0; m < channels; ++m) out[m] = (*vals)[along == 1 ? 0 : m];
  return out;
}

// The affine map node `f` applies to its input `y` (rank `rank`, `channels`
// along `axis`), or nullopt when it is not one.
std::optional<ChannelAffine> AffineOf(const Node* f, const Value* y, int64_t rank, int64_t axis, int64_t channels) {
  if (!(f->output(0)->type() == y->type())) return std::nullopt;
  ChannelAffine a{std::vector<double>(channels, 1.0), std::vector<double>(channels, 0.0)};
  if (IsOp(f, "BatchNormalization")) {
    if (axis != 1 || f->input(0) != y) return std::nullopt;
    return BatchNormAffine(*f, channels);
  }
  const bool mul = IsOp(f, "Mul"), add = IsOp(f, "Add"), sub = IsOp(f, "Sub");
  if (!mul && !add && !sub) return std::nullopt;
  if (sub && f->input(0) != y) return std::nullopt;
  std::optional<std::vector<double>> c = ChannelVector(OtherOperand(f, y), rank, axis, channels);
  if (!c) return std::nullopt;
  if (mul) a.scale = *c;
  for (int64_t m = 0; m < channels && !mul; ++m) a.shift[m] = sub ? -(*c)[m] : (*c)[m];
  return a;
}

// `w` with every slice along `axis` (channel m) multiplied by scale[m].
Tensor ScaleAlong(const Tensor& w, int64_t axis, const std::vector<double>& scale) {
  Tensor out = w;
  const std::vector<int64_t>& d = w.dims();
  int64_t inner = 1;
  for (size_t i = axis + 1; i < d.size(); ++i) inner *= d[i];
  const int64_t channels = d[axis];
  float* p = out.data<float>();
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    p[i] = static_cast<float>(p[i] * scale[(i / inner) % channels]);
  }
  return out;
}

Tensor BiasVector(const std::vector<double>& base, const ChannelAffine& a) {
  std::vector<float> b(base.size());
  for (size_t m = 0; m < base.size(); ++m) b[m] = static_cast<float>(base[m] * a.scale[m] + a.shift[m]);
  return Tensor::FromVector<float>(DType::kFloat32, {static_cast<int64_t>(b.size())}, b);
}

bool AllZero(const std::vector<double>& v) {
  for (double x : v) {
    if (x != 0) return false;
  }
  return true;
}

class Folder {
 public:
  explicit Folder(Graph& graph) : graph_(graph) {}

  // Tries to fold the reader of `p`'s output into `p`.
  absl::StatusOr<bool> Visit(Node* p) {
    if (IsOp(p, "Conv")) return FoldConv(p);
    if (IsOp(p, "Gemm")) return FoldGemm(p);
    if (IsOp(p, "MatMul")) return FoldMatMul(p);
    return false;
  }

 private:
  // The sole reader of `y` and the affine map it applies.
  std::optional<std::pair<Node*, ChannelAffine>> Follower(const Value* y, int64_t axis, int64_t channels) {
    const TensorType& t = y->type();
    if (!t.IsStatic() || t.dtype != DType::kFloat32) return std::nullopt;
    Node* f = SoleUser(graph_, y);
    if (f == nullptr) return std::nullopt;
    for (int i = 1; i < f->num_outputs(); ++i) {
      if (!f->output(i)->users().empty() || IsGraphOutput(graph_, f->output(i))) return std::nullopt;
    }
    std::optional<ChannelAffine> a = AffineOf(f, y, t.rank(), axis, channels);
    if (!a) return std::nullopt;
    return std::make_pair(f, *a);
  }

  absl::StatusOr<bool> FoldConv(Node* conv) {
    Value* w = conv->input(1);
    Value* b = conv->input(2);
    if (!IsF32Constant(w) || w->constant().rank() < 2 || (b != nullptr && !IsF32Constant(b))) return false;
    const int64_t m = w->constant().dims()[0];
    auto follower = Follower(conv->output(0), 1, m);
    if (!follower) return false;
    auto& [f, a] = *follower;
    std::vector<double> base(m, 0.0);
    if (b != nullptr) base = *ChannelVector(b, 1, 0, m);
    Value* w2 = AddFreshConstant(graph_, w->name() + "_folded", ScaleAlong(w->constant(), 0, a.scale));
    Value* b2 = AddFreshConstant(graph_, b ? b->name() + "_folded" : conv->name() + "_bias", BiasVector(base, a));
    RETURN_IF_ERROR(ReplacePatternWithNode(graph_, {conv, f}, f, "Conv", {conv->input(0), w2, b2}, conv->attrs(),
                                           conv->name())
                        .status());
    return true;
  }

  absl::StatusOr<bool> FoldGemm(Node* gemm) {
    Value* bmat = gemm->input(1);
    Value* c = gemm->input(2);
    if (!IsF32Constant(bmat) || bmat->constant().rank() != 2) return false;
    const bool trans_b = gemm->GetInt("transB", 0) != 0;
    const int64_t m = bmat->constant().dims()[trans_b ? 0 : 1];
    std::vector<double> base(m, 0.0);
    if (c != nullptr) {
      std::optional<std::vector<double>> cv = ChannelVector(c, 2, 1, m);
      if (!cv) return false;
      const double beta = gemm->GetFloat("beta", 1.0f);
      for (int64_t i = 0; i < m; ++i) base[i] = (*cv)[i] * beta;
    }
    auto follower = Follower(gemm->output(0), 1, m);
    if (!follower) return false;
    auto& [f, a] = *follower;
    Value* b2 = AddFreshConstant(graph_, bmat->name() + "_folded", ScaleAlong(bmat->constant(), trans_b ? 0 : 1, a.scale));
    Value* c2 = AddFreshConstant(graph_, c ? c->name() + "_folded" : gemm->name() + "_bias", BiasVector(base, a));
    std::map<std::string, AttrValue> attrs = gemm->attrs();
    attrs["beta"] = 1.0f;
    RETURN_IF_ERROR(
        ReplacePatternWithNode(graph_, {gemm, f}, f, "Gemm", {gemm->input(0), b2, c2}, attrs, gemm->name()).status());
    return true;
  }

  // MatMul(x, W) [+ bias] followed by an affine map along the last axis
  // (BatchNormalization only for rank-2 results, where that axis is 1).
  absl::StatusOr<bool> FoldMatMul(Node* mm) {
    Value* w = mm->input(1);
    Value* y = mm->output(0);
    if (!IsF32Constant(w) || w->constant().rank() != 2 || !y->type().IsStatic()) return false;
    const int64_t rank = y->type().rank();
    const int64_t m = w->constant().dims()[1];
    // An Add of a constant bias right after the MatMul is part of the producer.
    Node* bias_add = SoleUser(graph_, y);
    std::optional<std::vector<double>> bias;
    if (IsOp(bias_add, "Add") && bias_add->output(0)->type() == y->type()) {
      bias = ChannelVector(OtherOperand(bias_add, y), rank, rank - 1, m);
    }
    if (!bias) bias_add = nullptr;
    Value* pre = bias_add ? bias_add->output(0) : y;
    auto follower = Follower(pre, rank - 1, m);
    if (!follower) return false;
    auto& [f, a] = *follower;
    // MatMul followed by a bias Add alone is already the canonical form.
    if (bias_add == nullptr && IsOp(f, "Add")) return false;
    std::vector<double> base = bias ? *bias : std::vector<double>(m, 0.0);
    Value* w2 = AddFreshConstant(graph_, w->name() + "_folded", ScaleAlong(w->constant(), 1, a.scale));
    Value* x = mm->input(0);
    std::string mm_name = mm->name();
    std::vector<Node*> pattern = {mm, f};
    if (bias_add) pattern.push_back(bias_add);
    if (bias_add == nullptr && AllZero(a.shift)) {
      RETURN_IF_ERROR(ReplacePatternWithNode(graph_, pattern, f, "MatMul", {x, w2}, {}, mm_name).status());
      return true;
    }
    Value* b2 = AddFreshConstant(graph_, mm_name + "_bias", BiasVector(base, a));
    Value* product = *graph_.AddValue(graph_.UniqueValueName(y->name() + "_folded"), y->type());
    std::string add_name = bias_add ? bias_add->name() : f->name();
    RETURN_IF_ERROR(ReplacePatternWithNode(graph_, pattern, f, "Add", {product, b2}, {}, add_name).status());
    RETURN_IF_ERROR(graph_.AddNode("MatMul", mm_name, {x, w2}, {product}).status());
    return true;
  }

  Graph& graph_;
};

}  // namespace

absl::StatusOr<bool> BatchNormFolding::Run(Graph& graph) {
  // A worklist: nodes a fold creates are visited too (Conv -> BN -> Mul).
  std::vector<Node*> order;
  for (const auto& n : graph.nodes()) order.push_back(n.get());
  std::set<const Node*> removed;
  Folder folder(graph);
  bool changed = false;
  for (size_t i = 0; i < order.size(); ++i) {
    Node* n = order[i];
    if (removed.count(n)) continue;
    std::set<const Node*> before;
    for (const auto& m : graph.nodes()) before.insert(m.get());
    ASSIGN_OR_RETURN(bool c, folder.Visit(n));
    if (!c) continue;
    changed = true;
    std::set<const Node*> now;
    for (const auto& m : graph.nodes()) {
      now.insert(m.get());
      if (!before.count(m.get())) order.push_back(m.get());
    }
    for (const Node* m : before) {
      if (!now.count(m)) removed.insert(m);
    }
  }
  if (changed) FinishRewrites(graph);
  return changed;
}

}  // namespace kiln
