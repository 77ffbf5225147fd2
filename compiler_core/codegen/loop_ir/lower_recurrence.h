// "recurrence" workloads on loop IR: one kiln.Recurrence (the time loop of an
// LSTM, GRU or RNN whose input projection is already computed, see
// compiler_core/passes/rnn_recurrence.h).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/frontend/ops/rnn.h"

namespace kiln::loop_ir {

// A kiln.Recurrence whose operands are workload inputs (sequence_lens may be
// a constant). One task per (direction, batch entry) runs the whole sequence:
// per step a matrix-vector product of the state with the transposed recurrent
// weights into an accumulator (column blocks of vw*unroll lanes; per block
// either all k, the block staying in registers, or passes of kb rows over all
// blocks), then the cell's gates, activations, clip, peepholes and masking,
// vectorized over the hidden units. Knobs: vw (lanes), unroll (vectors per
// column block), kb (rows per pass; absent or 0: all k per block).
WorkloadLowering RecurrenceLowering();

// ---- the kind's analysis and cell, shared with its GPU lowering
// (loop_ir/gpu/lower_recurrence.h) ----

// Operand positions of kiln.Recurrence.
enum RecurrenceOperand { kRecXp = 0, kRecRt, kRecRbh, kRecLens, kRecH0, kRecC0, kRecPeep, kRecNumOperands };

struct RecurrenceForm {
  const Node* node = nullptr;
  ops::RnnSpec spec;
  int64_t T = 0, B = 0, H = 0, G = 0, ND = 0;
  std::vector<int> arg;                        // per operand: workload input position, -1 if absent
  std::optional<std::vector<int32_t>> lens;    // constant sequence_lens (not all T)
  std::vector<int> out;                        // per output Y, Y_h, Y_c: workload output position or -1
};

// The kind's match: the form, or UNIMPLEMENTED / INVALID_ARGUMENT naming the node.
absl::StatusOr<RecurrenceForm> AnalyzeRecurrence(const Graph& g);

// Where the cell of hidden unit j reads its operands and writes its state:
// the CPU kernel's stack temps, the GPU kernel's shared and local buffers.
struct RecurrenceCellAccess {
  std::function<Expr(int64_t gate, const Expr& j)> xp;   // the input projection of a gate
  std::function<Expr(int64_t gate, const Expr& j)> acc;  // the state times R^T (GRU's h gate:
                                                         // (r h) R_h^T without linear_before_reset)
  std::function<Expr(const Expr& j)> h, c;               // the state before the step
  std::function<Expr(int64_t part, const Expr& j)> peep;  // peepholes i, o, f; null without
  std::function<Expr(const Expr& j)> rbh;                // GRU's recurrent h bias; null without
  std::function<Stmt(const Expr& j, const Expr& v)> store_h, store_c;
  std::function<Stmt(const Expr& j)> store_y;            // null without Y; reads the new h back
};

// One step of the cell at hidden unit j with one direction's activations
// (the interpreter's semantics, compiler_core/frontend/ops/rnn_ops.cc: gates
// i, o, f, c (LSTM), z, r, h (GRU), one (RNN); clip before the activations):
// h (which reads the old c) before c, then Y.
Stmt RecurrenceCell(const RecurrenceForm& f, const std::vector<ops::RnnActivation>& acts,
                    const RecurrenceCellAccess& io, const Expr& j);
// GRU without linear_before_reset: r * h at unit j, the state the h gate's
// recurrent product reads.
Expr GruResetState(const RecurrenceForm& f, const std::vector<ops::RnnActivation>& acts,
                   const RecurrenceCellAccess& io, const Expr& j);
// Whether two directions' activations are the same (one step serves both).
bool SameActivations(const std::vector<ops::RnnActivation>& a, const std::vector<ops::RnnActivation>& b);

}  // namespace kiln::loop_ir
