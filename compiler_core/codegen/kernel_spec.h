// KernelSpec: what codegen needs to know about a workload graph (a fused DAG of
// elementwise operators, or one MatMul/Gemm with an elementwise epilogue DAG;
// float32, static shapes), with broadcasting resolved into strides. Shared by
// the schedule space and the LLVM kernel emitter.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"

namespace kiln {

// Operators codegen can fuse into a register-level elementwise program.
bool IsFusibleElementwiseOp(const std::string& op_type);

// One operator of an elementwise program. Its result is the next value slot.
struct ElementwiseOp {
  std::string op_type;     // Add, Relu, Clip, Gelu, ...
  std::string node_name;
  std::vector<int> inputs;  // value slots; -1 for an omitted optional input (Clip bounds)
  float alpha = 0.0f;       // LeakyRelu alpha; HardSigmoid alpha
  float beta = 0.0f;        // HardSigmoid beta
  float lo = -std::numeric_limits<float>::infinity();  // Clip bounds given as attributes
  float hi = std::numeric_limits<float>::infinity();
  bool tanh_approx = false;  // Gelu approximate="tanh"
};

// A DAG of elementwise operators evaluated per element in registers. Value
// slots [0, num_leaves) are the leaves (loaded operands; for a matmul epilogue
// slot 0 is the anchor's result and the operands follow); slot num_leaves + i is
// ops[i]'s result. results[j] is the slot stored to workload output j.
struct ElementwiseProgram {
  int num_leaves = 0;
  std::vector<ElementwiseOp> ops;
  std::vector<int> results;
};

// The output shape every operand is broadcast to.
struct ElementwiseSpec {
  std::vector<int64_t> out_dims;  // as the graph outputs
  int64_t num_elements = 0;
  // Output dims with size-1 dims dropped and contiguous runs merged; never empty.
  // strides[i][d]: element stride of operand i along dims[d]; 0 where broadcast.
  // The innermost stride of every operand is 0 or 1.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides;
};

// An epilogue operand of a matmul, broadcast against the anchor's output
// [batch..., M, N]: element (b, m, n) is at sum(b_d * batch_strides[d]) +
// m * stride_m + n * stride_n.
struct EpilogueOperand {
  int arg = 0;
  std::vector<int64_t> batch_strides;
  int64_t stride_m = 0, stride_n = 0;
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
  std::vector<int64_t> out_dims;  // the anchor's output dims: batch_dims, then M, N
  bool has_m_dim = true;          // false for a 1-D A (numpy MatMul drops M)
  bool has_n_dim = true;          // false for a 1-D B (drops N)
  int64_t num_batches() const;
};

struct KernelSpec {
  enum class Kind { kElementwise, kMatMul };
  Kind kind = Kind::kElementwise;
  std::string node_name;  // the anchor (matmul) or the first node
  std::string op_type;    // "Add", "MatMul+Add+Relu", ...
  // Elementwise: operand_args[i] is the kernel arg of leaf i of `program`.
  // MatMul: operand_args[0..1] (or [0..2] with C) are A, B (, C) of the anchor.
  std::vector<int> operand_args;
  // Kernel arg of each workload output, in order (inputs come first).
  std::vector<int> output_args;
  int num_args = 0;
  // Elementwise: the whole workload. MatMul: the epilogue (leaf 0 = the anchor's
  // result; leaves 1.. are `epilogue` operands); no ops for a bare MatMul.
  ElementwiseProgram program;
  ElementwiseSpec elementwise;
  MatMulSpec matmul;
  std::vector<EpilogueOperand> epilogue;
};

// Checks the workload's form and resolves shapes. UNIMPLEMENTED for an operator
// or a graph shape codegen does not support (naming node and op),
// INVALID_ARGUMENT for a graph that is not a well-formed workload (constants,
// non-f32, dynamic shapes, shapes that do not agree).
absl::StatusOr<KernelSpec> AnalyzeWorkload(const Graph& workload);

}  // namespace kiln
