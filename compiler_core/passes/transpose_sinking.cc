// Transpose sinking (see transpose_sinking.h).
#include "compiler_core/passes/transpose_sinking.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "base/status_macros.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

bool StaticValue(const Value* v) { return v != nullptr && v->type().known && v->type().IsStatic(); }

bool Small(const Value* v) { return StaticValue(v) && NumElements(v->type().StaticDims()) <= kSinkSmallElements; }

// How a node computes on a value of the region's layout.
enum class Kind { kNone, kElementwise, kPad, kReduce };

Kind KindOf(const Node& n) {
  if (!IsDefaultDomain(n.domain()) || n.num_outputs() != 1) return Kind::kNone;
  if (n.op_type() == "Pad") return Kind::kPad;
  if (n.op_type().rfind("Reduce", 0) == 0) return Kind::kReduce;
  const OpDef* def = FindOpDef(n.domain(), n.op_type());
  // BatchNormalization is per channel (axis 1), not broadcast; an op with an
  // axis attribute reads one.
  if (def == nullptr || def->traits.op_class != OpClass::kElementwise || n.op_type() == "BatchNormalization" ||
      n.op_type() == "Dropout" || n.has_attr("axis")) {
    return Kind::kNone;
  }
  return Kind::kElementwise;
}

// The region of layout-agnostic nodes below a Transpose.
struct Region {
  const Node* root = nullptr;
  std::vector<int64_t> perm, inverse;
  int64_t rank = 0;
  std::set<const Value*> values;  // in the Transpose's output layout: root's output and every node's
  std::vector<Node*> nodes;       // in graph order
};

// Pads of the region's axes [begins..., ends...] as pads of the root
// input's: the region's axis a is the input's axis perm[a].
std::optional<std::vector<int64_t>> PermutedPads(const Region& r, const std::vector<int64_t>& pads) {
  if (static_cast<int64_t>(pads.size()) != 2 * r.rank) return std::nullopt;
  std::vector<int64_t> out(2 * r.rank);
  for (int64_t a = 0; a < r.rank; ++a) {
    out[r.perm[a]] = pads[a];
    out[r.perm[a] + r.rank] = pads[a + r.rank];
  }
  return out;
}

// Reduced axes of the region as axes of the root input (negative ones
// resolved).
std::optional<std::vector<int64_t>> PermutedAxes(const Region& r, const std::vector<int64_t>& axes) {
  std::vector<int64_t> out;
  for (int64_t ax : axes) {
    if (ax < 0) ax += r.rank;
    if (ax < 0 || ax >= r.rank) return std::nullopt;
    out.push_back(r.perm[ax]);
  }
  return out;
}

std::vector<int64_t> AsInts(const std::vector<double>& v) { return std::vector<int64_t>(v.begin(), v.end()); }

// Pad's pads or Reduce*'s axes, from the attribute (Pad before opset 11,
// Reduce* before 18) or the constant input; an empty list for a Reduce*
// without axes (every axis); nullopt when not a constant.
std::optional<std::vector<int64_t>> Params(const Node& n, bool pad) {
  const char* name = pad ? "pads" : "axes";
  if (n.has_attr(name)) return n.GetInts(name, {});
  if (n.input(1) == nullptr) return pad ? std::nullopt : std::optional<std::vector<int64_t>>(std::vector<int64_t>());
  std::optional<std::vector<double>> v = ConstantValues(n.input(1));
  if (!v) return std::nullopt;
  return AsInts(*v);
}

// Pad's or Reduce*'s parameters in the root input's layout.
std::optional<std::vector<int64_t>> PermutedParams(const Region& r, const Node& n, bool pad) {
  std::optional<std::vector<int64_t>> p = Params(n, pad);
  if (!p) return std::nullopt;
  return pad ? PermutedPads(r, *p) : PermutedAxes(r, *p);
}

// Whether `n`, reading region values, can join the region: an elementwise
// node's other inputs of at most the region's rank (side inputs: what
// bringing them to the root's layout costs is Pays' business), Pad's and
// Reduce's parameters constant, the result of the region's rank.
bool CanJoin(const Region& r, const Node& n) {
  const Kind kind = KindOf(n);
  if (kind == Kind::kNone || !StaticValue(n.output(0)) || n.output(0)->type().rank() != r.rank) return false;
  for (int i = 0; i < n.num_inputs(); ++i) {
    const Value* in = n.input(i);
    if (in == nullptr || r.values.count(in) > 0) {
      if (in != nullptr && i > 0 && kind != Kind::kElementwise) return false;  // a region value as pads or axes
      continue;
    }
    if (i == 0 && kind != Kind::kElementwise) return false;
    if (kind == Kind::kElementwise) {
      if (!StaticValue(in) || in->type().rank() > r.rank) return false;
    } else if (!in->is_constant()) {
      return false;
    }
  }
  if (kind == Kind::kPad) return n.input(3) == nullptr && PermutedParams(r, n, true).has_value();  // no axes input
  if (kind == Kind::kReduce) return n.GetInt("keepdims", 1) == 1 && PermutedParams(r, n, false).has_value();
  return true;
}

std::optional<Region> Collect(const Graph& graph, const Node* t) {
  std::optional<std::vector<int64_t>> perm = TransposePermutation(t);
  if (!perm || !StaticValue(t->output(0))) return std::nullopt;
  Region r;
  r.root = t;
  r.perm = *perm;
  r.rank = static_cast<int64_t>(perm->size());
  r.inverse.assign(perm->size(), 0);
  for (size_t i = 0; i < perm->size(); ++i) r.inverse[(*perm)[i]] = static_cast<int64_t>(i);
  r.values.insert(t->output(0));
  std::vector<const Value*> work = {t->output(0)};
  std::set<const Node*> in_region;
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    for (Node* u : v->users()) {
      if (in_region.count(u) > 0 || !CanJoin(r, *u)) continue;
      in_region.insert(u);
      r.values.insert(u->output(0));
      work.push_back(u->output(0));
    }
  }
  // Graph order (nodes() is topological).
  for (const auto& n : graph.nodes()) {
    if (in_region.count(n.get()) > 0) r.nodes.push_back(n.get());
  }
  // A node that joined before one of its region inputs did is still fine:
  // every input is a region value, a constant or small by CanJoin.
  return r;
}

bool Undoes(const Region& r, const Node* n) {
  if (!IsOp(n, "Transpose")) return false;
  std::optional<std::vector<int64_t>> q = TransposePermutation(n);
  if (!q || q->size() != r.perm.size()) return false;
  for (size_t i = 0; i < q->size(); ++i) {
    if (r.perm[(*q)[i]] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// The input of `v`'s producer when it is a Transpose by the region's own
// permutation (a value an earlier sinking handed back): the side input in
// the root's layout for free.
Value* Untransposed(const Region& r, const Value* v) {
  Node* t = ProducerIs(v, "Transpose");
  if (t == nullptr) return nullptr;
  std::optional<std::vector<int64_t>> q = TransposePermutation(t);
  return q && *q == r.perm ? t->input(0) : nullptr;
}

// A value that costs a full copy to transpose.
bool Large(const Value* v) { return !v->is_constant() && !Small(v); }

// Whether rewriting pays, in feature-map copies: it removes the root (when
// nothing outside the region reads it) and every Transpose outside that
// undoes the root's (the pair cancels); it adds one for every large side input
// that is not already a transpose by the root's permutation and for every
// large value handed to any other reader or to the graph's outputs. Each
// rewrite removes more than it adds, so sinking ends.
bool Pays(const Graph& graph, const Region& r) {
  if (r.nodes.empty()) return false;
  const Value* root_out = r.root->output(0);
  bool root_stays = IsGraphOutput(graph, root_out);
  std::set<const Node*> members(r.nodes.begin(), r.nodes.end());
  int removed = 0, added = 0;
  std::set<const Value*> sides;
  for (const Node* n : r.nodes) {
    for (const Value* in : n->inputs()) {
      if (in != nullptr && r.values.count(in) == 0 && Large(in) && Untransposed(r, in) == nullptr) sides.insert(in);
    }
  }
  added += static_cast<int>(sides.size());
  for (const Value* v : r.values) {
    bool handed = v != root_out && IsGraphOutput(graph, v) && Large(v);
    for (const Node* u : v->users()) {
      if (members.count(u) > 0) continue;
      if (v == root_out) {
        root_stays = true;
      } else if (Undoes(r, u)) {
        ++removed;
      } else if (Large(v)) {
        handed = true;
      }
    }
    added += handed ? 1 : 0;
  }
  removed += root_stays ? 0 : 1;
  return removed > added;
}

// A side input of the region's layout in the root's input layout: single
// elements broadcast as they are, a transpose by the root's permutation is
// undone by reading its input, anything else is brought to the region's
// rank and transposed by the inverse permutation (folded for constants).
absl::StatusOr<Value*> SideInput(NodeBuilder& b, const Region& r, Value* s) {
  const std::vector<int64_t> dims = s->type().StaticDims();
  if (NumElements(dims) == 1) return s;
  if (Value* u = Untransposed(r, s)) return u;
  Value* full = s;
  if (static_cast<int64_t>(dims.size()) < r.rank) {
    std::vector<int64_t> padded(r.rank - dims.size(), 1);
    padded.insert(padded.end(), dims.begin(), dims.end());
    ASSIGN_OR_RETURN(full, b.Reshape(s, padded));
  }
  return b.Op("Transpose", {full}, {{"perm", r.inverse}});
}

absl::StatusOr<bool> Sink(Graph& graph, Node* t) {
  std::optional<Region> found = Collect(graph, t);
  if (!found || !Pays(graph, *found)) return false;
  const Region& r = *found;
  NodeBuilder b(graph, t->name() + "/sunk");
  std::map<const Value*, Value*> moved = {{t->output(0), t->input(0)}};  // region value -> root-input layout
  for (Node* n : r.nodes) {
    std::vector<Value*> inputs;
    std::map<std::string, AttrValue> attrs = n->attrs();
    const Kind kind = KindOf(*n);
    for (int i = 0; i < n->num_inputs(); ++i) {
      Value* in = n->input(i);
      if (in == nullptr) {
        inputs.push_back(nullptr);
      } else if (auto it = moved.find(in); it != moved.end()) {
        inputs.push_back(it->second);
      } else if (kind == Kind::kElementwise) {
        ASSIGN_OR_RETURN(Value * s, SideInput(b, r, in));
        inputs.push_back(s);
      } else if ((kind == Kind::kPad || kind == Kind::kReduce) && i == 1) {
        inputs.push_back(b.Int64s(*PermutedParams(r, *n, kind == Kind::kPad)));  // CanJoin checked it
      } else {
        inputs.push_back(in);  // Pad's constant value
      }
    }
    // Before opset 18 (Reduce*) and 11 (Pad) the parameter is an attribute.
    const char* param = kind == Kind::kReduce ? "axes" : kind == Kind::kPad ? "pads" : nullptr;
    if (param != nullptr && n->has_attr(param)) attrs[param] = *PermutedParams(r, *n, kind == Kind::kPad);
    ASSIGN_OR_RETURN(Value * out, b.Op(n->op_type(), inputs, attrs));
    moved[n->output(0)] = out;
  }
  // Values read outside the region (or graph outputs) get their layout back.
  std::set<const Node*> members(r.nodes.begin(), r.nodes.end());
  std::vector<std::pair<Value*, Value*>> handed;  // old value, its transposed-back replacement
  for (Node* n : r.nodes) {
    Value* v = n->output(0);
    bool outside = IsGraphOutput(graph, v);
    for (const Node* u : v->users()) outside = outside || members.count(u) == 0;
    if (!outside) continue;
    ASSIGN_OR_RETURN(Value * back, b.Op("Transpose", {moved[v]}, {{"perm", r.perm}}));
    handed.emplace_back(v, back);
  }
  for (auto it = r.nodes.rbegin(); it != r.nodes.rend(); ++it) graph.RemoveNode(*it);
  for (const auto& [old_value, back] : handed) RETURN_IF_ERROR(ProduceInto(graph, back, old_value));
  if (t->output(0)->users().empty() && !IsGraphOutput(graph, t->output(0))) graph.RemoveNode(t);
  return true;
}

}  // namespace

absl::StatusOr<bool> TransposeSinking::Run(Graph& graph) {
  auto is_transpose = [](const Node& n) { return IsOp(&n, "Transpose"); };
  return RewriteSelectedNodes(graph, is_transpose, Sink);
}

}  // namespace kiln
