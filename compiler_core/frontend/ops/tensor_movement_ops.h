// Data movement operators of the tensor family (Pad, Transpose, Concat, Split,
// Slice, Gather, GatherElements, Tile, DepthToSpace, SpaceToDepth); registered
// by RegisterTensorOps (tensor_ops.cc).
#pragma once

#include <vector>

#include "compiler_core/frontend/op_registry.h"

namespace kiln::ops {

// Split's canonical form in the graph IR is one single-output node per output
// of the ONNX node (the importer rewrites it): output k of n carries these two
// int attributes, and the optional split sizes input as usual.
inline constexpr char kSplitOutputIndexAttr[] = "_kiln_output_index";
inline constexpr char kSplitNumOutputsAttr[] = "_kiln_num_outputs";

void RegisterTensorMovementOps(std::vector<OpDef>* defs);

}  // namespace kiln::ops
