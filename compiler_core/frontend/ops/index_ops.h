// The index family's facts other layers read: Split's canonical form.
#pragma once

namespace kiln::ops {

// Split's canonical form in the graph IR is one single-output node per output
// of the ONNX node (the importer rewrites it): output k of n carries these two
// int attributes, and the optional split sizes input as usual.
inline constexpr char kSplitOutputIndexAttr[] = "_kiln_output_index";
inline constexpr char kSplitNumOutputsAttr[] = "_kiln_num_outputs";

}  // namespace kiln::ops
