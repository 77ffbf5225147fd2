// LayerNorm recognition, anchored on the first ReduceMean (the mean of x).
#include "compiler_core/passes/layer_norm_recognition.h"

#include <algorithm>
#include <set>

#include "base/status_macros.h"
#include "compiler_core/passes/graph_rewriting.h"
#include "compiler_core/passes/reduce_axes.h"

namespace kiln {
namespace {

constexpr double kTol = 1e-4;

// True when `p` (a constant or value) broadcasts into the normalised trailing
// dims `norm` without adding axes or changing their extents.
bool FitsNormalizedAxes(const Value* p, const std::vector<Dim>& norm) {
  const TensorType& t = p->type();
  if (!t.IsStatic() || t.dtype != DType::kFloat32 || t.rank() > static_cast<int64_t>(norm.size())) return false;
  for (int64_t i = 0; i < t.rank(); ++i) {
    const Dim& d = norm[norm.size() - t.rank() + i];
    if (t.dims[i].value != 1 && !(d.is_static() && d.value == t.dims[i].value)) return false;
  }
  return true;
}

struct Match {
  std::vector<Node*> nodes;
  Node* root = nullptr;
  Value* x = nullptr;
  int64_t axis = 0;
  float epsilon = 0;
  Value* gamma = nullptr;
  Value* beta = nullptr;
};

std::optional<Match> MatchLayerNorm(const Graph& graph, Node* mean) {
  Match m;
  m.x = mean->input(0);
  std::optional<std::vector<int64_t>> axes = KeptReducedAxes(mean);
  const TensorType& xt = m.x->type();
  if (!axes || !xt.known || xt.dtype != DType::kFloat32) return std::nullopt;
  for (size_t i = 0; i < axes->size(); ++i) {
    if ((*axes)[i] != xt.rank() - static_cast<int64_t>(axes->size()) + static_cast<int64_t>(i)) return std::nullopt;
  }
  m.axis = (*axes)[0];
  m.nodes.push_back(mean);
  Node* sub = SoleUser(graph, mean->output(0));
  if (!IsOp(sub, "Sub") || sub->input(0) != m.x || sub->input(1) != mean->output(0)) return std::nullopt;
  m.nodes.push_back(sub);
  Value* d = sub->output(0);
  // d feeds the square and the division.
  Node* sq = nullptr;
  Node* div = nullptr;
  for (Node* u : d->users()) {
    if (IsOp(u, "Div") && u->input(0) == d) div = u;
    else if (IsOp(u, "Pow") && u->input(0) == d && IsScalarNear(u->input(1), 2.0, 0)) sq = u;
    else if (IsOp(u, "Mul") && u->input(0) == d && u->input(1) == d) sq = u;
  }
  if (!sq || !div || d->users().size() != 2) return std::nullopt;
  m.nodes.push_back(sq);
  m.nodes.push_back(div);
  Node* var = SoleUser(graph, sq->output(0));
  if (!IsOp(var, "ReduceMean") || KeptReducedAxes(var) != axes) return std::nullopt;
  m.nodes.push_back(var);
  Node* add_eps = SoleUser(graph, var->output(0));
  if (!IsOp(add_eps, "Add")) return std::nullopt;
  Value* eps = OtherOperand(add_eps, var->output(0));
  std::optional<std::vector<double>> eps_value = ConstantValues(eps);
  if (!eps_value || eps_value->size() != 1 || (*eps_value)[0] < 0) return std::nullopt;
  m.epsilon = static_cast<float>((*eps_value)[0]);
  m.nodes.push_back(add_eps);
  Node* sqrt = SoleUser(graph, add_eps->output(0));
  if (!IsOp(sqrt, "Sqrt") || div->input(1) != sqrt->output(0)) return std::nullopt;
  m.nodes.push_back(sqrt);
  m.root = div;
  const std::vector<Dim> norm(xt.dims.begin() + m.axis, xt.dims.end());
  // Optional affine part: * gamma, + beta.
  Node* mul = SoleUser(graph, div->output(0));
  if (IsOp(mul, "Mul")) {
    Value* g = OtherOperand(mul, div->output(0));
    if (g && FitsNormalizedAxes(g, norm) && mul->output(0)->type() == xt) {
      m.gamma = g;
      m.nodes.push_back(mul);
      m.root = mul;
      Node* add = SoleUser(graph, mul->output(0));
      Value* b = IsOp(add, "Add") ? OtherOperand(add, mul->output(0)) : nullptr;
      if (b && FitsNormalizedAxes(b, norm) && add->output(0)->type() == xt) {
        m.beta = b;
        m.nodes.push_back(add);
        m.root = add;
      }
    }
  }
  if (!(m.root->output(0)->type() == xt)) return std::nullopt;
  for (const Value* p : {m.gamma, m.beta}) {
    if (p && std::find(m.nodes.begin(), m.nodes.end(), p->producer()) != m.nodes.end()) return std::nullopt;
  }
  if (!IsPrivateToPattern(graph, m.nodes, m.root)) return std::nullopt;
  return m;
}

}  // namespace

absl::StatusOr<bool> LayerNormRecognition::Run(Graph& graph) {
  std::vector<Node*> anchors;
  for (const auto& n : graph.nodes()) {
    if (IsOp(n.get(), "ReduceMean")) anchors.push_back(n.get());
  }
  std::set<const Node*> removed;
  bool changed = false;
  for (Node* a : anchors) {
    if (removed.count(a)) continue;
    std::optional<Match> m = MatchLayerNorm(graph, a);
    if (!m) continue;
    removed.insert(m->nodes.begin(), m->nodes.end());
    Value* gamma = m->gamma;
    if (gamma == nullptr) {
      // LayerNormalization requires a scale: ones over the normalised axes.
      std::vector<int64_t> dims;
      for (size_t i = m->axis; i < m->x->type().dims.size(); ++i) dims.push_back(m->x->type().dims[i].value);
      if (std::any_of(dims.begin(), dims.end(), [](int64_t v) { return v < 0; })) continue;
      Tensor ones(DType::kFloat32, dims);
      for (int64_t i = 0; i < ones.num_elements(); ++i) ones.data<float>()[i] = 1.0f;
      gamma = AddFreshConstant(graph, m->root->name() + "_scale", std::move(ones));
    }
    std::vector<Value*> inputs = {m->x, gamma};
    if (m->beta) inputs.push_back(m->beta);
    RETURN_IF_ERROR(ReplacePatternWithNode(graph, m->nodes, m->root, "LayerNormalization", inputs,
                                           {{"axis", m->axis}, {"epsilon", m->epsilon}})
                        .status());
    changed = true;
  }
  if (changed) FinishRewrites(graph);
  return changed;
}

}  // namespace kiln
