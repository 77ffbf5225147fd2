// KernelSpec: what codegen needs to know about a workload graph (one operator
// over graph inputs, float32, static shapes), with broadcasting resolved into
// strides. Shared by the schedule space and the LLVM kernel emitter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/graph.h"

namespace kiln {

// Add, Sub, Mul, Div (numpy broadcasting), Relu, Sigmoid.
struct ElementwiseSpec {
  std::vector<int64_t> out_dims;  // as the graph output
  int64_t num_elements = 0;
  // Output dims with size-1 dims dropped and contiguous runs merged; never empty.
  // strides[i][d]: element stride of operand i along dims[d]; 0 where broadcast.
  // The innermost stride of every operand is 0 or 1.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides;
};

// MatMul (numpy) and Gemm. Out[b, m, n] = alpha * sum_k A[b, m, k] * B[b, k, n] + beta * C[m, n].
struct MatMulSpec {
  int64_t m = 1, n = 1, k = 1;
  std::vector<int64_t> batch_dims;      // output batch dims (broadcast)
  std::vector<int64_t> a_batch_strides; // per batch dim, 0 where broadcast
  std::vector<int64_t> b_batch_strides;
  int64_t a_stride_m = 0, a_stride_k = 1;  // element strides inside one batch
  int64_t b_stride_k = 0, b_stride_n = 1;
  bool has_c = false;
  int64_t c_stride_m = 0, c_stride_n = 0;  // C broadcast to [M, N]
  float alpha = 1.0f, beta = 1.0f;
  int64_t num_batches() const;
};

struct KernelSpec {
  enum class Kind { kElementwise, kMatMul };
  Kind kind = Kind::kElementwise;
  std::string node_name;
  std::string op_type;
  // operand_args[i]: index into the kernel's args of operator input i.
  std::vector<int> operand_args;
  int output_arg = 0;
  int num_args = 0;
  ElementwiseSpec elementwise;
  MatMulSpec matmul;
};

// Checks the workload's form and resolves shapes. UNIMPLEMENTED for an operator
// codegen does not support (naming node and op), INVALID_ARGUMENT for a graph
// that is not a workload (several nodes, constants, non-f32, dynamic shapes,
// shapes that do not agree).
absl::StatusOr<KernelSpec> AnalyzeWorkload(const Graph& workload);

}  // namespace kiln
