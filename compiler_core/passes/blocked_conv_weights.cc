// Output-channel-blocked conv weights (see blocked_conv_weights.h).
#include "compiler_core/passes/blocked_conv_weights.h"

#include "base/status_macros.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/conv_blocking.h"
#include "compiler_core/frontend/ops/window.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

using ops::kConvWeightBlock;

// A unit-stride, unpadded window of one tap: the pointwise kernel's convs.
bool IsPointwiseWindow(const ops::Window& win) {
  for (int i = 0; i < win.nsp; ++i) {
    if (win.kernel[i] != 1 || win.stride[i] != 1 || win.pad_begin[i] != 0 || win.pad_end[i] != 0) return false;
  }
  return true;
}

// The block n's weights take (0: n stays a Conv). Pointwise convs: one group.
int64_t BlockFor(const Node& n, const Value& x, const std::vector<int64_t>& wd, bool pointwise) {
  const int64_t group = n.GetInt("group", 1);
  if (group < 1 || wd[0] % group != 0) return 0;
  absl::StatusOr<ops::Window> win = ops::ForwardWindow(n, x.type(), 0, {wd[2], wd[3]}, true);
  if (!win.ok()) return 0;
  if (wd[2] == 1 && wd[3] == 1) {
    return pointwise && group == 1 && IsPointwiseWindow(*win) ? ops::PointwiseWeightBlock(wd[0]) : 0;
  }
  if ((wd[0] / group) % kConvWeightBlock != 0) return 0;
  const int64_t oh = win->out[0], ow = win->out[1];
  return ops::PrefersChannelVectors(wd[1] * wd[2] * wd[3], oh, ow, kConvWeightBlock, true) ? kConvWeightBlock : 0;
}

absl::StatusOr<bool> Rewrite(Graph& graph, Node* n, bool pointwise) {
  const std::optional<ConstantWeightConv> ops = MatchConstantWeightConv(*n);
  if (!ops || ops->x->type().rank() != 4 || ops->w->constant().rank() != 4) return false;
  Value *x = ops->x, *w = ops->w, *bias = ops->bias;
  const int64_t block = BlockFor(*n, *x, w->constant().dims(), pointwise);
  if (block == 0) return false;
  std::vector<Value*> inputs = {x, nullptr};
  if (bias != nullptr) inputs.push_back(bias);
  const std::string name = n->name();
  const std::map<std::string, AttrValue> attrs = n->attrs();
  Value* y = n->output(0);
  NodeBuilder b(graph, name);
  const Tensor& wt = w->constant();
  const bool pointwise_conv = wt.dims()[2] == 1 && wt.dims()[3] == 1;
  inputs[1] = b.Constant(pointwise_conv
                             ? ops::BlockPointwiseWeights(wt, block, ops::PointwiseWeightChunk(wt.dims()[1], wt.dims()[0]))
                             : ops::BlockConvWeights(wt, block));
  graph.RemoveNode(n);
  RETURN_IF_ERROR(graph.AddNode("BlockedConv", name, std::move(inputs), {y}, attrs, std::string(kKilnDomain)).status());
  return true;
}

}  // namespace

absl::StatusOr<bool> BlockedConvWeights::Run(Graph& graph) {
  auto is_conv = [](const Node& n) { return IsOp(&n, "Conv"); };
  return RewriteSelectedNodes(graph, is_conv, [this](Graph& g, Node* n) { return Rewrite(g, n, pointwise_); });
}

}  // namespace kiln
