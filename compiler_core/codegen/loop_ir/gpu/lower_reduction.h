// GPU lowering of the "reduction" kind (what the workload is:
// loop_ir/lower_reduction.h): Reduce*, Softmax/LogSoftmax, Layer/Instance
// normalization (with Mean/InvStdDev) and global pools, with inlined
// producers and materialized consumers.
//
// A row is the reduced elements of one kept index. A group of `tr`
// consecutive threads reduces a row: thread j of the group reads the
// row's vectors of `vw` elements j, j + tr, j + 2 tr, ... (coalesced: the
// group's threads read neighbouring vectors of a contiguous row, or, when
// the innermost axis is kept, neighbouring groups read neighbouring rows),
// folds them into a per-thread partial in a local buffer, then the group
// combines the partials with warp shuffles (warp_reduce) and, for groups
// wider than a warp, through shared memory. Softmax and the norms run the
// statistics passes, then the normalised write, in the same group; a row of
// at most 32 elements per thread stays in registers between the passes.
//
// Two forms of kernel:
//  - one stage whose results are the workload's only outputs: blocks of
//    bt/tr row groups over the stage's rows;
//  - several stages (a decomposed softmax, a norm and its consumers): one
//    block per index of the leading axes along which the workload is
//    row-local (RowLocalAxes; one block for the whole workload when there is
//    none), running every stage over the rows of its slice, `bt/tr` rows at
//    a time, with the intermediate results of the slice in shared memory;
//    then the outputs the stages do not write, computed from them.
//
// Knobs: bt (threads per block), tr (threads per row: a power of two up to
// bt; up to 32 for ReduceProd, whose partials are multiplied through shared
// memory), vw (1, 2, 4: elements per load along a contiguous reduced run
// that vw divides; the single-stage form requires that of its stage, the
// other stages read one element at a time).
#pragma once

#include "compiler_core/codegen/loop_ir/gpu/lower.h"

namespace kiln::loop_ir::gpu {

GpuWorkloadLowering GpuReductionLowering();

}  // namespace kiln::loop_ir::gpu
