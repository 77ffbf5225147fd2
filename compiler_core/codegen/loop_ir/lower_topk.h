// "topk" workloads on loop IR: TopK (values and i64 indices).
#pragma once

#include "compiler_core/codegen/loop_ir/lower.h"

namespace kiln::loop_ir {

// One TopK (f32 values, constant K) whose input is a graph input. Per row a
// k-sized sorted temp is kept by insertion (equal values keep the lower index
// first, as ONNX does). Knob: tasks (parallel split of the rows).
WorkloadLowering TopKLowering();

}  // namespace kiln::loop_ir
