// GPU lowerings of the "winograd_input" and "winograd_output" kinds (the
// transforms of a Winograd convolution; analyses and transform arithmetic
// of loop_ir/lower_winograd.h). The GPU compile need not run the
// winograd_convolution pass (the implicit GEMM of gpu/lower_conv.h takes
// 3x3 convs), but a graph that has the nodes still compiles.
//
// One thread per (channel, tile), spread flat over the grid with the tiles
// of a channel on consecutive threads:
//   input:  d = the alpha x alpha input patch of the tile (zero padded, in
//           registers); V[a*alpha + b, c, tile] = (B^T d B)[a][b]: for each
//           (a, b) consecutive threads store consecutive tiles (coalesced)
//   output: m[a][b] = M[a*alpha + b, k, tile] (coalesced loads); the tile's
//           m x m outputs (A^T m A) + bias[k] through the epilogue, guarded
//           at the map's ragged bottom and right edges
// Knob: bt (threads per block: 64, 128, 256). The default is 128: an
// F(4x4, 3x3) thread holds 36 inputs and 36 partial sums in registers.
#pragma once

#include "compiler_core/codegen/loop_ir/gpu/lower.h"

namespace kiln::loop_ir::gpu {

GpuWorkloadLowering GpuWinogradInputLowering();
GpuWorkloadLowering GpuWinogradOutputLowering();

}  // namespace kiln::loop_ir::gpu
