// "pool" workloads on loop IR: one MaxPool or AveragePool (NCW, NCHW or
// NCDHW; kernel, strides, pads incl. auto_pad, ceil_mode, count_include_pad;
// dilations and the Indices output (storage_order 0/1) for MaxPool) followed
// by an optional elementwise epilogue.
#pragma once

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/codegen/loop_ir/lower_conv.h"

namespace kiln::loop_ir {

// Knobs: vw (output pixels per vector along the output width), rows (output
// rows per task). A task is (image x channel, [output depth slice,] block of
// `rows` output rows): it packs the input rows it reads into a stack buffer,
// padded with the pool's identity (-inf or 0) and de-interleaved by the width
// stride, so the window loop reads contiguous vectors. With Indices, an i64
// accumulator beside the max keeps the first flat input position that wins.
WorkloadLowering PoolLowering();

// What a pool workload is (shared with the GPU lowering,
// loop_ir/gpu/lower_pool.cc): the pool, its window, and the Indices output.
struct PoolForm {
  const Node* pool = nullptr;
  const Value* indices = nullptr;  // MaxPool's Indices output (i64), if used
  int indices_out = -1;            // its position among the workload outputs
  bool col_major = false;          // storage_order=1
  bool is_max = true;
  bool include_pad = false;
  WindowGeometry geo;
  int x_arg = -1;
};

// The form of a workload the pool lowering takes; UNIMPLEMENTED (naming the
// node) otherwise.
absl::StatusOr<PoolForm> AnalyzePool(const Graph& g);

}  // namespace kiln::loop_ir
