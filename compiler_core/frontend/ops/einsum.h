// Einsum equations, parsed: shared by the operator (matmul_ops.cc) and the
// pass that decomposes Einsum into Transpose, Reshape, ReduceSum and MatMul
// (compiler_core/passes/einsum_decomposition.cc).
#pragma once

#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/frontend/op_registry.h"

namespace kiln::ops {

// Labels: a-z are 0..25, A-Z 26..51; the dims an ellipsis stands for are
// kEllipsisLabel + k, right-aligned across operands.
inline constexpr int kEllipsisLabel = 52;

struct EinsumSpec {
  std::vector<std::vector<int>> terms;  // labels per operand, one per dim
  std::vector<int> out;                 // output labels in order
  std::map<int, Dim> extents;           // extent of every label
};

// The node's "equation" against its input types; INVALID_ARGUMENT for a
// malformed equation or extents that disagree.
absl::StatusOr<EinsumSpec> ParseEinsum(const Node& node, const InputTypes& in);

}  // namespace kiln::ops
