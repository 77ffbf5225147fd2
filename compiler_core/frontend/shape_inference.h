// Shape inference: gives every node output its dtype and shape from its inputs,
// using the operator table (op_registry.h), and numpy-style broadcasting helpers.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"

namespace kiln {

// Largest element count a single tensor may have; beyond it a shape is "absurd"
// and rejected rather than allocated.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

// Largest tensor shape inference evaluates at compile time (constant folding):
// shape subgraphs are tiny; weights-sized work is left to later passes.
inline constexpr int64_t kMaxFoldElements = int64_t{1} << 16;

// Validates every node against the operator table (arity, attribute kinds and
// values) and sets the type of each node output, overwriting what was there.
// Then folds what is known at compile time, so that shape subgraphs (Shape ->
// Gather -> Concat -> Reshape, ...) become constants once input shapes are
// bound: a node whose inputs are all constants (each at most kMaxFoldElements,
// as are its outputs), or a Shape/Size node whose input extents are static, is
// evaluated with its reference kernel; its outputs become constants and the
// node is removed (constants left unused are dropped). Shape functions that
// need an operand's values (Reshape's shape, Slice's starts, ...) read them as
// constants, and name the symbolic dimension they depend on when they are not.
// Errors are INVALID_ARGUMENT prefixed with "node 'NAME' (OP): ", e.g.
//   node 'add0' (Add): shapes f32[2,3] and f32[4] cannot be broadcast
// Symbolic dimensions propagate where the result does not depend on their
// value; where a static extent is needed the error names the input and dim.
absl::Status InferShapes(Graph& graph);

// Numpy-style broadcast of two static shapes ([2,1,3] and [4,1] -> [2,4,3]).
absl::StatusOr<std::vector<int64_t>> BroadcastShapes(const std::vector<int64_t>& a,
                                                     const std::vector<int64_t>& b);

// Element count of `dims`, or INVALID_ARGUMENT for negative extents, int64
// overflow, or more than kMaxTensorElements elements; the non-zero extents
// alone are held to that bound too (a tensor with no elements included).
absl::StatusOr<int64_t> CheckedElementCount(const std::vector<int64_t>& dims);

}  // namespace kiln
