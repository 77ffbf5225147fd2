// RNN recurrence: an LSTM, GRU or RNN node whose input X has a static shape
// becomes
//   one MatMul of the whole sequence with the input weights of every
//   direction (X[T, B, I] @ W^T plus the biases that do not depend on the
//   state), the input projection XP [T, B, ND*G*H], and
//   one kiln.Recurrence over XP with the recurrent weights transposed
//   (RT [ND, H, G*H]), GRU's Rb_h when linear_before_reset (it is scaled by
//   r), sequence_lens, the initial states and the peepholes,
// with Transposes around it for layout=1. The MatMul is a matmul workload like
// any other; the recurrence is one kernel per node (lower_recurrence.h) whose
// tasks are the directions and batch entries, each running the whole time
// loop: no per-step kernels, state or weights leaving the cache between steps.
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class RnnRecurrence : public GraphPass {
 public:
  std::string name() const override { return "rnn_recurrence"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
