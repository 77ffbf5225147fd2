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

absl::StatusOr<bool> Rewrite(Graph& graph, Node* n) {
  const std::optional<ConstantWeightConv> ops = MatchConstantWeightConv(*n);
  if (!ops || ops->x->type().rank() != 4 || ops->w->constant().rank() != 4) return false;
  Value *x = ops->x, *w = ops->w, *bias = ops->bias;
  const std::vector<int64_t> wd = w->constant().dims();
  const int64_t group = n->GetInt("group", 1);
  if (group < 1 || wd[0] % group != 0 || (wd[0] / group) % kConvWeightBlock != 0) return false;
  if (wd[2] == 1 && wd[3] == 1) return false;  // 1x1: the pointwise kernels
  absl::StatusOr<ops::Window> win = ops::ForwardWindow(*n, x->type(), 0, {wd[2], wd[3]}, true);
  if (!win.ok()) return false;
  const int64_t oh = win->out[0], ow = win->out[1];
  if (!ops::PrefersChannelVectors(wd[1] * wd[2] * wd[3], oh, ow, kConvWeightBlock, true) ||
      ops::ChannelVectorRowFloats(wd[1], wd[2], win->dilation[0], ow, win->stride[1], wd[3], win->dilation[1],
                                  kConvWeightBlock) > ops::kMaxConvPackFloats) {
    return false;
  }
  std::vector<Value*> inputs = {x, nullptr};
  if (bias != nullptr) inputs.push_back(bias);
  const std::string name = n->name();
  const std::map<std::string, AttrValue> attrs = n->attrs();
  Value* y = n->output(0);
  NodeBuilder b(graph, name);
  inputs[1] = b.Constant(ops::BlockConvWeights(w->constant(), kConvWeightBlock));
  graph.RemoveNode(n);
  RETURN_IF_ERROR(graph.AddNode("BlockedConv", name, std::move(inputs), {y}, attrs, std::string(kKilnDomain)).status());
  return true;
}

}  // namespace

absl::StatusOr<bool> BlockedConvWeights::Run(Graph& graph) {
  auto is_conv = [](const Node& n) { return IsOp(&n, "Conv"); };
  return RewriteSelectedNodes(graph, is_conv, Rewrite);
}

}  // namespace kiln
