// RNN recurrence: LSTM, GRU and RNN become an input-projection MatMul and a
// kiln.Recurrence with the interpreter's numbers unchanged, across directions,
// layouts, peepholes, clip, input_forget, linear_before_reset, custom
// activations, initial states and sequence_lens (constant or an input); the
// result compiles. The interpreter's own LSTM/GRU/RNN kernels are checked
// against ONNX's reference outputs by the node suite (tests/conformance), the
// recurrence's kernel against the interpreter by lower_recurrence_test.
#include "compiler_core/passes/rnn_recurrence.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/passes/graph_rewriting.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using testing::GraphBuilder;

struct Case {
  std::string op = "LSTM";
  int64_t seq = 5, batch = 3, input = 4, hidden = 6;
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true, initial = false, peepholes = false;
  std::vector<int32_t> lens;  // constant sequence_lens when not empty
  std::map<std::string, AttrValue> attrs;
  std::vector<bool> outputs = {true, true, true};  // Y, Y_h, Y_c wanted
};

int64_t Gates(const std::string& op) { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }

std::unique_ptr<Graph> Build(const Case& c) {
  GraphBuilder b;
  const int64_t nd = c.direction == "bidirectional" ? 2 : 1, gh = Gates(c.op) * c.hidden;
  Value* x = b.Input("x", c.layout ? std::vector<int64_t>{c.batch, c.seq, c.input}
                                   : std::vector<int64_t>{c.seq, c.batch, c.input});
  std::vector<Value*> in = {x, b.Random("w", {nd, gh, c.input}), b.Random("r", {nd, gh, c.hidden})};
  in.push_back(c.bias ? b.Random("b", {nd, 2 * gh}) : nullptr);
  Value* lens = nullptr;
  if (!c.lens.empty()) {
    lens = AddFreshConstant(*b.graph(), "lens",
                            Tensor::FromVector(DType::kInt32, {static_cast<int64_t>(c.lens.size())}, c.lens));
  }
  in.push_back(lens);
  const std::vector<int64_t> state = c.layout ? std::vector<int64_t>{c.batch, nd, c.hidden}
                                              : std::vector<int64_t>{nd, c.batch, c.hidden};
  in.push_back(c.initial ? b.Input("h0", state) : nullptr);
  if (c.op == "LSTM") {
    in.push_back(c.initial ? b.Input("c0", state) : nullptr);
    in.push_back(c.peepholes ? b.Random("p", {nd, 3 * c.hidden}) : nullptr);
  }
  while (!in.empty() && in.back() == nullptr) in.pop_back();
  std::map<std::string, AttrValue> attrs = c.attrs;
  attrs["hidden_size"] = c.hidden;
  attrs["direction"] = c.direction;
  attrs["layout"] = c.layout;
  Graph& g = *b.graph();
  std::vector<Value*> outs;
  const int num_outputs = c.op == "LSTM" ? 3 : 2;
  for (int i = 0; i < num_outputs; ++i) outs.push_back(*g.AddValue("out" + std::to_string(i)));
  EXPECT_TRUE(g.AddNode(c.op, "rnn", in, outs, attrs).ok());
  for (int i = 0; i < num_outputs; ++i) {
    if (c.outputs[i]) b.Output(outs[i]);
  }
  return b.Finish();
}

// Splits, checks that no ONNX recurrent node is left, that one MatMul and one
// kiln.Recurrence took its place, the numbers, and that the optimised model
// compiles.
void Check(const Case& c) {
  SCOPED_TRACE(absl::StrCat(c.op, " ", c.direction, " layout=", c.layout));
  auto g = Build(c);
  auto original = g->Clone();
  PassPipeline p("rnn");
  p.Add(std::make_unique<RnnRecurrence>());
  EXPECT_TRUE(testing::RunPasses(*g, p));
  int gemms = 0, recurrences = 0;
  for (const auto& n : g->nodes()) {
    EXPECT_NE(n->op_type(), c.op) << g->ToText();
    gemms += n->op_type() == "MatMul";
    recurrences += n->op_type() == "Recurrence" && n->domain() == kKilnDomain;
  }
  EXPECT_EQ(gemms, 1) << g->ToText();
  EXPECT_EQ(recurrences, 1) << g->ToText();
  testing::ExpectSameOutputs(*original, *g, 2e-5);
  auto prepared = PrepareModel(std::move(original));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_TRUE(CheckCompilable(*prepared, CpuTarget::Host()).ok()) << CheckCompilable(*prepared, CpuTarget::Host());
}

TEST(RnnRecurrenceTest, LstmDirectionsLayoutsPeepholes) {
  Check({});
  Check({.direction = "reverse", .initial = true});
  Check({.direction = "bidirectional", .layout = 1, .initial = true, .peepholes = true});
  Check({.bias = false, .attrs = {{"clip", 0.5f}, {"input_forget", int64_t{1}}}});
  Check({.outputs = {false, true, false}});  // only Y_h read: Y and Y_c are not built
}

TEST(RnnRecurrenceTest, GruBothResetForms) {
  Check({.op = "GRU"});
  Check({.op = "GRU", .direction = "bidirectional", .initial = true,
         .attrs = {{"linear_before_reset", int64_t{1}}}});
  Check({.op = "GRU", .layout = 1, .attrs = {{"linear_before_reset", int64_t{1}}, {"clip", 0.7f}}});
}

TEST(RnnRecurrenceTest, RnnCustomActivations) {
  Check({.op = "RNN"});
  for (const char* f : {"Relu", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu",
                        "Softsign", "Softplus", "Sigmoid"}) {
    Check({.op = "RNN", .attrs = {{"activations", std::vector<std::string>{f}},
                                  {"activation_alpha", std::vector<float>{0.3f}},
                                  {"activation_beta", std::vector<float>{0.6f}}}});
  }
  Check({.op = "LSTM", .direction = "bidirectional",
         .attrs = {{"activations", std::vector<std::string>{"HardSigmoid", "Tanh", "Softsign", "Sigmoid", "Relu",
                                                              "Tanh"}}}});
}

// Sequences shorter than the tensor: past its end a sequence's state stays and
// Y is zero, in both directions.
TEST(RnnRecurrenceTest, ConstantSequenceLengths) {
  Check({.lens = {5, 2, 0}});
  Check({.direction = "bidirectional", .initial = true, .lens = {3, 5, 1}});
  Check({.op = "GRU", .direction = "reverse", .lens = {1, 4, 5}});
  Check({.op = "RNN", .layout = 1, .lens = {2, 2, 5}});
}

// sequence_lens as a graph input: read by the recurrence at run time.
TEST(RnnRecurrenceTest, SequenceLengthsInput) {
  GraphBuilder b;
  Value* x = b.Input("x", {4, 2, 3});
  Value* lens = *b.graph()->AddInput("lens", TensorType::Static(DType::kInt32, {2}));
  Graph& g = *b.graph();
  Value* y = *g.AddValue("y");
  Value* yh = *g.AddValue("yh");
  ASSERT_TRUE(g.AddNode("GRU", "gru",
                        {x, b.Random("w", {2, 15, 3}), b.Random("r", {2, 15, 5}), b.Random("b", {2, 30}), lens},
                        {y, yh}, {{"hidden_size", int64_t{5}}, {"direction", std::string("bidirectional")}})
                  .ok());
  b.Output(y);
  b.Output(yh);
  auto unrolled = b.Finish();
  auto original = unrolled->Clone();
  PassPipeline p("rnn");
  p.Add(std::make_unique<RnnRecurrence>());
  EXPECT_TRUE(testing::RunPasses(*unrolled, p));
  EXPECT_NE(testing::OpSequence(*unrolled).find("Recurrence"), std::string::npos);
  for (const std::vector<int32_t>& l : {std::vector<int32_t>{4, 2}, {0, 3}, {1, 4}}) {
    std::map<std::string, Tensor> feeds = testing::RandomInputs(*original, 3, 1);
    feeds.at("lens") = Tensor::FromVector(DType::kInt32, {2}, l);
    auto want = Evaluate(*original, feeds);
    auto got = Evaluate(*unrolled, feeds);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    for (const char* name : {"y", "yh"}) {
      const Tensor &a = want->at(name), &c = got->at(name);
      for (int64_t i = 0; i < a.num_elements(); ++i) {
        EXPECT_NEAR(a.data<float>()[i], c.data<float>()[i], 2e-5) << name << "[" << i << "]";
      }
    }
  }
}

TEST(RnnRecurrenceTest, DynamicSequenceStays) {
  GraphBuilder b;
  Graph& g = *b.graph();
  Value* x = *g.AddInput("x", TensorType{DType::kFloat32, {Dim::Symbol("T"), Dim::Static(1), Dim::Static(2)}, true});
  Value* y = *g.AddValue("y");
  ASSERT_TRUE(
      g.AddNode("RNN", "rnn", {x, b.Random("w", {1, 3, 2}), b.Random("r", {1, 3, 3})}, {y}, {{"hidden_size", int64_t{3}}})
          .ok());
  b.Output(y);
  auto graph = b.Finish();
  PassPipeline p("rnn");
  p.Add(std::make_unique<RnnRecurrence>());
  EXPECT_FALSE(testing::RunPasses(*graph, p));
}

}  // namespace
}  // namespace kiln
