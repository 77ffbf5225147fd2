// The loop-IR verifier: the invariants every lowering's output must hold.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"

namespace kiln::loop_ir {

// Checks: every variable is defined before use (loop vars, lets) and not
// redefined in its own scope; expression types agree; loads/stores name a
// buffer that is an argument or an enclosing Allocate; constant indices (and
// indices whose range interval analysis bounds) are in bounds; loop extents
// are positive, static for vectorized/unrolled/parallel loops; at most one
// parallel loop, outermost; no vectorized loop inside another. GPU kernels
// (loop_ir.h): one gpu_block loop, outermost; gpu_thread loops inside it,
// never nested; loads and stores only inside thread loops; shared and local
// buffers allocated at block level, temps inside thread loops; warp_reduce
// at block level over a local f32/i32/i64 buffer in whole warps; the launch
// within kMaxGpuThreads and kMaxGpuSharedBytes. INVALID_ARGUMENT naming the
// offending statement.
absl::Status Verify(const LoopFunc& f);

}  // namespace kiln::loop_ir
