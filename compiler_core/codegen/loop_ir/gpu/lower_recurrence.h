// GPU lowering of the "recurrence" kind (loop_ir/lower_recurrence.h: its
// match and cell): a kiln.Recurrence (the time loop of an LSTM, GRU or RNN
// whose input projection is already computed) as one block per direction
// and `bb` batch entries, looping over the time steps.
//
// The block's threads own hidden units: thread t takes units t, t + bt, ...
// Per step a thread multiplies the state (in shared memory, read by every
// thread) by the columns of the transposed recurrent weights of its units'
// gates (neighbouring threads read neighbouring columns: coalesced), the
// accumulators in registers (a local buffer, one per unit, gate and batch
// entry, each weight loaded once for the block's bb entries), then runs the
// cell of its units (gates, activations, clip, peepholes, GRU's
// linear_before_reset: RecurrenceCell, the CPU lowering's). The state is
// double-buffered in shared memory (a step reads one half and writes the
// other), so a step is one thread loop and one barrier; GRU without
// linear_before_reset takes two (r * h goes through shared memory before
// the h gate's product). The cell state c stays in registers. Sequence
// lengths mask steps past an entry's end: its state is carried over and Y
// is zero there.
//
// Knobs: bt (threads per block: the space's are powers of two from 32 up
// to the first that covers the hidden size; each thread takes ceil(H / bt)
// units, at most 8), bb (batch entries per block: 1, 2, 4, 8 and the batch
// if smaller; at most 64 accumulators a thread). The state takes 2 * bb * H
// floats of shared memory (3 * bb * H for GRU without linear_before_reset),
// at most 48 KiB: hidden sizes beyond (about 6100, or 4090) are refused.
#pragma once

#include "compiler_core/codegen/loop_ir/gpu/lower.h"

namespace kiln::loop_ir::gpu {

GpuWorkloadLowering GpuRecurrenceLowering();

}  // namespace kiln::loop_ir::gpu
