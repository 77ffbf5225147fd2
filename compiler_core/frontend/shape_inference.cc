// Shape inference over the operator table, and the static broadcast helper.
#include "compiler_core/frontend/shape_inference.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/ir/float16.h"

namespace kiln {

absl::StatusOr<std::vector<int64_t>> BroadcastShapes(const std::vector<int64_t>& a,
                                                     const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(absl::StrCat("shapes [", absl::StrJoin(a, ","), "] and [",
                                                     absl::StrJoin(b, ","), "] cannot be broadcast"));
    }
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

absl::StatusOr<int64_t> CheckedElementCount(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  int64_t nonzero = 1;  // the product of the non-zero extents
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("negative extent in shape [", absl::StrJoin(dims, ","), "]"));
    }
    // The non-zero extents are bounded together too (an empty tensor [0, 2^62]
    // or [0, 2^35, 2^35] has no elements), so that shape functions and kernels
    // can add and multiply extents, and compute strides, safely.
    if (d != 0 && nonzero > kMaxTensorElements / d) {
      return absl::InvalidArgumentError(absl::StrCat("shape [", absl::StrJoin(dims, ","),
                                                     "] has more than ", kMaxTensorElements, " elements"));
    }
    if (d != 0) nonzero *= d;
    n *= d;
  }
  return n;
}

namespace {

// Static extents of a type must be sane; symbols count as unknown.
absl::Status CheckSize(const TensorType& t) {
  std::vector<int64_t> dims;
  for (const Dim& d : t.dims) {
    if (d.is_static()) dims.push_back(d.value);
  }
  return CheckedElementCount(dims).status();
}

absl::Status InferNode(Node& node) {
  const OpDef* def = FindOpDef(node.domain(), node.op_type());
  if (def == nullptr) {
    if (!IsDefaultDomain(node.domain())) {
      return absl::InvalidArgumentError(absl::StrCat("unsupported domain '", node.domain(), "'"));
    }
    return absl::InvalidArgumentError("unsupported operator");
  }
  RETURN_IF_ERROR(ValidateNode(*def, node));
  InputTypes in;
  for (int i = 0; i < node.num_inputs(); ++i) {
    Value* v = node.input(i);
    if (v == nullptr) {
      in.push_back(nullptr);
      continue;
    }
    if (!v->type().known) {
      return absl::InvalidArgumentError(absl::StrCat("input '", v->name(), "' has no known type"));
    }
    in.push_back(&v->type());
  }
  ASSIGN_OR_RETURN(std::vector<TensorType> out, def->infer(node, in));
  if (static_cast<int>(out.size()) != node.num_outputs()) {
    return absl::InternalError(absl::StrCat("shape function returned ", out.size(), " types for ",
                                            node.num_outputs(), " outputs"));
  }
  for (int i = 0; i < node.num_outputs(); ++i) {
    RETURN_IF_ERROR(CheckSize(out[i]));
    node.output(i)->set_type(std::move(out[i]));
  }
  return absl::OkStatus();
}

// Folds `node` when its result is known at compile time: every input is a
// small constant, or it is Shape/Size of a value whose needed extents are
// static. Its outputs become constants and the node is removed. Returns
// whether it folded.
absl::StatusOr<bool> FoldNode(Graph& graph, Node& node) {
  const OpDef* def = FindOpDef(node.domain(), node.op_type());
  if (def == nullptr || !def->eval) return false;
  for (Value* o : node.outputs()) {
    if (!o->type().IsStatic() || NumElements(o->type().StaticDims()) > kMaxFoldElements) return false;
    if (IsNarrowFloat(o->type().dtype) || o->type().dtype == DType::kUnknown) return false;
  }
  std::vector<Tensor> outs;
  for (Value* o : node.outputs()) outs.emplace_back(o->type().dtype, o->type().StaticDims());
  const bool shape_op = IsDefaultDomain(node.domain()) &&
                        (node.op_type() == "Shape" || node.op_type() == "Size") && node.input(0) != nullptr;
  if (shape_op) {
    // Only the extents matter: no need for the input's values.
    const TensorType& t = node.input(0)->type();
    if (node.op_type() == "Size") {
      if (!t.IsStatic()) return false;
      outs[0].data<int64_t>()[0] = NumElements(t.StaticDims());
    } else {
      const int64_t rank = t.rank();
      auto clamp = [rank](int64_t v) { return std::min(std::max<int64_t>(v < 0 ? v + rank : v, 0), rank); };
      const int64_t start = clamp(node.GetInt("start", 0));
      const int64_t end = std::max(start, clamp(node.GetInt("end", rank)));
      for (int64_t i = start; i < end; ++i) {
        if (!t.dims[i].is_static()) return false;
        outs[0].data<int64_t>()[i - start] = t.dims[i].value;
      }
    }
  } else {
    InputTensors in;
    for (Value* v : node.inputs()) {
      if (v == nullptr) {
        in.push_back(nullptr);
        continue;
      }
      if (!v->is_constant() || v->constant().num_elements() > kMaxFoldElements) return false;
      in.push_back(&v->constant());
    }
    RETURN_IF_ERROR(def->eval(node, in, outs));
  }
  for (int i = 0; i < node.num_outputs(); ++i) node.output(i)->set_constant(std::move(outs[i]));
  graph.RemoveNode(&node);
  return true;
}

}  // namespace

absl::Status InferShapes(Graph& graph) {
  for (Value* v : graph.inputs()) {
    if (!v->type().known) {
      return absl::InvalidArgumentError(absl::StrCat("graph input '", v->name(), "' has no known type"));
    }
    absl::Status s = CheckSize(v->type());
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("graph input '", v->name(), "': ", s.message()));
  }
  // Folding removes nodes: iterate over a snapshot.
  std::vector<Node*> nodes;
  for (const auto& n : graph.nodes()) nodes.push_back(n.get());
  bool folded = false;
  for (Node* n : nodes) {
    absl::Status s = InferNode(*n);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(NodeContext(*n), s.message()));
    const std::string context = NodeContext(*n);
    absl::StatusOr<bool> f = FoldNode(graph, *n);  // may delete *n
    if (!f.ok()) return absl::Status(f.status().code(), absl::StrCat(context, f.status().message()));
    folded = folded || *f;
  }
  if (folded) graph.RemoveDeadValues();
  return absl::OkStatus();
}

}  // namespace kiln
