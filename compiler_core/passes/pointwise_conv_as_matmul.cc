// Pointwise convolution as a transposed MatMul (see pointwise_conv_as_matmul.h).
#include "compiler_core/passes/pointwise_conv_as_matmul.h"

#include "base/status_macros.h"
#include "compiler_core/frontend/ops/window.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

bool AllEqual(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v) {
    if (e != x) return false;
  }
  return true;
}

// W [K, C, 1...] as Wᵀ [C, K].
Tensor TransposedWeights(const Tensor& w) {
  const int64_t k = w.dims()[0], c = w.dims()[1];
  std::vector<float> t(static_cast<size_t>(k * c));
  const float* p = w.data<float>();
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < c; ++j) t[j * k + i] = p[i * c + j];
  }
  return Tensor::FromVector<float>(DType::kFloat32, {c, k}, t);
}

absl::StatusOr<bool> Rewrite(Graph& graph, Node* n) {
  const std::optional<ConstantWeightConv> ops = MatchConstantWeightConv(*n);
  if (!ops || ops->x->type().rank() < 3 || n->GetInt("group", 1) != 1) return false;
  Value *x = ops->x, *w = ops->w, *bias = ops->bias;
  const std::vector<int64_t> xd = x->type().StaticDims();
  const std::vector<int64_t> wd = w->constant().dims();
  if (wd.size() != xd.size() || !AllEqual(std::vector<int64_t>(wd.begin() + 2, wd.end()), 1)) return false;
  const std::vector<int64_t> kernel(wd.begin() + 2, wd.end());
  absl::StatusOr<ops::Window> win = ops::ForwardWindow(*n, x->type(), 0, kernel, true);
  if (!win.ok() || !AllEqual(win->stride, 1) || !AllEqual(win->pad_begin, 0) || !AllEqual(win->pad_end, 0)) {
    return false;
  }
  const int64_t batch = xd[0], c = xd[1], k = wd[0];
  int64_t pixels = 1;
  for (size_t d = 2; d < xd.size(); ++d) pixels *= xd[d];
  if (wd[1] != c || pixels > kMaxPointwisePixels || k < kMinPointwiseOutputChannels) return false;

  const std::string name = n->name();
  Value* y = n->output(0);
  std::vector<int64_t> out_dims = {batch, k};
  out_dims.insert(out_dims.end(), xd.begin() + 2, xd.end());
  graph.RemoveNode(n);
  NodeBuilder b(graph, name);
  Value* wt = b.Constant(TransposedWeights(w->constant()));
  Value* prod = nullptr;
  std::vector<int64_t> swap = {1, 0};
  if (pixels == 1) {
    // 1x1 maps (squeeze-and-excitation): a fully connected layer, [N, K] is
    // already [N, K, 1, 1] in memory.
    ASSIGN_OR_RETURN(Value * rows, b.Reshape(x, {batch, c}));
    std::vector<Value*> in = {rows, wt};
    if (bias != nullptr) in.push_back(bias);
    ASSIGN_OR_RETURN(prod, b.Op("Gemm", in));
    ASSIGN_OR_RETURN(Value * out, b.Reshape(prod, out_dims));
    RETURN_IF_ERROR(ProduceInto(graph, out, y));
    return true;
  }
  if (batch == 1) {
    // One image: Gemm reads Xᵀ through transA's strides, no transpose copy.
    ASSIGN_OR_RETURN(Value * planes, b.Reshape(x, {c, pixels}));
    std::vector<Value*> in = {planes, wt};
    if (bias != nullptr) in.push_back(bias);
    ASSIGN_OR_RETURN(prod, b.Op("Gemm", in, {{"transA", int64_t{1}}}));
  } else {
    swap = {0, 2, 1};
    ASSIGN_OR_RETURN(Value * planes, b.Reshape(x, {batch, c, pixels}));
    ASSIGN_OR_RETURN(Value * rows, b.Op("Transpose", {planes}, {{"perm", swap}}));
    ASSIGN_OR_RETURN(prod, b.Op("MatMul", {rows, wt}));
    if (bias != nullptr) {
      ASSIGN_OR_RETURN(prod, b.Op("Add", {prod, bias}));
    }
  }
  ASSIGN_OR_RETURN(Value * channels, b.Op("Transpose", {prod}, {{"perm", swap}}));
  ASSIGN_OR_RETURN(Value * out, b.Reshape(channels, out_dims));
  RETURN_IF_ERROR(ProduceInto(graph, out, y));
  return true;
}

}  // namespace

absl::StatusOr<bool> PointwiseConvAsMatMul::Run(Graph& graph) {
  auto is_conv = [](const Node& n) { return IsOp(&n, "Conv"); };
  return RewriteSelectedNodes(graph, is_conv, Rewrite);
}

}  // namespace kiln
