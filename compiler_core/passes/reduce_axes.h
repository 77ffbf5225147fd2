// The reduced axes of a Reduce* node (attribute or constant second input),
// resolved against the input rank: what the recognition passes match on.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "compiler_core/ir/graph.h"

namespace kiln {

// Sorted, non-negative axes of Reduce* node `n` with keepdims=1; nullopt when
// keepdims is 0, axes are not known constants, or reduce-everything/no-op
// defaults apply.
std::optional<std::vector<int64_t>> KeptReducedAxes(const Node* n);

}  // namespace kiln
