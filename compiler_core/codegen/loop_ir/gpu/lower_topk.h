// GPU lowering of the "topk" kind (what the workload is:
// loop_ir/lower_topk.h): TopK's values and i64 indices, largest or
// smallest, sorted, equal values in index order (the interpreter's
// std::partial_sort with index tie-break). A group of `tr` consecutive
// threads takes a row (element j of row (o, i) at x[(o * n + j) * inner + i];
// consecutive groups take consecutive i, so rows along a kept innermost
// axis read coalesced), in one of two ways:
//  - sort=0, selection: k rounds; in each, every thread picks the first of
//    its elements (in the order best value, then lowest index) that comes
//    after the previous round's pick, and the group combines the picks (the
//    best value by warp shuffles and shared memory, then the lowest index
//    among the threads holding it). A thread's elements stay in registers
//    between rounds when there are at most 32 of them. Cost ~ k * n / tr.
//  - sort=1, bitonic sort: the row's (value, index) pairs padded to a power
//    of two N in shared memory (N * 8 bytes per group), sorted by the
//    compare-exchange network (log2(N) (log2(N) + 1) / 2 steps, a barrier
//    each), then the first k written. Cost ~ N log^2 N / tr, whatever k.
// NaN values order as the reference's comparisons leave them (unspecified).
//
// Knobs: bt (threads per block), tr (threads per row: a power of two up to
// bt; a block of bt/tr groups), sort (0 or 1; 1 where the padded rows of a
// block fit in shared memory).
#pragma once

#include "compiler_core/codegen/loop_ir/gpu/lower.h"

namespace kiln::loop_ir::gpu {

GpuWorkloadLowering GpuTopKLowering();

}  // namespace kiln::loop_ir::gpu
