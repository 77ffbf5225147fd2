// LayerNorm recognition: the decomposition exporters write for layer norm over
// trailing axes becomes one LayerNormalization node:
//   m = ReduceMean(x, axes); d = x - m; v = ReduceMean(d^2, axes)
//   n = d / Sqrt(v + eps); y = n * gamma + beta      (gamma, beta optional)
// d^2 may be Pow(d, 2) or d * d; axes must be the trailing axes (keepdims=1);
// gamma and beta must broadcast over the normalised axes only. Intermediates
// must have no other user.
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class LayerNormRecognition : public GraphPass {
 public:
  std::string name() const override { return "layer_norm_recognition"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
