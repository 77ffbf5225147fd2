// Conv branch merging (see conv_branch_merging.h).
#include "compiler_core/passes/conv_branch_merging.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "base/status_macros.h"
#include "compiler_core/frontend/ops/window.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

// One operand of the Add as a conv over the shared input x: a Conv, or a
// per-channel map of x (an inference BatchNormalization, or x itself), which
// is a 1x1 conv whose weights are diagonal.
struct Branch {
  Node* node = nullptr;  // the Conv or BatchNormalization; null for x itself
  bool conv = false;
  std::vector<int64_t> kernel, pad_begin, stride, dilation;  // conv only
  int64_t group = 1;                                         // conv only
  ChannelAffine diag;                                        // per-channel map only
};

bool IsF32(const Value* v) { return v != nullptr && v->type().known && v->type().dtype == DType::kFloat32; }

// The branch computing `v` from the Add's other operand's input, or from `v`
// itself; `x` receives the value the branch reads.
std::optional<Branch> BranchOf(const Graph& graph, const Node* add, Value* v, Value** x) {
  Node* p = v->producer();
  if (IsOp(p, "Conv") && SoleUser(graph, v) == add) {
    std::optional<ConstantWeightConv> c = MatchConstantWeightConv(*p);
    if (!c || (c->bias != nullptr && !c->bias->is_constant())) return std::nullopt;
    const TensorType& xt = c->x->type();
    const std::vector<int64_t>& wd = c->w->constant().dims();
    if (static_cast<int64_t>(wd.size()) != xt.rank()) return std::nullopt;
    absl::StatusOr<ops::Window> win =
        ops::ForwardWindow(*p, xt, 0, std::vector<int64_t>(wd.begin() + 2, wd.end()), true);
    if (!win.ok()) return std::nullopt;
    Branch b{p, true, win->kernel, win->pad_begin, win->stride, win->dilation, p->GetInt("group", 1), {}};
    *x = c->x;
    return b;
  }
  *x = v;
  Branch b;
  if (IsOp(p, "BatchNormalization") && SoleUser(graph, v) == add && p->num_outputs() == 1 && IsF32(p->input(0)) &&
      p->input(0)->type() == v->type()) {
    std::optional<ChannelAffine> a = BatchNormAffine(*p, v->type().StaticDims()[1]);
    if (!a) return std::nullopt;
    b.node = p;
    b.diag = std::move(*a);
    *x = p->input(0);
    return b;
  }
  const int64_t channels = v->type().StaticDims()[1];
  b.diag = ChannelAffine{std::vector<double>(channels, 1.0), std::vector<double>(channels, 0.0)};
  return b;
}

// The merged conv's weights [M, C/group, kernel...] and bias [M], branches
// added in at their offsets into the merged window.
struct MergedWeights {
  std::vector<int64_t> kernel;
  std::vector<float> w, bias;
  int64_t m = 0, cg = 0;

  // Flat index of weight (o, c, tap) where `tap` is a branch's spatial
  // position shifted by `offset`.
  int64_t Index(int64_t o, int64_t c, const std::vector<int64_t>& tap) const {
    int64_t i = o * cg + c;
    for (size_t s = 0; s < kernel.size(); ++s) i = i * kernel[s] + tap[s];
    return i;
  }

  void AddConv(const Branch& b, const std::vector<int64_t>& offset) {
    const Value* wv = b.node->input(1);
    const float* src = wv->constant().data<float>();
    const int64_t nsp = static_cast<int64_t>(b.kernel.size());
    int64_t taps = 1;
    for (int64_t k : b.kernel) taps *= k;
    std::vector<int64_t> tap(nsp);
    for (int64_t oc = 0; oc < m * cg; ++oc) {
      for (int64_t t = 0; t < taps; ++t) {
        int64_t r = t;
        for (int64_t s = nsp - 1; s >= 0; --s) {
          tap[s] = r % b.kernel[s] + offset[s];
          r /= b.kernel[s];
        }
        w[Index(oc / cg, oc % cg, tap)] += src[oc * taps + t];
      }
    }
    const Value* bv = b.node->num_inputs() > 2 ? b.node->input(2) : nullptr;
    if (bv == nullptr) return;
    for (int64_t o = 0; o < m; ++o) bias[o] += bv->constant().data<float>()[o];
  }

  // Output channel o reads input channel o, which is channel o % cg of its
  // group (as many outputs as inputs), at the tap `centre`.
  void AddDiagonal(const ChannelAffine& a, const std::vector<int64_t>& centre) {
    for (int64_t o = 0; o < m; ++o) {
      w[Index(o, o % cg, centre)] += static_cast<float>(a.scale[o]);
      bias[o] += static_cast<float>(a.shift[o]);
    }
  }
};

absl::StatusOr<bool> Merge(Graph& graph, Node* add) {
  if (add->num_inputs() != 2 || add->num_outputs() != 1) return false;
  Value* y = add->output(0);
  for (int i = 0; i < 2; ++i) {
    if (!IsF32(add->input(i)) || !add->input(i)->type().IsStatic() || !(add->input(i)->type() == y->type())) {
      return false;
    }
  }
  if (add->input(0) == add->input(1) || y->type().rank() < 3) return false;
  Value *x0 = nullptr, *x1 = nullptr;
  std::optional<Branch> b0 = BranchOf(graph, add, add->input(0), &x0);
  std::optional<Branch> b1 = BranchOf(graph, add, add->input(1), &x1);
  if (!b0 || !b1) return false;
  if (x0 != x1 || !IsF32(x0) || !x0->type().IsStatic() || (!b0->conv && !b1->conv)) return false;
  const Branch& lead = b0->conv ? *b0 : *b1;
  const std::vector<int64_t> xd = x0->type().StaticDims(), yd = y->type().StaticDims();
  const int64_t nsp = static_cast<int64_t>(lead.kernel.size());
  for (const Branch* b : {&*b0, &*b1}) {
    if (b->conv) {
      if (b->group != lead.group || b->stride != lead.stride || b->dilation != lead.dilation) return false;
      continue;
    }
    // A per-channel map of x: as many channels out as in, the map's extent kept.
    if (xd != yd) return false;
    for (int64_t s : lead.stride) {
      if (s != 1) return false;
    }
  }
  // Each branch's window within the merged one: begin pad P the larger of
  // theirs, a branch offset by (P - its pad) / dilation taps.
  auto kernel_of = [&](const Branch& b) { return b.conv ? b.kernel : std::vector<int64_t>(nsp, 1); };
  auto pad_of = [&](const Branch& b) { return b.conv ? b.pad_begin : std::vector<int64_t>(nsp, 0); };
  std::vector<int64_t> pad_begin(nsp), pad_end(nsp), kernel(nsp), off0(nsp), off1(nsp);
  for (int64_t s = 0; s < nsp; ++s) {
    const int64_t p0 = pad_of(*b0)[s], p1 = pad_of(*b1)[s], d = lead.dilation[s];
    if ((p0 - p1) % d != 0) return false;
    pad_begin[s] = std::max(p0, p1);
    off0[s] = (pad_begin[s] - p0) / d;
    off1[s] = (pad_begin[s] - p1) / d;
    kernel[s] = std::max(off0[s] + kernel_of(*b0)[s], off1[s] + kernel_of(*b1)[s]);
    // The end pad that keeps the output's extent, where one exists.
    const int64_t in = xd[2 + s], out = yd[2 + s], st = lead.stride[s], span = (kernel[s] - 1) * d + 1;
    pad_end[s] = std::max<int64_t>(0, (out - 1) * st + span - in - pad_begin[s]);
    if ((in + pad_begin[s] + pad_end[s] - span) / st + 1 != out) return false;
  }

  // Only where one window holds the other: a 1x3 and a 3x1 merged would
  // cost a 3x3.
  auto taps = [](const std::vector<int64_t>& k) {
    int64_t t = 1;
    for (int64_t e : k) t *= e;
    return t;
  };
  if (taps(kernel) != std::max(taps(kernel_of(*b0)), taps(kernel_of(*b1)))) return false;

  MergedWeights mw;
  mw.kernel = kernel;
  mw.m = yd[1];
  mw.cg = xd[1] / lead.group;
  mw.w.assign(mw.m * mw.cg * taps(kernel), 0.0f);
  mw.bias.assign(mw.m, 0.0f);
  std::vector<Node*> pattern = {add};
  for (auto [b, off] : {std::pair{&*b0, &off0}, std::pair{&*b1, &off1}}) {
    if (b->conv) mw.AddConv(*b, *off);
    else mw.AddDiagonal(b->diag, *off);
    if (b->node != nullptr) pattern.push_back(b->node);
  }
  std::vector<int64_t> wd = {mw.m, mw.cg};
  wd.insert(wd.end(), kernel.begin(), kernel.end());
  // Named after the branch whose window it is (RepVGG's conv_kxk).
  const Branch& widest = b0->conv && taps(kernel_of(*b0)) == taps(kernel) ? *b0 : *b1;
  const std::string name = widest.node->name();
  Value* w = AddFreshConstant(graph, name + "_merged_w", Tensor::FromVector<float>(DType::kFloat32, wd, mw.w));
  Value* bias = AddFreshConstant(graph, name + "_merged_b", Tensor::FromVector<float>(DType::kFloat32, {mw.m}, mw.bias));
  std::vector<int64_t> pads = pad_begin;
  pads.insert(pads.end(), pad_end.begin(), pad_end.end());
  std::map<std::string, AttrValue> attrs = {{"group", lead.group},      {"strides", lead.stride},
                                            {"dilations", lead.dilation}, {"pads", pads},
                                            {"kernel_shape", kernel}};
  RETURN_IF_ERROR(ReplacePatternWithNode(graph, pattern, add, "Conv", {x0, w, bias}, attrs, name).status());
  return true;
}

}  // namespace

absl::StatusOr<bool> ConvBranchMerging::Run(Graph& graph) {
  auto is_add = [](const Node& n) { return IsOp(&n, "Add"); };
  return RewriteSelectedNodes(graph, is_add, Merge);
}

}  // namespace kiln
