// Column panels for a matrix product's constant B (see packed_matmul_weights.h).
#include "compiler_core/passes/packed_matmul_weights.h"

#include "base/status_macros.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/matmul_panels.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

// Rows of the product (M, with A's batches folded in), or 0 when A's shape
// is not static.
int64_t ProductRows(const Node& n, const TensorType& a) {
  if (!a.IsStatic() || a.rank() < 1) return 0;
  const std::vector<int64_t> dims = a.StaticDims();
  if (n.op_type() == "Gemm") return a.rank() == 2 ? dims[n.GetInt("transA", 0) != 0 ? 1 : 0] : 0;
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < dims.size(); ++i) rows *= dims[i];
  return rows;
}

absl::StatusOr<bool> Rewrite(Graph& graph, Node* n, int64_t lanes) {
  const bool gemm = n->op_type() == "Gemm";
  Value* a = n->input(0);
  Value* b = n->input(1);
  if (a == nullptr || b == nullptr || !b->is_constant() || n->output(0) == nullptr) return false;
  const Tensor& bt = b->constant();
  if (bt.dtype() != DType::kFloat32 || bt.dims().size() != 2 || a->type().dtype != DType::kFloat32) return false;
  const bool transposed = gemm && n->GetInt("transB", 0) != 0;
  const int64_t cols = bt.dims()[transposed ? 0 : 1];
  if (cols < lanes || ProductRows(*n, a->type()) < 2) return false;
  std::vector<Value*> inputs = {a, nullptr};
  std::map<std::string, AttrValue> attrs = {{"n", AttrValue(cols)}};
  if (gemm) {
    if (n->num_inputs() > 2 && n->input(2) != nullptr) inputs.push_back(n->input(2));
    for (const char* name : {"alpha", "beta", "transA"}) {
      if (n->has_attr(name)) attrs[name] = n->attrs().at(name);
    }
  }
  const std::string name = n->name();
  Value* y = n->output(0);
  NodeBuilder nb(graph, name);
  inputs[1] = nb.Constant(ops::PackMatMulColumns(bt, lanes, transposed));
  graph.RemoveNode(n);
  const std::string domain(kKilnDomain);
  RETURN_IF_ERROR(graph.AddNode("PackedMatMul", name, std::move(inputs), {y}, attrs, domain).status());
  return true;
}

}  // namespace

absl::StatusOr<bool> PackedMatMulWeights::Run(Graph& graph) {
  auto is_product = [](const Node& n) { return IsOp(&n, "MatMul") || IsOp(&n, "Gemm"); };
  return RewriteSelectedNodes(graph, is_product, [this](Graph& g, Node* n) { return Rewrite(g, n, lanes_); });
}

}  // namespace kiln
