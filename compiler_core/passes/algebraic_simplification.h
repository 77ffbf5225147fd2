// Algebraic simplification: local rewrites that remove or cheapen nodes
// without changing any value. Identity, inference Dropout, Cast to the same
// type and shape ops that keep the shape are removed; x*1, 1*x, x+0, 0+x, x-0
// and x/1 are removed when broadcasting does not change x's shape; division by
// a float constant becomes multiplication by its reciprocal; Transpose pairs
// merge (and vanish when they cancel); chains of Reshape/Flatten/Squeeze/
// Unsqueeze become one Reshape (and vanish when they cancel); a Gemm with
// transB=1 over a constant B (nn.Linear's export) reads B transposed once at
// compile time instead (transB=0: the kernel's B rows are contiguous); a
// Conv's taps that read only padding for every output pixel are cut from its
// constant weights (dilated windows wider than the image).
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class AlgebraicSimplification : public GraphPass {
 public:
  std::string name() const override { return "algebraic_simplification"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
