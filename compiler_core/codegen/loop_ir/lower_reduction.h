// "reduction" workloads: Reduce* (any axes, keepdims), Softmax, LogSoftmax,
// LayerNormalization, GlobalAveragePool and GlobalMaxPool, with elementwise
// and data-movement producers inlined into their inputs and consumers
// computed from their (materialized) results. Each reduction is one stage:
// loops over the kept index, per-lane accumulators (rfactor; 4 unrolled
// vector accumulators when the extent allows) when the innermost input axis
// is reduced and vw > 1, a guarded vectorized inner loop (masked tail), then
// the horizontal combine. Softmax writes exp(x - max) in its sum pass and
// only scales it after; per-row factors (1/sum, 1/stddev) are bound once.
// Knobs: vw, tasks (parallel split of the outermost kept loop of a
// single-stage kernel; for a row-local multi-stage kernel, all stages fused
// per block of rows, one block per task).
#pragma once

#include "compiler_core/codegen/loop_ir/lower.h"

namespace kiln::loop_ir {

WorkloadLowering ReductionLowering();

}  // namespace kiln::loop_ir
