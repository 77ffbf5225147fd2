// A conv whose taps mostly read padding as a sum of pointwise convs (see
// live_tap_regions.h).
#include "compiler_core/passes/live_tap_regions.h"

#include <algorithm>
#include <vector>

#include "base/status_macros.h"
#include "compiler_core/frontend/ops/window.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

// At most this share of kernel taps x outputs read input.
constexpr double kMaxLiveShare = 0.5;
// Input channels from which a 1x1 conv per tap is a worthwhile GEMM.
constexpr int64_t kMinChannels = 32;

// Tap t's live output range along one axis: [lo, hi) where t*d - pad + o
// lies in [0, in) (stride 1).
struct Range {
  int64_t lo = 0, hi = 0;
  int64_t size() const { return std::max<int64_t>(0, hi - lo); }
};
Range LiveOutputs(int64_t t, int64_t d, int64_t pad, int64_t in, int64_t out) {
  const int64_t off = t * d - pad;
  return Range{std::max<int64_t>(0, -off), std::min(out, in - off)};
}

// W[:, :, i, j] as [K, C, 1, 1].
Tensor TapWeights(const Tensor& w, int64_t i, int64_t j) {
  const std::vector<int64_t>& wd = w.dims();
  Tensor t(DType::kFloat32, {wd[0], wd[1], 1, 1});
  const float* src = w.data<float>();
  float* dst = t.data<float>();
  const int64_t taps = wd[2] * wd[3];
  for (int64_t p = 0; p < wd[0] * wd[1]; ++p) dst[p] = src[p * taps + i * wd[3] + j];
  return t;
}

absl::StatusOr<bool> Rewrite(Graph& graph, Node* n) {
  const std::optional<ConstantWeightConv> ops = MatchConstantWeightConv(*n);
  if (!ops || ops->x->type().rank() != 4 || ops->w->constant().rank() != 4 || n->GetInt("group", 1) != 1) {
    return false;
  }
  Value *x = ops->x, *bias = ops->bias;
  const Tensor& w = ops->w->constant();
  const std::vector<int64_t> wd = w.dims(), xd = x->type().StaticDims();
  if (wd[1] != xd[1] || xd[1] < kMinChannels || wd[2] * wd[3] == 1) return false;
  absl::StatusOr<ops::Window> win = ops::ForwardWindow(*n, x->type(), 0, {wd[2], wd[3]}, true);
  if (!win.ok() || win->stride[0] != 1 || win->stride[1] != 1) return false;
  const int64_t oh = win->out[0], ow = win->out[1];
  int64_t live = 0;
  for (int64_t i = 0; i < wd[2]; ++i) {
    for (int64_t j = 0; j < wd[3]; ++j) {
      live += LiveOutputs(i, win->dilation[0], win->pad_begin[0], xd[2], oh).size() *
              LiveOutputs(j, win->dilation[1], win->pad_begin[1], xd[3], ow).size();
    }
  }
  if (static_cast<double>(live) > kMaxLiveShare * static_cast<double>(wd[2] * wd[3] * oh * ow)) return false;

  const std::string name = n->name();
  Value* y = n->output(0);
  graph.RemoveNode(n);
  NodeBuilder b(graph, name);
  Value* sum = nullptr;
  bool bias_added = bias == nullptr;
  for (int64_t i = 0; i < wd[2]; ++i) {
    const Range rows = LiveOutputs(i, win->dilation[0], win->pad_begin[0], xd[2], oh);
    for (int64_t j = 0; j < wd[3]; ++j) {
      const Range cols = LiveOutputs(j, win->dilation[1], win->pad_begin[1], xd[3], ow);
      if (rows.size() == 0 || cols.size() == 0) continue;
      const int64_t dy = i * win->dilation[0] - win->pad_begin[0], dx = j * win->dilation[1] - win->pad_begin[1];
      const bool whole_input = rows.lo + dy == 0 && rows.hi + dy == xd[2] && cols.lo + dx == 0 && cols.hi + dx == xd[3];
      Value* in = x;
      if (!whole_input) {
        ASSIGN_OR_RETURN(in, b.Op("Slice", {x, b.Int64s({rows.lo + dy, cols.lo + dx}),
                                            b.Int64s({rows.hi + dy, cols.hi + dx}), b.Int64s({2, 3})}));
      }
      const bool whole_output = rows.size() == oh && cols.size() == ow;
      std::vector<Value*> conv_in = {in, b.Constant(TapWeights(w, i, j))};
      if (!bias_added && whole_output) {
        conv_in.push_back(bias);
        bias_added = true;
      }
      ASSIGN_OR_RETURN(Value * part, b.Op("Conv", conv_in));
      if (!whole_output) {
        ASSIGN_OR_RETURN(part, b.Op("Pad", {part, b.Int64s({0, 0, rows.lo, cols.lo, 0, 0, oh - rows.hi, ow - cols.hi})}));
      }
      if (sum == nullptr) {
        sum = part;
      } else {
        ASSIGN_OR_RETURN(sum, b.Op("Add", {sum, part}));
      }
    }
  }
  if (!bias_added) {
    ASSIGN_OR_RETURN(Value * channels, b.Reshape(bias, {wd[0], 1, 1}));
    ASSIGN_OR_RETURN(sum, b.Op("Add", {sum, channels}));
  }
  RETURN_IF_ERROR(ProduceInto(graph, sum, y));
  return true;
}

}  // namespace

absl::StatusOr<bool> LiveTapRegions::Run(Graph& graph) {
  auto is_conv = [](const Node& n) { return IsOp(&n, "Conv"); };
  return RewriteSelectedNodes(graph, is_conv, Rewrite);
}

}  // namespace kiln
