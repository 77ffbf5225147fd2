// Column panels for the constant B of a matrix product on a CPU: a MatMul
// with a constant 2-D f32 B, or a Gemm with a constant B (any transB), whose
// product has 2 rows or more (A's batches count as rows: they share B) and
// at least `lanes` columns, becomes
//
//   Y = kiln.PackedMatMul(A, Bp [, C])     Bp = B in panels of `lanes`
//                                          columns (ops/matmul_panels.h;
//                                          a constant), attribute n = N
//
// with the Gemm's transA, alpha and beta. The CPU's matmul kernel then reads
// each register tile's B vectors front to back from its panels where it
// read them from B's rows, N floats apart, or packed them into panels in
// every run (Zen 3, 1 thread, in the model: LeViT's 49 x 256 by 256 x 1280
// read in place 0.48 ms, from panels made at compile time 0.38; packed in
// every run it had measured 0.60 against 0.58 in place).
// A product of one row (a GEMV, which streams B however it is stored) or of
// fewer columns than one panel stays as it is. Runs once after the
// optimisation fixed point, after the pointwise-conv rewrite (whose Gemms
// it takes too), for CPU targets only; `lanes` is the target's f32 lanes.
#pragma once

#include <cstdint>

#include "compiler_core/passes/pass.h"

namespace kiln {

class PackedMatMulWeights : public GraphPass {
 public:
  explicit PackedMatMulWeights(int64_t lanes) : lanes_(lanes) {}
  std::string name() const override { return "packed_matmul_weights"; }
  absl::StatusOr<bool> Run(Graph& graph) override;

 private:
  int64_t lanes_;
};

}  // namespace kiln
