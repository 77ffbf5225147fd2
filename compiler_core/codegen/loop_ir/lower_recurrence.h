// "recurrence" workloads on loop IR: one kiln.Recurrence (the time loop of an
// LSTM, GRU or RNN whose input projection is already computed, see
// compiler_core/passes/rnn_recurrence.h).
#pragma once

#include "compiler_core/codegen/loop_ir/lower.h"

namespace kiln::loop_ir {

// A kiln.Recurrence whose operands are workload inputs (sequence_lens may be
// a constant). One task per (direction, batch entry) runs the whole sequence:
// per step a matrix-vector product of the state with the transposed recurrent
// weights into an accumulator (column blocks of vw*unroll lanes, the k loop
// innermost so the block stays in registers), then the cell's gates,
// activations, clip, peepholes and masking, vectorized over the hidden units.
// Knobs: vw (lanes), unroll (vectors per column block).
WorkloadLowering RecurrenceLowering();

}  // namespace kiln::loop_ir
