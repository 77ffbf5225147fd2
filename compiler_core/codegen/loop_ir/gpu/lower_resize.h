// GPU lowering of the "resize" kind (loop_ir/lower_resize.h: its match):
// Resize/Upsample in every mode (nearest with each rounding, linear, cubic
// with exclude_outside) and coordinate transformation, 1-D to N-D, with its
// inlined producers and elementwise epilogue. One work item per `vw`
// consecutive output elements along the last axis, flat over the grid
// (FlatKernel).
//
// A thread computes its taps from the interpreter's plan (ops::ResizePlan)
// rather than reading tables: per resized axis the source coordinate, the
// tap indices and weights, in f64 with the very operations, in the same
// order, of ops::ResizeSourceCoord and ops::ResizeTaps, so that they are
// the interpreter's doubles bit for bit (NVPTX emits f64 arithmetic as
// mul.rn/add.rn/div.rn: no contraction under FPOpFusion::Standard); weights
// then round to f32 as the CPU lowering's tables hold them, and the taps'
// products are summed in the CPU lowering's order.
//
// Knobs: vw (output elements per item along the last axis: 1, 2, 4; stored
// as one st.v2/v4 where the row allows), bt (threads per block), un (items
// per thread, a block's threads apart).
#pragma once

#include "compiler_core/codegen/loop_ir/gpu/lower.h"

namespace kiln::loop_ir::gpu {

GpuWorkloadLowering GpuResizeLowering();

}  // namespace kiln::loop_ir::gpu
