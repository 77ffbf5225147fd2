// "topk" workloads on loop IR: TopK (values and i64 indices).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/lower.h"

namespace kiln::loop_ir {

// One TopK (f32 values, constant K) whose input is a graph input. Per row a
// k-sized sorted temp is kept by insertion (equal values keep the lower index
// first, as ONNX does). Knob: tasks (parallel split of the rows).
WorkloadLowering TopKLowering();

// What a TopK workload is (shared with the GPU lowering,
// loop_ir/gpu/lower_topk.cc): rows of n elements, element j of row
// (o, i) at x[(o * n + j) * inner + i].
struct TopKForm {
  const Node* topk = nullptr;
  std::vector<int64_t> dims;
  int64_t axis = 0, k = 0;
  bool largest = true;
  int64_t outer = 1, n = 1, inner = 1;
  int x_arg = -1;
  int values_out = -1, indices_out = -1;  // graph output positions, -1 if absent
};

// The form of a workload the TopK lowering takes; UNIMPLEMENTED (naming the
// node) otherwise.
absl::StatusOr<TopKForm> AnalyzeTopK(const Graph& g);

}  // namespace kiln::loop_ir
