// RNN unrolling: an LSTM, GRU or RNN node whose input X has a static shape
// becomes, per direction,
//   one Gemm of the whole sequence with the input weights (X[T*B, I] W^T plus
//   the biases that do not depend on the state), then per time step
//   a Gemm of the state with the recurrent weights (the step's slice of the
//   first Gemm as its C), Slices per gate and the cell's arithmetic as ONNX
//   elementwise operators (activations, clip, peepholes, input_forget, GRU's
//   linear_before_reset),
// and Y / Y_h / Y_c assembled by Reshape, Concat and (layout=1) Transpose.
// sequence_lens that is not constant becomes a per-step mask [B,1]: a step
// past a sequence's end leaves its state unchanged and writes zeros to Y, so
// forward and reverse directions both match ONNX. Code generation then sees
// only operators it has lowerings for, and every step's kernels are the same
// workloads (tuned once).
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class RnnUnrolling : public GraphPass {
 public:
  std::string name() const override { return "rnn_unrolling"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
