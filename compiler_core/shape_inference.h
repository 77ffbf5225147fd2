// Shape inference: gives every node output its dtype and shape from its inputs,
// using the operator table (op_registry.h), and numpy-style broadcasting helpers.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler_core/graph.h"

namespace kiln {

// Largest element count a single tensor may have; beyond it a shape is "absurd"
// and rejected rather than allocated.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

// Validates every node against the operator table (arity, attribute kinds and
// values) and sets the type of each node output, overwriting what was there.
// Errors are INVALID_ARGUMENT prefixed with "node 'NAME' (OP): ", e.g.
//   node 'add0' (Add): shapes f32[2,3] and f32[4] cannot be broadcast
// Symbolic dimensions propagate where the result does not depend on their
// value; where a static extent is needed the error names the input and dim.
absl::Status InferShapes(Graph& graph);

// Numpy-style broadcast of two static shapes ([2,1,3] and [4,1] -> [2,4,3]).
absl::StatusOr<std::vector<int64_t>> BroadcastShapes(const std::vector<int64_t>& a,
                                                     const std::vector<int64_t>& b);

// Element count of `dims`, or INVALID_ARGUMENT for negative extents, int64
// overflow or more than kMaxTensorElements elements.
absl::StatusOr<int64_t> CheckedElementCount(const std::vector<int64_t>& dims);

}  // namespace kiln
