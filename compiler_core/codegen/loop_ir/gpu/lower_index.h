// GPU lowering of the "index" kind (loop_ir/lower_index.h: its match and
// index rules, IndexExpr): Gather, GatherElements, GatherND, DepthToSpace,
// SpaceToDepth, Trilu and Split with their inlined producers and consumers
// as one work item per `vw` elements of an output row, flat over the grid
// (FlatKernel); CumSum, ArgMax and ArgMin as one scan per row (an output
// position: every element along the scanned axis).
//
// A scan's consumers that read it at the element being written are
// computed where it is written (the scan's value, not a reload); any other
// read of a CumSum (a Transpose of it, say) sums its prefix again, since
// blocks cannot wait for each other within one launch.
//
// Knobs:
//   bt   threads per block (a multiple of 32)
//   vw   elements per item of the flat outputs along their last axis (1, 2,
//        4; at most 16 bytes of the widest output element, so contiguous
//        rows store as one st.v2/v4); 1 for an output that sums a CumSum
//        again
//   un   items per thread (workloads without a scan), a block's threads
//        apart
//   tr   threads per scan row (workloads with a scan):
//          1   a thread per row, its serial loop along the axis (coalesced
//              where the axis is not the innermost: neighbouring threads
//              read neighbouring rows); the only form of a run-time axis
//          32  ArgMax/ArgMin: a warp per row (bt/32 rows a block), lanes
//              strided along the row, then warp_reduce of the best value and
//              of the index that holds it
//          bt  a block per row: CumSum's block-wide scan of tiles of bt*ept
//              elements (loaded coalesced into shared memory, each thread's
//              ept consecutive sums, a Hillis-Steele scan of the threads'
//              sums through shared memory, the carry of earlier tiles added);
//              ArgMax/ArgMin's warp_reduce, then across the warps through
//              shared memory
//   ept  CumSum with tr=bt: elements per thread per tile (1, 4)
#pragma once

#include "compiler_core/codegen/loop_ir/gpu/lower.h"

namespace kiln::loop_ir::gpu {

GpuWorkloadLowering GpuIndexLowering();

}  // namespace kiln::loop_ir::gpu
