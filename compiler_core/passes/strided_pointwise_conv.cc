// Strided pointwise convolution as a subsample and a pointwise conv (see
// strided_pointwise_conv.h).
#include "compiler_core/passes/strided_pointwise_conv.h"

#include <vector>

#include "base/status_macros.h"
#include "compiler_core/frontend/ops/window.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

absl::StatusOr<bool> Rewrite(Graph& graph, Node* n) {
  Value* x = n->input(0);
  Value* w = n->input(1);
  if (x == nullptr || w == nullptr || !x->type().known || !x->type().IsStatic() || x->type().rank() < 3 ||
      !w->type().known || !w->type().IsStatic()) {
    return false;
  }
  const std::vector<int64_t> xd = x->type().StaticDims();
  const std::vector<int64_t> wd = w->type().StaticDims();
  if (wd.size() != xd.size()) return false;
  const std::vector<int64_t> kernel(wd.begin() + 2, wd.end());
  for (int64_t k : kernel) {
    if (k != 1) return false;
  }
  absl::StatusOr<ops::Window> win = ops::ForwardWindow(*n, x->type(), 0, kernel, true);
  if (!win.ok()) return false;
  bool strided = false;
  for (size_t s = 0; s < kernel.size(); ++s) {
    if (win->pad_begin[s] != 0 || win->pad_end[s] != 0) return false;
    strided = strided || win->stride[s] > 1;
  }
  if (!strided) return false;

  // Every spatial axis: elements 0, s, 2s, ... up to the last output pixel's.
  std::vector<int64_t> starts, ends, axes, steps;
  for (size_t s = 0; s < kernel.size(); ++s) {
    starts.push_back(0);
    ends.push_back((win->out[s] - 1) * win->stride[s] + 1);
    axes.push_back(static_cast<int64_t>(s) + 2);
    steps.push_back(win->stride[s]);
  }
  NodeBuilder b(graph, n->name());
  ASSIGN_OR_RETURN(Value * sub, b.Op("Slice", {x, b.Int64s(starts), b.Int64s(ends), b.Int64s(axes), b.Int64s(steps)}));
  n->ReplaceInput(0, sub);
  n->set_attr("strides", std::vector<int64_t>(kernel.size(), 1));
  n->set_attr("pads", std::vector<int64_t>(2 * kernel.size(), 0));
  n->set_attr("auto_pad", std::string("NOTSET"));
  return true;
}

}  // namespace

absl::StatusOr<bool> StridedPointwiseConv::Run(Graph& graph) {
  auto is_conv = [](const Node& n) { return IsOp(&n, "Conv"); };
  return RewriteSelectedNodes(graph, is_conv, Rewrite);
}

}  // namespace kiln
