// A GPU kernel rewritten as a CPU kernel with the same meaning, so that a GPU
// schedule runs (and is checked against the reference interpreter) on a
// machine without a GPU: the gpu_block loop becomes the parallel task loop
// (one task per block), each gpu_thread loop a serial loop over the block's
// threads, shared buffers stack temps, local buffers stack temps with one
// slot per thread (indexed by the enclosing thread loop's variable), and
// warp_reduce a serial fold over each group of threads.
//
// What the emulation does not see: races between threads of one thread loop
// (serial threads never race) and the order of floating-point sums inside a
// warp. What it makes visible: every shared and local buffer starts as NaN
// (integers as 0x5A5A...), so a thread that reads what no thread wrote, or a
// warp_reduce over threads that wrote nothing, poisons the result.
#pragma once

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"

namespace kiln::loop_ir {

// INVALID_ARGUMENT when `gpu` is not a verified GPU kernel. The result passes
// Verify as a CPU kernel.
absl::StatusOr<LoopFunc> EmulateOnCpu(const LoopFunc& gpu);

}  // namespace kiln::loop_ir
