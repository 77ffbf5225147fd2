// Shared rewriting primitives: constants, pattern privacy, node replacement
// that keeps graph-output names, topological order.
#include "compiler_core/passes/graph_rewriting.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/shape_inference.h"

namespace kiln {

std::optional<std::vector<double>> ConstantValues(const Value* v, int64_t max_elements) {
  if (v == nullptr || !v->is_constant()) return std::nullopt;
  const Tensor& t = v->constant();
  const int64_t n = t.num_elements();
  if (n > max_elements) return std::nullopt;
  std::vector<double> out(n);
  switch (t.dtype()) {
    case DType::kFloat32:
      for (int64_t i = 0; i < n; ++i) out[i] = t.data<float>()[i];
      break;
    case DType::kFloat64:
      for (int64_t i = 0; i < n; ++i) out[i] = t.data<double>()[i];
      break;
    case DType::kInt32:
      for (int64_t i = 0; i < n; ++i) out[i] = t.data<int32_t>()[i];
      break;
    case DType::kInt64:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(t.data<int64_t>()[i]);
      break;
    default:
      return std::nullopt;
  }
  return out;
}

bool IsConstantNear(const Value* v, double expected, double tol) {
  std::optional<std::vector<double>> vals = ConstantValues(v);
  if (!vals || vals->empty()) return false;
  const double bound = tol * std::max(1.0, std::abs(expected));
  return std::all_of(vals->begin(), vals->end(), [&](double x) { return std::abs(x - expected) <= bound; });
}

bool IsScalarNear(const Value* v, double expected, double tol) {
  return v != nullptr && v->is_constant() && v->constant().num_elements() == 1 && IsConstantNear(v, expected, tol);
}

bool IsGraphOutput(const Graph& graph, const Value* v) {
  return std::find(graph.outputs().begin(), graph.outputs().end(), v) != graph.outputs().end();
}

bool IsOp(const Node* n, const char* op) {
  return n != nullptr && n->op_type() == op && IsDefaultDomain(n->domain());
}

std::optional<ChannelAffine> BatchNormAffine(const Node& bn, int64_t channels) {
  if (!IsOp(&bn, "BatchNormalization") || bn.num_inputs() < 5 || bn.GetInt("training_mode", 0) != 0) {
    return std::nullopt;
  }
  std::vector<std::vector<double>> p;  // scale, B, mean, var
  for (int i = 1; i <= 4; ++i) {
    const Value* v = bn.input(i);
    if (v == nullptr || !v->is_constant() || v->constant().dtype() != DType::kFloat32 || v->constant().rank() != 1) {
      return std::nullopt;
    }
    std::optional<std::vector<double>> vals = ConstantValues(v);
    if (!vals || static_cast<int64_t>(vals->size()) != channels) return std::nullopt;
    p.push_back(std::move(*vals));
  }
  const double eps = bn.GetFloat("epsilon", 1e-5f);
  ChannelAffine a{std::vector<double>(channels), std::vector<double>(channels)};
  for (int64_t m = 0; m < channels; ++m) {
    a.scale[m] = p[0][m] / std::sqrt(p[3][m] + eps);
    a.shift[m] = p[1][m] - p[2][m] * a.scale[m];
  }
  return a;
}

std::optional<ConstantWeightConv> MatchConstantWeightConv(const Node& conv) {
  ConstantWeightConv c{conv.input(0), conv.input(1), conv.num_inputs() > 2 ? conv.input(2) : nullptr};
  if (c.x == nullptr || c.w == nullptr || !c.x->type().known || !c.x->type().IsStatic() ||
      c.x->type().dtype != DType::kFloat32 || !c.w->is_constant() || c.w->constant().dtype() != DType::kFloat32) {
    return std::nullopt;
  }
  if (c.bias != nullptr && (!c.bias->type().known || c.bias->type().dtype != DType::kFloat32)) return std::nullopt;
  return c;
}

std::optional<std::vector<int64_t>> TransposePermutation(const Node* t) {
  const TensorType& in = t->input(0)->type();
  if (!in.known) return std::nullopt;
  std::vector<int64_t> perm(in.rank());
  std::iota(perm.rbegin(), perm.rend(), 0);
  perm = t->GetInts("perm", perm);
  if (static_cast<int64_t>(perm.size()) != in.rank()) return std::nullopt;
  return perm;
}

Node* ProducerIs(const Value* v, const char* op) {
  if (v == nullptr) return nullptr;
  Node* p = v->producer();
  if (p == nullptr || p->op_type() != op || !IsDefaultDomain(p->domain())) return nullptr;
  return p;
}

Node* SoleUser(const Graph& graph, const Value* v) {
  if (v == nullptr || v->users().size() != 1 || IsGraphOutput(graph, v)) return nullptr;
  return v->users()[0];
}

Value* OtherOperand(const Node* binary, const Value* a) {
  if (binary == nullptr || binary->num_inputs() != 2) return nullptr;
  if (binary->input(0) == a) return binary->input(1);
  if (binary->input(1) == a) return binary->input(0);
  return nullptr;
}

bool IsPrivateToPattern(const Graph& graph, const std::vector<Node*>& pattern, const Node* root) {
  std::unordered_set<const Node*> in_pattern(pattern.begin(), pattern.end());
  for (const Node* n : pattern) {
    if (n == root) continue;
    for (const Value* o : n->outputs()) {
      if (IsGraphOutput(graph, o)) return false;
      for (const Node* u : o->users()) {
        if (!in_pattern.count(u)) return false;
      }
    }
  }
  return true;
}

void RemoveNodes(Graph& graph, const std::vector<Node*>& nodes) {
  std::unordered_set<Node*> done;
  for (Node* n : nodes) {
    if (done.insert(n).second) graph.RemoveNode(n);
  }
}

absl::StatusOr<Node*> ReplacePatternWithNode(Graph& graph, const std::vector<Node*>& pattern, Node* root,
                                             std::string op_type, std::vector<Value*> inputs,
                                             std::map<std::string, AttrValue> attrs, std::string name) {
  Value* out = root->output(0);
  if (name.empty()) name = root->name();
  RemoveNodes(graph, pattern);
  return graph.AddNode(std::move(op_type), std::move(name), std::move(inputs), {out}, std::move(attrs));
}

namespace {

// Removes `n` and adds it again (at the end) with `outputs`.
Node* Recreate(Graph& graph, Node* n, std::vector<Value*> outputs) {
  std::string op = n->op_type(), name = n->name(), domain = n->domain();
  std::vector<Value*> inputs = n->inputs();
  std::map<std::string, AttrValue> attrs = n->attrs();
  graph.RemoveNode(n);
  absl::StatusOr<Node*> added = graph.AddNode(op, name, inputs, std::move(outputs), std::move(attrs), domain);
  return added.ok() ? *added : nullptr;
}

}  // namespace

bool ForwardOutput(Graph& graph, Node* n, Value* replacement) {
  Value* out = n->output(0);
  for (int i = 1; i < n->num_outputs(); ++i) {
    if (!n->output(i)->users().empty() || IsGraphOutput(graph, n->output(i))) return false;
  }
  if (!IsGraphOutput(graph, out)) {
    graph.ReplaceAllUses(out, replacement);
    graph.RemoveNode(n);
    return true;
  }
  Node* p = replacement->producer();
  if (p == nullptr || IsGraphOutput(graph, replacement) || replacement->users().size() != 1 ||
      replacement->users()[0] != n) {
    return false;
  }
  graph.RemoveNode(n);
  std::vector<Value*> outputs = p->outputs();
  std::replace(outputs.begin(), outputs.end(), replacement, out);
  Recreate(graph, p, std::move(outputs));
  return true;
}

Value* AddFreshConstant(Graph& graph, const std::string& hint, Tensor t) {
  return *graph.AddConstant(graph.UniqueValueName(hint), std::move(t));
}

absl::StatusOr<Value*> NodeBuilder::Op(const std::string& op, std::vector<Value*> inputs,
                                       std::map<std::string, AttrValue> attrs) {
  const std::string name = absl::StrCat(prefix_, "/", op, "_", count_++);
  ASSIGN_OR_RETURN(Value * out, graph_.AddValue(graph_.UniqueValueName(name)));
  RETURN_IF_ERROR(graph_.AddNode(op, name, std::move(inputs), {out}, std::move(attrs)).status());
  return out;
}

Value* NodeBuilder::Constant(Tensor t) { return AddFreshConstant(graph_, absl::StrCat(prefix_, "_const"), std::move(t)); }

Value* NodeBuilder::Int64s(const std::vector<int64_t>& v) {
  Value*& c = int64s_[v];
  if (c == nullptr) c = Constant(Tensor::FromVector(DType::kInt64, {static_cast<int64_t>(v.size())}, v));
  return c;
}

Value* NodeBuilder::Int64(int64_t v) {
  Value*& c = int64_[v];
  if (c == nullptr) c = Constant(Tensor::FromVector(DType::kInt64, {}, std::vector<int64_t>{v}));
  return c;
}

Value* NodeBuilder::Float(float v) {
  Value*& c = floats_[v];
  if (c == nullptr) c = Constant(Tensor::FromVector(DType::kFloat32, {}, std::vector<float>{v}));
  return c;
}

absl::StatusOr<Value*> NodeBuilder::Reshape(Value* v, const std::vector<int64_t>& dims) {
  return Op("Reshape", {v, Int64s(dims)});
}

absl::StatusOr<Value*> NodeBuilder::Slice(Value* v, int64_t axis, int64_t start, int64_t end) {
  return Op("Slice", {v, Int64s({start}), Int64s({end}), Int64s({axis})});
}

absl::Status ProduceInto(Graph& graph, Value* computed, Value* target) {
  Node* producer = computed->producer();
  if (producer == nullptr || !computed->users().empty() || IsGraphOutput(graph, computed)) {
    return graph.AddNode("Identity", absl::StrCat(target->name(), "/Identity"), {computed}, {target}).status();
  }
  std::vector<Value*> ins = producer->inputs(), outs = producer->outputs();
  std::replace(outs.begin(), outs.end(), computed, target);
  std::map<std::string, AttrValue> attrs = producer->attrs();
  const std::string op = producer->op_type(), name = producer->name(), domain = producer->domain();
  graph.RemoveNode(producer);
  return graph.AddNode(op, name, std::move(ins), std::move(outs), std::move(attrs), domain).status();
}

void RestoreTopologicalOrder(Graph& graph) {
  std::vector<Node*> current;
  for (const auto& n : graph.nodes()) current.push_back(n.get());
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < current.size(); ++i) position[current[i]] = i;
  bool ordered = true;
  for (const Node* n : current) {
    for (const Value* in : n->inputs()) {
      if (in && in->producer() && position.at(in->producer()) > position.at(n)) ordered = false;
    }
  }
  if (ordered) return;

  // Depth-first post-order over producers, visiting nodes in their current
  // order: the result stays as close to the current order as possible.
  std::vector<Node*> sorted;
  std::unordered_set<const Node*> visited;
  for (Node* root : current) {
    if (visited.count(root)) continue;
    std::vector<std::pair<Node*, int>> stack = {{root, 0}};
    visited.insert(root);
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->num_inputs()) {
        Value* in = n->input(next++);
        Node* p = in ? in->producer() : nullptr;
        if (p && !visited.count(p)) {
          visited.insert(p);
          stack.push_back({p, 0});
        }
        continue;
      }
      sorted.push_back(n);
      stack.pop_back();
    }
  }
  size_t first = 0;
  while (first < sorted.size() && sorted[first] == current[first]) ++first;
  for (size_t i = first; i < sorted.size(); ++i) Recreate(graph, sorted[i], sorted[i]->outputs());
}

void FinishRewrites(Graph& graph) {
  RestoreTopologicalOrder(graph);
  graph.RemoveDeadValues();
}

absl::StatusOr<bool> RewriteSelectedNodes(Graph& graph, const std::function<bool(const Node&)>& select,
                                          const std::function<absl::StatusOr<bool>(Graph&, Node*)>& rewrite) {
  std::vector<Node*> selected;
  for (const auto& n : graph.nodes()) {
    if (select(*n)) selected.push_back(n.get());
  }
  bool changed = false;
  for (Node* n : selected) {
    ASSIGN_OR_RETURN(bool c, rewrite(graph, n));
    changed = changed || c;
  }
  if (!changed) return false;
  FinishRewrites(graph);
  RETURN_IF_ERROR(InferShapes(graph));
  return true;
}

}  // namespace kiln
