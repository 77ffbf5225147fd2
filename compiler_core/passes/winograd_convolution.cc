// Winograd convolution (see winograd_convolution.h).
#include "compiler_core/passes/winograd_convolution.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/window.h"
#include "compiler_core/frontend/ops/winograd.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

bool AllOnes(const std::vector<int64_t>& v) {
  for (int64_t x : v) {
    if (x != 1) return false;
  }
  return true;
}

// The tile size that pays for `n` images of an oh x ow output whose kernel
// has `kg` output channels per group and `weights` floats (K x C per group,
// 3x3 taps apart), or 0; `lanes`: the target's f32 lanes, 0 for none known
// (winograd_convolution.h).
int64_t ChooseTile(int64_t n, int64_t oh, int64_t ow, int64_t kg, int64_t weights, int64_t lanes) {
  for (int64_t m : {4, 2}) {
    const int64_t tiles = n * ((oh + m - 1) / m) * ((ow + m - 1) / m);
    if (tiles < kMinWinogradTiles) continue;
    if (lanes == 0 || kg % kDirectChannelBlock != 0) return m;
    const bool one_vector = tiles <= lanes;
    const bool large = (m + 2) * (m + 2) * weights * static_cast<int64_t>(sizeof(float)) > kMaxWinogradWeightBytes;
    if (m == 4) return one_vector && large ? 0 : m;
    return one_vector || large ? 0 : m;
  }
  return 0;
}

absl::StatusOr<bool> Rewrite(Graph& graph, Node* n, int64_t lanes) {
  const std::optional<ConstantWeightConv> ops = MatchConstantWeightConv(*n);
  const int64_t groups = n->GetInt("group", 1);
  if (!ops || ops->x->type().rank() != 4 || groups < 1) return false;
  Value *x = ops->x, *w = ops->w, *bias = ops->bias;
  const std::vector<int64_t> wd = w->constant().dims();
  if (wd.size() != 4 || wd[2] != 3 || wd[3] != 3) return false;
  absl::StatusOr<ops::Window> win = ops::ForwardWindow(*n, x->type(), 0, {3, 3}, true);
  if (!win.ok() || !AllOnes(win->stride) || !AllOnes(win->dilation)) return false;
  const std::vector<int64_t> xd = x->type().StaticDims();
  const int64_t k = wd[0], c = wd[1];  // c: input channels per group
  if (c * groups != xd[1] || k % groups != 0) return false;
  const int64_t kg = k / groups;  // output channels per group
  if (c < kMinWinogradChannels || kg < kMinWinogradChannels) return false;
  if (win->pad_begin[0] < 0 || win->pad_begin[1] < 0 || win->pad_end[0] < 0 || win->pad_end[1] < 0) return false;
  const int64_t oh = win->out[0], ow = win->out[1];
  const int64_t m = ChooseTile(xd[0], oh, ow, kg, k * c, lanes);
  if (m == 0) return false;
  const int64_t covered = ((oh + m - 1) / m * m) * ((ow + m - 1) / m * m);
  if (kg <= kFewWinogradOutputChannels && covered * 4 >= oh * ow * 5) return false;
  const ops::WinogradTransform& t = *ops::FindWinogradTransform(m);

  const std::string name = n->name();
  Value* y = n->output(0);
  graph.RemoveNode(n);
  NodeBuilder b(graph, name);
  // U [alpha^2, K, C per group]; grouped, [alpha^2, groups, K per group, C
  // per group] (group g's output channels are g*kg .. g*kg + kg - 1).
  const int64_t a2 = t.alpha * t.alpha;
  Value* u = b.Constant(groups == 1 ? ops::WinogradWeights(w->constant(), t)
                                    : ops::WinogradWeights(w->constant(), t).Reshaped({a2, groups, kg, c}));
  ASSIGN_OR_RETURN(Value * v, graph.AddValue(graph.UniqueValueName(absl::StrCat(name, "/WinogradInput"))));
  std::map<std::string, AttrValue> in_attrs = {
      {"tile", m}, {"pads", std::vector<int64_t>{win->pad_begin[0], win->pad_begin[1], win->pad_end[0], win->pad_end[1]}}};
  if (groups > 1) in_attrs["groups"] = groups;
  RETURN_IF_ERROR(graph.AddNode("WinogradInput", absl::StrCat(name, "/WinogradInput"), {x}, {v}, std::move(in_attrs),
                                std::string(kKilnDomain))
                      .status());
  // Grouped, V is [alpha^2, groups, C per group, tiles] and the MatMul is
  // batched over (alpha^2, groups): each group's products over its own
  // input channels, [alpha^2, groups, K per group, tiles] into the output
  // transform.
  ASSIGN_OR_RETURN(Value * prod, b.Op("MatMul", {u, v}));
  ASSIGN_OR_RETURN(Value * out, graph.AddValue(graph.UniqueValueName(absl::StrCat(name, "/WinogradOutput"))));
  std::vector<Value*> out_in = {prod};
  if (bias != nullptr) out_in.push_back(bias);
  std::map<std::string, AttrValue> out_attrs = {{"tile", m},
                                                {"output_shape", std::vector<int64_t>{xd[0], k, oh, ow}}};
  RETURN_IF_ERROR(graph.AddNode("WinogradOutput", absl::StrCat(name, "/WinogradOutput"), out_in, {out},
                                std::move(out_attrs), std::string(kKilnDomain))
                      .status());
  RETURN_IF_ERROR(ProduceInto(graph, out, y));
  return true;
}

}  // namespace

absl::StatusOr<bool> WinogradConvolution::Run(Graph& graph) {
  auto is_conv = [](const Node& n) { return IsOp(&n, "Conv"); };
  return RewriteSelectedNodes(graph, is_conv, [this](Graph& g, Node* n) { return Rewrite(g, n, lanes_); });
}

}  // namespace kiln
