// "resize" workloads on loop IR: Resize/Upsample (nearest, linear, cubic;
// every coordinate_transformation_mode) with an optional elementwise epilogue.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/frontend/ops/resize_plan.h"

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

// ---- the kind's analysis, shared with its GPU lowering (loop_ir/gpu/lower_resize.h) ----

// The tables of one resized axis, slot-major: entry k * out + o is tap k of
// output index o (ops::ResizeTaps). Index -1 marks a position outside the crop.
struct AxisTable {
  int axis = 0;
  int64_t taps = 1;
  int64_t out = 1;
  bool weighted = true;   // false for nearest (weight 1)
  bool has_outside = false;
  std::vector<int64_t> index;
  std::vector<double> weight;
};

// A resize workload: the node, its input, the interpreter's plan and one
// table per resized axis (axes that keep their size and read their own
// index, such as an untouched channel axis, have none).
struct ResizeForm {
  const Node* resize = nullptr;
  const Value* x = nullptr;
  std::vector<int64_t> in_dims, out_dims;
  ops::ResizePlan plan;
  std::vector<AxisTable> tables;
};

// The kind's match: the form, or UNIMPLEMENTED / INVALID_ARGUMENT naming the
// node it cannot take.
absl::StatusOr<ResizeForm> AnalyzeResize(const Graph& g);

}  // namespace kiln::loop_ir
