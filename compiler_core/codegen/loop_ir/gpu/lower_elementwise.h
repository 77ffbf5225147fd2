// GPU lowering of inlined DAGs: the "elementwise" and "data_movement" kinds
// (the expressions of loop_ir/lower_elementwise.h and lower_data_movement.h,
// through GraphExpr), one work item per `vw` consecutive elements of an
// output row, items spread flat over the grid (FlatKernel).
//
// Knobs: vw (elements per item along the innermost axis: 1, 2, 4; at most 16
// bytes of the widest element, so that contiguous rows load and store as
// one ld/st.v2/v4), bt (threads per block), un (items per thread, a block's
// threads * un items apart... consecutive blocks of threads).
#pragma once

#include "compiler_core/codegen/loop_ir/gpu/lower.h"

namespace kiln::loop_ir::gpu {

GpuWorkloadLowering GpuElementwiseLowering();
GpuWorkloadLowering GpuDataMovementLowering();

}  // namespace kiln::loop_ir::gpu
