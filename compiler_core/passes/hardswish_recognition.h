// HardSwish recognition: x * clip(x + 3, 0, 6) / 6 (also "* (1/6)", and the
// division applied to the clip before the product) and x * HardSigmoid(x) with
// alpha 1/6, beta 0.5 become one HardSwish node. Clip bounds may be inputs or
// (opset < 11) attributes. Intermediates must have no other user.
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class HardSwishRecognition : public GraphPass {
 public:
  std::string name() const override { return "hardswish_recognition"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
