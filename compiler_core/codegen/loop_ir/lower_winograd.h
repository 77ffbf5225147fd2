// "winograd_input" and "winograd_output" workloads on loop IR: the two
// transforms of a Winograd convolution (compiler_core/frontend/ops/winograd.h;
// the GEMMs between them are matmul workloads).
#pragma once

#include "compiler_core/codegen/loop_ir/lower.h"

namespace kiln::loop_ir {

// One kiln.WinogradInput. One task per (image, channel) plane:
//
//   parallel for plane:
//     allocate xp[(tiles_h*m + 2) x wp]: the zero-padded plane
//     for th (tile row), for tw in vw-lane chunks (vectorized):
//       d[i][j] = xp[th*m + i, tw*m + j]     (lane stride m: de-interleaved loads)
//       V[a*alpha + b, c, tile] = (B^T d B)[a][b]   (36 or 16 contiguous stores)
//
// Knob: vw (tiles per vector: 4, 8, 16; default the fewest covering a tile row).
WorkloadLowering WinogradInputLowering();

// One kiln.WinogradOutput (+ bias) and an elementwise epilogue (the
// convolution's Relu, residual Add, ...). One task per (image, output channel):
//
//   parallel for (n, k):
//     for th, for tw in vw-lane chunks (vectorized):
//       y = (A^T M[:, k, tile] A) + bias[k]   -> raw[n, k, th*m + i, tw*m + j]
//                                                (lane stride m: masked scatter)
//     epilogue over the tile row's m output rows, contiguous vectors
//
// Knob: vw, as for the input transform.
WorkloadLowering WinogradOutputLowering();

}  // namespace kiln::loop_ir
