// Conv branch merging: an Add of two branches over the same input, each a
// Conv with constant weights, an inference BatchNormalization of the input,
// or the input itself, becomes one Conv whose kernel is the sum of theirs
// (each placed in the union of their windows) and whose bias is the sum of
// their biases. This is the "structural re-parameterisation" of RepVGG,
// MobileOne, FastViT and ACNet, which their authors apply by hand to a
// trained model and which exports in training form leave undone: a 3x3 plus
// a 1x1 plus an identity branch read the map three times and write it twice;
// merged they are one 3x3 conv.
//
// The branches must agree on group, strides and (for two Convs) dilations;
// their pads must place their windows on the same dilated grid; an identity
// or BatchNormalization branch needs as many output as input channels and
// unit strides. A Conv or BatchNormalization branch must be read by the Add
// alone (else its work would be done twice). Adds of several branches merge
// pairwise, one per pipeline iteration.
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class ConvBranchMerging : public GraphPass {
 public:
  std::string name() const override { return "conv_branch_merging"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
