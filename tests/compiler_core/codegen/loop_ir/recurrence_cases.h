// kiln.Recurrence workloads for the CPU and GPU lowering tests
// (lower_recurrence_test.cc, gpu/lower_recurrence_test.cc): the graph and
// inputs of a case and the case lists both check, each with its own harness.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/shape_inference.h"
#include "compiler_core/ir/graph.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln::loop_ir_testing {

struct RecurrenceCase {
  std::string cell = "LSTM";
  int64_t seq = 6, batch = 2, hidden = 5;
  std::string direction = "forward";
  bool rbh = false, initial = false, peepholes = false;
  enum { kNoLens, kLensInput, kLensConstant } lens = kNoLens;
  std::vector<int32_t> lens_values;
  Attrs attrs;
  std::vector<bool> outputs = {true, true, true};
};

inline int64_t RecurrenceGates(const std::string& cell) { return cell == "LSTM" ? 4 : cell == "GRU" ? 3 : 1; }

inline std::string RecurrenceName(const RecurrenceCase& c) {
  return absl::StrCat(c.cell, " ", c.direction, " hidden=", c.hidden, " batch=", c.batch);
}

struct RecurrenceWorkload {
  std::unique_ptr<Graph> g;
  std::map<std::string, Tensor> feeds;
};

// The graph of `c`, and random inputs (in [-0.8, 0.8]; sequence_lens as
// given) unless `feeds` is false.
inline RecurrenceWorkload RecurrenceGraph(const RecurrenceCase& c, bool feeds = true) {
  auto g = std::make_unique<Graph>();
  g->set_opset_version(17);
  const int64_t nd = c.direction == "bidirectional" ? 2 : 1, h = c.hidden, gh = RecurrenceGates(c.cell) * h;
  auto input = [&](const std::vector<int64_t>& dims) {
    return *g->AddInput(absl::StrCat("in", g->inputs().size()), TensorType::Static(DType::kFloat32, dims));
  };
  std::vector<Value*> in = {input({c.seq, c.batch, nd * gh}), input({nd, h, gh})};
  in.push_back(c.rbh ? input({nd, h}) : nullptr);
  Value* lens = nullptr;
  if (c.lens == RecurrenceCase::kLensInput) {
    lens = *g->AddInput(absl::StrCat("in", g->inputs().size()), TensorType::Static(DType::kInt32, {c.batch}));
  } else if (c.lens == RecurrenceCase::kLensConstant) {
    lens = *g->AddConstant("lens", Tensor::FromVector(DType::kInt32, {c.batch}, c.lens_values));
  }
  in.push_back(lens);
  in.push_back(c.initial ? input({nd, c.batch, h}) : nullptr);
  in.push_back(c.initial && c.cell == "LSTM" ? input({nd, c.batch, h}) : nullptr);
  in.push_back(c.peepholes ? input({nd, 3 * h}) : nullptr);
  while (in.back() == nullptr) in.pop_back();
  Attrs attrs = c.attrs;
  attrs["cell"] = c.cell;
  attrs["hidden_size"] = h;
  attrs["direction"] = c.direction;
  const int num_outputs = c.cell == "LSTM" ? 3 : 2;
  std::vector<Value*> outs;
  for (int i = 0; i < num_outputs; ++i) outs.push_back(*g->AddValue(absl::StrCat("out", i)));
  EXPECT_TRUE(g->AddNode("Recurrence", "rec", in, outs, attrs, std::string(kKilnDomain)).ok());
  for (int i = 0; i < num_outputs; ++i) {
    if (c.outputs[i]) g->AddOutput(outs[i]);
  }
  absl::Status st = InferShapes(*g);
  EXPECT_TRUE(st.ok()) << st << "\n" << g->ToText();
  RecurrenceWorkload w;
  if (feeds) w.feeds = codegen_testing::RandomFeeds(*g, 5, -0.8f, 0.8f);
  if (feeds && c.lens == RecurrenceCase::kLensInput) {
    w.feeds.at(lens->name()) = Tensor::FromVector(DType::kInt32, {c.batch}, c.lens_values);
  }
  w.g = std::move(g);
  return w;
}

// LSTM: reverse with initial states and peepholes, bidirectional with clip
// and input_forget, only Y_h (hidden 33: no vector width divides it; 2 units
// a GPU thread), only Y_c; batches of 1 to 5 entries.
inline std::vector<RecurrenceCase> LstmCases() {
  return {
      {},
      {.batch = 3, .direction = "reverse", .initial = true, .peepholes = true},
      {.hidden = 20, .direction = "bidirectional", .initial = true, .peepholes = true,
       .attrs = {{"clip", 0.6f}, {"input_forget", int64_t{1}}}},
      {.seq = 4, .batch = 5, .hidden = 33, .outputs = {false, true, false}},  // only Y_h
      {.seq = 3, .hidden = 16, .outputs = {false, false, true}},              // only Y_c
  };
}

// GRU with the reset gate before and after the recurrent product
// (linear_before_reset, with its recurrent bias), clip; hidden 70: 1 to 3
// units a GPU thread.
inline std::vector<RecurrenceCase> GruCases() {
  return {
      {.cell = "GRU"},
      {.cell = "GRU", .batch = 3, .hidden = 17, .direction = "reverse", .initial = true},
      {.cell = "GRU", .hidden = 24, .direction = "bidirectional", .rbh = true, .initial = true,
       .attrs = {{"linear_before_reset", int64_t{1}}}},
      {.cell = "GRU", .rbh = true, .attrs = {{"linear_before_reset", int64_t{1}}, {"clip", 0.4f}}},
      {.cell = "GRU", .seq = 3, .batch = 3, .hidden = 70},
  };
}

// RNN with each activation (alpha 0.3 and beta 0.6 where it takes them).
inline std::vector<RecurrenceCase> RnnActivationCases() {
  std::vector<RecurrenceCase> out;
  for (const char* f : {"Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh",
                        "HardSigmoid", "Elu", "Softsign", "Softplus"}) {
    out.push_back({.cell = "RNN", .hidden = 9, .attrs = {{"activations", std::vector<std::string>{f}},
                                                         {"activation_alpha", std::vector<float>{0.3f}},
                                                         {"activation_beta", std::vector<float>{0.6f}}}});
  }
  return out;
}

// Bidirectional LSTM and GRU whose directions have different activations.
inline std::vector<RecurrenceCase> DirectionActivationCases() {
  return {
      {.direction = "bidirectional",
       .attrs = {{"activations",
                  std::vector<std::string>{"HardSigmoid", "Tanh", "Softsign", "Sigmoid", "Relu", "Tanh"}}}},
      {.cell = "GRU", .direction = "bidirectional",
       .attrs = {{"activations", std::vector<std::string>{"Sigmoid", "Tanh", "HardSigmoid", "Elu"}}}},
  };
}

// sequence_lens as an input and as a constant: past a sequence's end Y is
// zero and the final state is where it ended, in both directions; an empty
// sequence keeps the initial state; entries of one GPU block end at
// different steps; all sequences full.
inline std::vector<RecurrenceCase> SequenceLengthCases() {
  return {
      {.batch = 3, .direction = "bidirectional", .initial = true, .lens = RecurrenceCase::kLensInput,
       .lens_values = {6, 2, 0}},
      {.cell = "GRU", .batch = 3, .direction = "reverse", .lens = RecurrenceCase::kLensConstant,
       .lens_values = {1, 4, 6}},
      {.cell = "GRU", .batch = 5, .direction = "bidirectional", .initial = true, .lens = RecurrenceCase::kLensInput,
       .lens_values = {3, 6, 0, 1, 5}},
      {.cell = "RNN", .batch = 2, .lens = RecurrenceCase::kLensConstant, .lens_values = {6, 6}},
  };
}

}  // namespace kiln::loop_ir_testing
