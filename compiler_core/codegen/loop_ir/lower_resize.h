// "resize" and "topk" workloads on loop IR: Resize/Upsample (nearest, linear,
// cubic; every coordinate_transformation_mode) with an optional elementwise
// epilogue, and TopK (values and i64 indices).
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

// One TopK (f32 values, constant K) whose input is a graph input. Per row a
// k-sized sorted temp is kept by insertion (equal values keep the lower index
// first, as ONNX does). Knob: tasks (parallel split of the rows).
WorkloadLowering TopKLowering();

}  // namespace kiln::loop_ir
