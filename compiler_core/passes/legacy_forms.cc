// Legacy-form canonicalization (see legacy_forms.h).
#include "compiler_core/passes/legacy_forms.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

bool IsSoftmaxFamily(const Node& n) {
  const std::string& op = n.op_type();
  return n.domain().empty() && (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax");
}

// One opset < 13 Softmax-family node in its opset-13 form; false when its
// input's shape is not known yet.
absl::StatusOr<bool> CanonicalizeSoftmax(Graph& graph, Node* n) {
  const Value* x = n->input(0);
  if (!x->type().known || !x->type().IsStatic()) return false;
  const std::vector<int64_t> dims = x->type().StaticDims();
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t axis = n->GetInt("axis", 1);
  if (axis < 0) axis += rank;
  std::map<std::string, AttrValue> attrs = n->attrs();
  attrs.erase(kOpsetAttr);
  const std::string op = n->op_type(), name = n->name();
  Value* out = n->output(0);
  if (axis >= rank - 1 || rank <= 1) {
    // Coercing at the last axis changes nothing: the opset-13 form as is.
    attrs["axis"] = int64_t{-1};
    std::vector<Value*> inputs = n->inputs();
    graph.RemoveNode(n);
    RETURN_IF_ERROR(graph.AddNode(op, name, std::move(inputs), {out}, std::move(attrs)).status());
    return true;
  }
  Value* input = n->input(0);
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? rows : cols) *= dims[d];
  const TensorType t2d = TensorType::Static(x->type().dtype, {rows, cols});
  graph.RemoveNode(n);
  ASSIGN_OR_RETURN(Value * flat, graph.AddValue(graph.UniqueValueName(absl::StrCat(name, "_2d")), t2d));
  RETURN_IF_ERROR(
      graph.AddNode("Flatten", absl::StrCat(name, "/flatten"), {input}, {flat}, {{"axis", axis}}).status());
  ASSIGN_OR_RETURN(Value * y2d, graph.AddValue(graph.UniqueValueName(absl::StrCat(name, "_y2d")), t2d));
  attrs["axis"] = int64_t{1};
  RETURN_IF_ERROR(graph.AddNode(op, name, {flat}, {y2d}, std::move(attrs)).status());
  Value* shape = AddFreshConstant(graph, absl::StrCat(name, "_shape"),
                                  Tensor::FromVector(DType::kInt64, {rank}, dims));
  RETURN_IF_ERROR(graph.AddNode("Reshape", absl::StrCat(name, "/reshape"), {y2d, shape}, {out}).status());
  return true;
}

// One opset < 7 axis-aligned broadcast (ops::kBroadcastAxisAttr) as an
// Unsqueeze of input 1 and the numpy-broadcasting node; false when the ranks
// are not known yet.
absl::StatusOr<bool> CanonicalizeBroadcastAxis(Graph& graph, Node* n) {
  const Value* a = n->input(0);
  Value* b = n->input(1);
  if (!a->type().known || !b->type().known) return false;
  std::vector<Dim> b_dims = b->type().dims;
  const size_t b_rank = b_dims.size();
  ASSIGN_OR_RETURN(std::vector<Dim> aligned, ops::AlignedAtBroadcastAxis(*n, a->type().dims.size(), b_dims));
  std::vector<Value*> inputs = n->inputs();
  std::map<std::string, AttrValue> attrs = n->attrs();
  attrs.erase(ops::kBroadcastAxisAttr);
  const std::string op = n->op_type(), name = n->name();
  const std::vector<Value*> outs = n->outputs();
  graph.RemoveNode(n);
  if (aligned.size() > b_rank) {
    std::vector<int64_t> axes;
    for (size_t d = b_rank; d < aligned.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    NodeBuilder build(graph, name);
    ASSIGN_OR_RETURN(inputs[1], build.Op("Unsqueeze", {b, build.Int64s(axes)}));
  }
  RETURN_IF_ERROR(graph.AddNode(op, name, std::move(inputs), outs, std::move(attrs)).status());
  return true;
}

}  // namespace

absl::StatusOr<bool> LegacyFormCanonicalization::Run(Graph& graph) {
  ASSIGN_OR_RETURN(bool softmax,
                   RewriteSelectedNodes(
                       graph, [](const Node& n) { return IsSoftmaxFamily(n) && n.has_attr(kOpsetAttr); },
                       CanonicalizeSoftmax));
  ASSIGN_OR_RETURN(bool broadcast,
                   RewriteSelectedNodes(
                       graph, [](const Node& n) { return n.has_attr(ops::kBroadcastAxisAttr); },
                       CanonicalizeBroadcastAxis));
  return softmax || broadcast;
}

}  // namespace kiln
