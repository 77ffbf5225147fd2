// Recurrence workloads on loop IR (compiler_core/codegen/loop_ir/lower_recurrence.h):
// kiln.Recurrence for LSTM (peepholes, input_forget, clip, initial states),
// GRU (both reset forms) and RNN (every activation), forward, reverse and
// bidirectional with different activations per direction, sequence_lens as
// an input and as a constant, hidden sizes that no vector width divides;
// JIT-compiled at every schedule point and compared with the interpreter.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/loop_ir/lower_recurrence.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "compiler_core/frontend/op_registry.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln {
namespace {

using namespace loop_ir_testing;  // NOLINT: test helpers

struct Case {
  std::string cell = "LSTM";
  int64_t seq = 6, batch = 2, hidden = 5;
  std::string direction = "forward";
  bool rbh = false, initial = false, peepholes = false;
  enum { kNoLens, kLensInput, kLensConstant } lens = kNoLens;
  std::vector<int32_t> lens_values;
  Attrs attrs;
  std::vector<bool> outputs = {true, true, true};
};

int64_t Gates(const std::string& cell) { return cell == "LSTM" ? 4 : cell == "GRU" ? 3 : 1; }

struct Built {
  std::unique_ptr<Graph> g;
  std::map<std::string, Tensor> feeds;
};

Built Build(const Case& c) {
  auto g = std::make_unique<Graph>();
  g->set_opset_version(17);
  const int64_t nd = c.direction == "bidirectional" ? 2 : 1, h = c.hidden, gh = Gates(c.cell) * h;
  auto input = [&](const std::vector<int64_t>& dims) {
    return *g->AddInput(absl::StrCat("in", g->inputs().size()), TensorType::Static(DType::kFloat32, dims));
  };
  std::vector<Value*> in = {input({c.seq, c.batch, nd * gh}), input({nd, h, gh})};
  in.push_back(c.rbh ? input({nd, h}) : nullptr);
  Value* lens = nullptr;
  if (c.lens == Case::kLensInput) {
    lens = *g->AddInput(absl::StrCat("in", g->inputs().size()), TensorType::Static(DType::kInt32, {c.batch}));
  } else if (c.lens == Case::kLensConstant) {
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
  Built b;
  b.feeds = codegen_testing::RandomFeeds(*g, 5, -0.8f, 0.8f);
  if (c.lens == Case::kLensInput) {
    b.feeds.at(lens->name()) = Tensor::FromVector(DType::kInt32, {c.batch}, c.lens_values);
  }
  b.g = std::move(g);
  return b;
}

void Check(const Case& c) {
  SCOPED_TRACE(absl::StrCat(c.cell, " ", c.direction, " hidden=", c.hidden));
  Built b = Build(c);
  const Graph& g = *b.g;
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(g), "recurrence") << g.ToText();
  std::vector<ScheduleConfig> configs = EnumerateSchedules(g, target);
  ASSERT_FALSE(configs.empty());
  for (const ScheduleConfig& config : configs) {
    auto lowered = loop_ir::RecurrenceLowering().lower(g, config, target);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    ASSERT_TRUE(loop_ir::Verify(*lowered).ok()) << loop_ir::Print(*lowered);
  }
  int64_t tasks = codegen_testing::CheckConfigsAgainstInterpreter(g, b.feeds, configs, target);
  const int64_t nd = c.direction == "bidirectional" ? 2 : 1;
  EXPECT_EQ(tasks, nd * c.batch);  // one task per direction and batch entry
}

TEST(LowerRecurrenceTest, Lstm) {
  Check({});
  Check({.direction = "reverse", .initial = true, .peepholes = true});
  Check({.hidden = 20, .direction = "bidirectional", .initial = true, .peepholes = true,
         .attrs = {{"clip", 0.6f}, {"input_forget", int64_t{1}}}});
  Check({.hidden = 33, .outputs = {false, true, false}});  // only Y_h
  Check({.hidden = 16, .outputs = {false, false, true}});  // only Y_c
}

TEST(LowerRecurrenceTest, GruBothResetForms) {
  Check({.cell = "GRU"});
  Check({.cell = "GRU", .hidden = 17, .direction = "reverse", .initial = true});
  Check({.cell = "GRU", .hidden = 24, .direction = "bidirectional", .rbh = true, .initial = true,
         .attrs = {{"linear_before_reset", int64_t{1}}}});
  Check({.cell = "GRU", .rbh = true, .attrs = {{"linear_before_reset", int64_t{1}}, {"clip", 0.4f}}});
}

TEST(LowerRecurrenceTest, RnnEveryActivation) {
  for (const char* f : {"Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh",
                        "HardSigmoid", "Elu", "Softsign", "Softplus"}) {
    SCOPED_TRACE(f);
    Check({.cell = "RNN", .hidden = 9, .attrs = {{"activations", std::vector<std::string>{f}},
                                                 {"activation_alpha", std::vector<float>{0.3f}},
                                                 {"activation_beta", std::vector<float>{0.6f}}}});
  }
}

TEST(LowerRecurrenceTest, DirectionsWithDifferentActivations) {
  Check({.direction = "bidirectional",
         .attrs = {{"activations", std::vector<std::string>{"HardSigmoid", "Tanh", "Softsign", "Sigmoid", "Relu",
                                                              "Tanh"}}}});
  Check({.cell = "GRU", .direction = "bidirectional",
         .attrs = {{"activations", std::vector<std::string>{"Sigmoid", "Tanh", "HardSigmoid", "Elu"}}}});
}

// Past a sequence's end Y is zero and the final state is where it ended, in
// both directions; an empty sequence keeps the initial state.
TEST(LowerRecurrenceTest, SequenceLengths) {
  Check({.batch = 3, .direction = "bidirectional", .initial = true, .lens = Case::kLensInput,
         .lens_values = {6, 2, 0}});
  Check({.cell = "GRU", .batch = 3, .direction = "reverse", .lens = Case::kLensConstant,
         .lens_values = {1, 4, 6}});
  Check({.cell = "RNN", .batch = 2, .lens = Case::kLensConstant, .lens_values = {6, 6}});  // all full
}

TEST(LowerRecurrenceTest, RefusesWhatItCannotRun) {
  Built b = Build({});
  Graph& g = *b.g;
  EXPECT_TRUE(loop_ir::RecurrenceLowering().match(g).ok());
  auto two = std::make_unique<Graph>();
  two->set_opset_version(17);
  Value* x = *two->AddInput("in0", TensorType::Static(DType::kFloat32, {2, 2}));
  Value* y = *two->AddValue("y");
  ASSERT_TRUE(two->AddNode("Relu", "relu", {x}, {y}).ok());
  two->AddOutput(y);
  ASSERT_TRUE(InferShapes(*two).ok());
  absl::Status st = loop_ir::RecurrenceLowering().match(*two);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
}

}  // namespace
}  // namespace kiln
