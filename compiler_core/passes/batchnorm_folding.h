// BatchNorm folding: a per-channel affine map after a Conv, Gemm or MatMul with
// constant weights is folded into those weights and the bias. The affine map is
// an inference BatchNormalization, or a Mul/Add/Sub by a constant that varies
// only along the output-channel axis (axis 1 for Conv and Gemm, the last axis
// for MatMul). Any Conv group count works: weights are [M, C/group, ...]. The
// producer's output must have no other reader.
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class BatchNormFolding : public GraphPass {
 public:
  std::string name() const override { return "batchnorm_folding"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
