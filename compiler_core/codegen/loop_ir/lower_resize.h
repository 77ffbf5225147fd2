// "resize" workloads on loop IR: Resize/Upsample (nearest, linear, cubic;
// every coordinate_transformation_mode) with an optional elementwise epilogue.
#pragma once

#include "compiler_core/codegen/loop_ir/lower.h"

namespace kiln::loop_ir {

// One Resize (opset 11+ form) or Upsample whose scales/sizes/roi are
// constants, elementwise producers inlined into its input reads and an
// elementwise epilogue of its output's shape. Per resized axis the source
// indices and weights are compile-time tables (stack temps filled by
// straight-line stores, computed in double exactly as the interpreter does);
// the output nest is vectorized along the last axis (gathers where that axis
// is resized). Knobs: vw (lanes along the last output axis), tasks (parallel
// split of the outermost axis).
WorkloadLowering ResizeLowering();

}  // namespace kiln::loop_ir
