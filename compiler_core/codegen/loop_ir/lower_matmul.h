// "matmul" workloads on loop IR: one MatMul/Gemm (batched, broadcast batch
// dims, transA/transB, alpha/beta, C broadcast) followed by a fused
// elementwise epilogue, over the matmul schedule space (knobs and tiling of
// compiler_core/codegen/schedule_space.h). EmitKernel routes every MatMul/Gemm here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/codegen/target.h"

namespace kiln::loop_ir {

// The space, default and validation are schedule_space's (EnumerateSchedules,
// DefaultSchedule, ValidateSchedule; knobs mr, nr, ku, mc, nc, kc as
// documented in compiler_core/codegen/schedule_space.h, cut up by TileMatMul), so a
// tuning record means the same kernel shape on either path. The loop nest:
//
//   parallel for task in (batch x row block x column block):
//     allocate packed_b[kc x cols]                    (kc > 0)
//     for each K block (the last one peeled):
//       pack B's kc x cols slice into panels of nb = nr * lanes columns
//       for each mr-row block, for each nb-column panel:
//         allocate acc[mr x nb]: init 0 (first block) or the partial sums
//           cached in output 0; for k (unrolled by ku): for i (unrolled mr):
//           for j (vectorized nb): acc = fma(A[m+i, k], B[k, n+j], acc)
//         not the last block: output 0 = acc (partial sums)
//         last block: every output = epilogue(alpha * acc + beta * C)
//   Row tails (M % mr) run 1-row tiles; the column tail (N % nb) runs a tile
//   whose vectorized loop is N % nb lanes wide.
WorkloadLowering MatMulLowering();


}  // namespace kiln::loop_ir
