// Einsum decomposition (see einsum_decomposition.h).
#include "compiler_core/passes/einsum_decomposition.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/ops/einsum.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

using Labels = std::vector<int>;

bool Contains(const Labels& l, int x) { return std::find(l.begin(), l.end(), x) != l.end(); }

// Builds the replacement of one Einsum node, value by value, naming the new
// nodes after it.
class Rewriter {
 public:
  Rewriter(Graph& graph, const Node& einsum, const ops::EinsumSpec& spec)
      : build_(graph, einsum.name()), spec_(spec) {}

  int64_t Extent(int label) const { return spec_.extents.at(label).value; }

  absl::StatusOr<Value*> Op(const std::string& op, std::vector<Value*> inputs,
                            std::map<std::string, AttrValue> attrs = {}) {
    return build_.Op(op, std::move(inputs), std::move(attrs));
  }

  // `v` (labels `have`) summed over every label not in `keep`.
  absl::StatusOr<Value*> SumOut(Value* v, Labels* have, const Labels& keep) {
    std::vector<int64_t> axes;
    Labels left;
    for (size_t i = 0; i < have->size(); ++i) {
      if (Contains(keep, (*have)[i])) {
        left.push_back((*have)[i]);
      } else {
        axes.push_back(static_cast<int64_t>(i));
      }
    }
    if (axes.empty()) return v;
    *have = left;
    return Op("ReduceSum", {v, build_.Int64s(axes)}, {{"keepdims", int64_t{0}}});
  }

  // `v` (labels `have`) with its dims in the order `want` (a permutation).
  absl::StatusOr<Value*> Permute(Value* v, const Labels& have, const Labels& want) {
    std::vector<int64_t> perm;
    for (int l : want) perm.push_back(std::find(have.begin(), have.end(), l) - have.begin());
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
    if (identity) return v;
    return Op("Transpose", {v}, {{"perm", perm}});
  }

  absl::StatusOr<Value*> Reshape(Value* v, const std::vector<int64_t>& dims) { return build_.Reshape(v, dims); }

  int64_t Product(const Labels& labels) const {
    int64_t p = 1;
    for (int l : labels) p *= Extent(l);
    return p;
  }

 private:
  NodeBuilder build_;
  const ops::EinsumSpec& spec_;
};

// Replaces `n`; false when it does not decompose (left as it is).
absl::StatusOr<bool> Decompose(Graph& graph, Node* n) {
  if (n->num_inputs() < 1 || n->num_inputs() > 2) return false;
  InputTypes types;
  for (int i = 0; i < n->num_inputs(); ++i) {
    if (n->input(i) == nullptr || !n->input(i)->type().IsStatic()) return false;
    types.push_back(&n->input(i)->type());
  }
  // MatMul takes f32 only: other dtypes keep their Einsum when they need it.
  if (types.size() == 2 && (types[0]->dtype != DType::kFloat32 || types[1]->dtype != DType::kFloat32)) return false;
  absl::StatusOr<ops::EinsumSpec> parsed = ops::ParseEinsum(*n, types);
  if (!parsed.ok()) return false;
  const ops::EinsumSpec& spec = *parsed;
  for (const Labels& term : spec.terms) {
    if (std::set<int>(term.begin(), term.end()).size() != term.size()) return false;  // a diagonal
  }
  for (size_t j = 0; j < spec.terms.size(); ++j) {
    const std::vector<int64_t> dims = n->input(j)->type().StaticDims();
    for (size_t k = 0; k < dims.size(); ++k) {
      // An operand's extent-1 dim broadcast against another operand's: only
      // batch labels broadcast (MatMul's batch dims do).
      if (dims[k] != spec.extents.at(spec.terms[j][k]).value) {
        if (spec.terms.size() != 2 || !Contains(spec.out, spec.terms[j][k])) return false;
      }
    }
  }
  Value* out = n->output(0);
  Rewriter r(graph, *n, spec);
  const Labels& o = spec.out;
  std::vector<Value*> inputs = n->inputs();
  graph.RemoveNode(n);
  Value* result = nullptr;
  Labels result_labels;
  if (inputs.size() == 1) {
    Labels a = spec.terms[0];
    ASSIGN_OR_RETURN(Value * v, r.SumOut(inputs[0], &a, o));
    result = v;
    result_labels = a;
  } else {
    Labels a = spec.terms[0], b = spec.terms[1];
    // Each operand's labels the other lacks and the output drops: summed first.
    Labels keep_a = o, keep_b = o;
    for (int l : b) keep_a.push_back(l);
    for (int l : a) keep_b.push_back(l);
    ASSIGN_OR_RETURN(Value * va, r.SumOut(inputs[0], &a, keep_a));
    ASSIGN_OR_RETURN(Value * vb, r.SumOut(inputs[1], &b, keep_b));
    Labels batch, free_a, free_b, contract;
    for (int l : o) {
      if (Contains(a, l) && Contains(b, l)) batch.push_back(l);
      else if (Contains(a, l)) free_a.push_back(l);
      else free_b.push_back(l);
    }
    for (int l : a) {
      if (Contains(b, l) && !Contains(o, l)) contract.push_back(l);
    }
    // Batch extents per operand (1 where that operand broadcasts): its own
    // extents, which summing other labels out does not change.
    auto batch_dims = [&](size_t j) {
      const std::vector<int64_t> dims = inputs[j]->type().StaticDims();
      std::vector<int64_t> d;
      for (int l : batch) {
        const Labels& term = spec.terms[j];
        d.push_back(dims[std::find(term.begin(), term.end(), l) - term.begin()]);
      }
      return d;
    };
    std::vector<int64_t> bda = batch_dims(0), bdb = batch_dims(1);
    Labels order_a = batch, order_b = batch;
    order_a.insert(order_a.end(), free_a.begin(), free_a.end());
    order_a.insert(order_a.end(), contract.begin(), contract.end());
    order_b.insert(order_b.end(), contract.begin(), contract.end());
    order_b.insert(order_b.end(), free_b.begin(), free_b.end());
    ASSIGN_OR_RETURN(Value * ta, r.Permute(va, a, order_a));
    ASSIGN_OR_RETURN(Value * tb, r.Permute(vb, b, order_b));
    std::vector<int64_t> shape_a = bda, shape_b = bdb;
    shape_a.push_back(r.Product(free_a));
    shape_a.push_back(r.Product(contract));
    shape_b.push_back(r.Product(contract));
    shape_b.push_back(r.Product(free_b));
    ASSIGN_OR_RETURN(Value * ma, r.Reshape(ta, shape_a));
    ASSIGN_OR_RETURN(Value * mb, r.Reshape(tb, shape_b));
    ASSIGN_OR_RETURN(Value * mm, r.Op("MatMul", {ma, mb}));
    std::vector<int64_t> full;
    for (int l : batch) full.push_back(r.Extent(l));
    for (int l : free_a) full.push_back(r.Extent(l));
    for (int l : free_b) full.push_back(r.Extent(l));
    ASSIGN_OR_RETURN(result, r.Reshape(mm, full));
    result_labels = batch;
    result_labels.insert(result_labels.end(), free_a.begin(), free_a.end());
    result_labels.insert(result_labels.end(), free_b.begin(), free_b.end());
  }
  ASSIGN_OR_RETURN(Value * last, r.Permute(result, result_labels, o));
  // The last node writes the Einsum's own output value (its name and readers).
  RETURN_IF_ERROR(ProduceInto(graph, last, out));
  return true;
}

}  // namespace

absl::StatusOr<bool> EinsumDecomposition::Run(Graph& graph) {
  return RewriteSelectedNodes(
      graph, [](const Node& n) { return n.domain().empty() && n.op_type() == "Einsum"; }, Decompose);
}

}  // namespace kiln
