// The recurrent family (LSTM, GRU, RNN), parsed: shared by the operators'
// shape functions and reference kernels (rnn_ops.cc, also kiln.Recurrence's),
// the pass that splits them into an input projection and a kiln.Recurrence
// (compiler_core/passes/rnn_recurrence.cc) and the recurrence's lowering
// (compiler_core/codegen/loop_ir/lower_recurrence.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/frontend/op_registry.h"

namespace kiln::ops {

enum class RnnKind { kLstm, kGru, kRnn };

// One activation of a cell: Sigmoid, Tanh, Relu, Affine, LeakyRelu,
// ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign or Softplus, with
// its alpha/beta where it takes them.
struct RnnActivation {
  std::string name;
  float alpha = 0, beta = 0;
  double Apply(double x) const;
};

struct RnnSpec {
  RnnKind kind = RnnKind::kLstm;
  int64_t gates = 4;          // 4 (LSTM, iofc), 3 (GRU, zrh), 1 (RNN)
  int64_t hidden = 0;         // hidden_size
  int64_t num_directions = 1;
  bool reverse = false;       // direction="reverse" (a single backward pass)
  bool batch_first = false;   // layout=1: X [batch, seq, input], states [batch, dir, hidden]
  float clip = 0;             // 0: no clip; else pre-activations clipped to [-clip, clip]
  bool input_forget = false;  // LSTM: f = 1 - i
  bool linear_before_reset = false;  // GRU
  // Per direction (forward first): LSTM f, g, h; GRU f, g; RNN f.
  std::vector<std::vector<RnnActivation>> activations;
};

// The node's attributes, checked (INVALID_ARGUMENT naming the attribute).
absl::StatusOr<RnnSpec> ParseRnn(const Node& node);

}  // namespace kiln::ops
