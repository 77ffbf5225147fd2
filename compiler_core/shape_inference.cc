// Shape inference over the operator table, and the static broadcast helper.
#include "compiler_core/shape_inference.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/op_registry.h"
#include "compiler_core/status_macros.h"

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
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("negative extent in shape [", absl::StrJoin(dims, ","), "]"));
    }
    if (d != 0 && n > kMaxTensorElements / d) {
      return absl::InvalidArgumentError(absl::StrCat("shape [", absl::StrJoin(dims, ","),
                                                     "] has more than ", kMaxTensorElements, " elements"));
    }
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

}  // namespace

absl::Status InferShapes(Graph& graph) {
  for (Value* v : graph.inputs()) {
    if (!v->type().known) {
      return absl::InvalidArgumentError(absl::StrCat("graph input '", v->name(), "' has no known type"));
    }
    absl::Status s = CheckSize(v->type());
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("graph input '", v->name(), "': ", s.message()));
  }
  for (const auto& n : graph.nodes()) {
    absl::Status s = InferNode(*n);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(NodeContext(*n), s.message()));
  }
  return absl::OkStatus();
}

}  // namespace kiln
