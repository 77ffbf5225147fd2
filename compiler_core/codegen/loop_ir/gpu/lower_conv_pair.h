// GPU lowering of the "conv_pair" kind (the analysis of
// loop_ir/lower_conv_pair.h): a 1x1 expansion, its elementwise mid chain and
// a depthwise conv with its epilogue, in one kernel, so that the expanded
// tensor never goes to memory.
//
// Tiled (the default): a block takes kc expanded channels of one image and
// a tile of rows x cols output pixels. Its threads first compute the
// expansion (bias + sum over the input channels, then the mid chain) at
// every input position the tile's windows read, for its kc channels, into
// shared memory (zero in the depthwise conv's padding): a thread per
// position (consecutive threads, consecutive columns of x), kc accumulators
// each, so x is read once per block. Then a thread per output pixel and
// channel sums the taps from shared memory and stores through the epilogue.
// Neighbouring tiles recompute the halo rows and columns between them.
// Knobs: kc (1, 2, 4, 8; divides the channels), rows (1..8), cols (32, 64),
// bt (128, 256); 4 * kc * ((rows-1)*sh + (kh-1)*dh + 1) * ((cols-1)*sw +
// (kw-1)*dw + 1) bytes of shared memory, at most 48 KiB.
//
// rc=1 (for windows no tile fits, and to compare against): one thread per
// output element recomputes the expansion under each of its taps (cin
// multiply-adds per tap: correct and bounded, but kh*kw times the
// expansion's work). Knob: bt.
#pragma once

#include "compiler_core/codegen/loop_ir/gpu/lower.h"

namespace kiln::loop_ir::gpu {

GpuWorkloadLowering GpuConvPairLowering();

}  // namespace kiln::loop_ir::gpu
