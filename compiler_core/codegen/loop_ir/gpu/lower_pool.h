// GPU lowering of the "pool" kind (what the workload is:
// loop_ir/lower_pool.h): MaxPool (with its Indices output) or AveragePool,
// 1-D, 2-D or 3-D, and its elementwise epilogue. One thread computes `vw`
// neighbouring outputs of an output row (flat over the grid, FlatKernel):
// the window loops inside, the taps read straight from the input (global
// memory; neighbouring threads read overlapping windows), bounds checked
// per tap, then the outputs stored through the epilogue (one vector store
// when vw divides the output width).
//
// The semantics are the reference interpreter's: MaxPool takes the first
// tap inside the input, then every strictly greater one (its Indices the
// first position that wins, -1 within the plane when every tap is padding);
// AveragePool divides the sum of the taps inside the input by their count,
// or by the window clipped to the padded input with count_include_pad.
//
// Knobs: vw (outputs per thread along the output width: 1, 2, 4, at most
// the width), bt (threads per block), un (items per thread, FlatKernel).
#pragma once

#include "compiler_core/codegen/loop_ir/gpu/lower.h"

namespace kiln::loop_ir::gpu {

GpuWorkloadLowering GpuPoolLowering();

}  // namespace kiln::loop_ir::gpu
