// Pad folding: a zero constant Pad of the spatial axes whose every reader is a
// Conv (as its data input) becomes those Convs' own padding, so the padded
// copy of the tensor is never written (Keras' ZeroPadding2D before a strided
// depthwise conv, "same" padding exported as an explicit Pad). The Convs'
// pads grow by the Pad's; a VALID auto_pad counts as zero pads, SAME_* Convs
// and Pads of the batch or channel axis, negative (cropping) or non-zero
// values are left alone. The Pad itself is left to dead-code elimination.
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class PadFolding : public GraphPass {
 public:
  std::string name() const override { return "pad_folding"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
