// Concatenation in place: a Concat whose inputs the groups that compute them
// can write straight into its output's buffer costs no kernel. Where a
// partition has a group that is one such Concat, the group goes and each of
// its inputs becomes a view: a value stored at a fixed byte offset inside
// another value's buffer (Partition::views), which the package writer's
// memory plan honours.
#pragma once

#include <cstdint>

#include "compiler_core/fusion/partitioner.h"
#include "compiler_core/ir/graph.h"

namespace kiln {

// Removes from `partition` every group of Concat nodes only (one, or a
// Concat of Concats) whose outputs can hold their inputs in place, and
// records the views that do it. Per Concat, last first:
//   - the Concat joins slices that are contiguous runs of its output (every
//     dimension before the axis is 1) and its output is no graph output;
//   - each input is computed by a group or by a Concat of the group (no
//     graph input or constant), is no graph output, appears once, and its
//     slice starts a multiple of `alignment` bytes into the output, so that
//     the kernel writing it sees a buffer as aligned as any other;
//   - either none of the inputs is a view yet (each becomes one into the
//     output), or all are already views, in order and back to back, into one
//     buffer (a later Concat took them: DenseNet's growing concatenations of
//     the same feature maps), and the output becomes the view of that run.
// Concats are taken last first, so that the largest concatenation of shared
// inputs claims them. The remaining groups are renumbered in order and the
// partition's traffic loses the removed groups' bytes.
void PlaceConcatsInPlace(const Graph& graph, int64_t alignment, Partition* partition);

}  // namespace kiln
