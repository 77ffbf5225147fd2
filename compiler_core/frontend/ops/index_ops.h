// The index family's facts other layers read: Split's canonical form.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"

namespace kiln::ops {

// Split's canonical form in the graph IR is one single-output node per output
// of the ONNX node (the importer rewrites it): output k of n carries these two
// int attributes, and the optional split sizes input as usual.
inline constexpr char kSplitOutputIndexAttr[] = "_kiln_output_index";
inline constexpr char kSplitNumOutputsAttr[] = "_kiln_num_outputs";

// The sizes of all pieces of a Split node along an axis of extent `dim`: its
// constant split input, or num_outputs pieces of ceil(dim / n) with a shorter
// last one. An error names sizes that do not cut `dim` exactly.
absl::StatusOr<std::vector<int64_t>> SplitSizes(const Node& node, int64_t dim);

}  // namespace kiln::ops
