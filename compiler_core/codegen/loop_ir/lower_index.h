// "index" workloads on loop IR: the indexing and data-rearranging operators
// (Gather, GatherElements, GatherND, DepthToSpace, SpaceToDepth, Trilu, Split, CumSum,
// ArgMax, ArgMin) with inlined elementwise/data-movement producers and
// consumers.
#pragma once

#include "compiler_core/codegen/loop_ir/lower.h"

namespace kiln::loop_ir {

// A workload is any number of index-expression nodes (Gather, GatherElements, GatherND,
// DepthToSpace, SpaceToDepth, Trilu, Split: each output element is one input
// element at computed coordinates) and at most one scan node (CumSum, ArgMax,
// ArgMin: a serial loop along one axis per output position) whose result must
// be a workload output, mixed with nodes GraphExpr inlines. Index expressions
// move data of any type (not i32/i64 computed in the workload); scans read f32;
// index operands (Gather/GatherElements/GatherND indices, Trilu k, CumSum axis) are i64
// graph inputs or constants; ArgMax/ArgMin write i64. Out-of-range gather
// indices are clamped into range (a kernel cannot report the error the
// interpreter raises). Knobs: vw (lanes of the innermost loop, masked tail),
// tasks (parallel split of the outermost loop when the kernel is one nest).
WorkloadLowering IndexLowering();

}  // namespace kiln::loop_ir
