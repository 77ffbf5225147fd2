// GPU lowering of the recurrence kind (compiler_core/codegen/loop_ir/gpu/lower_recurrence.h):
// kiln.Recurrence for LSTM (peepholes, input_forget, clip, initial states),
// GRU (both reset forms) and RNN (every activation), forward, reverse and
// bidirectional with different activations per direction, sequence_lens as
// an input and as a constant, hidden sizes that no block divides (units past
// H in a thread's last round) and batches that no entry count divides;
// every point of the GPU space against the reference interpreter (through
// the CPU emulation) and assembled by ptxas for sm_80 and sm_90; the
// default's loop IR; refused knobs and sizes.
#include "compiler_core/codegen/loop_ir/gpu/lower_recurrence.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"

namespace kiln {
namespace {

using Attrs = std::map<std::string, AttrValue>;

const GpuTarget kSm90{90};

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

// The graph of `c`, and random inputs unless `feeds` is false.
Built Build(const Case& c, bool feeds = true) {
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
  if (feeds) b.feeds = codegen_testing::RandomFeeds(*g, 5, -0.8f, 0.8f);
  if (feeds && c.lens == Case::kLensInput) {
    b.feeds.at(lens->name()) = Tensor::FromVector(DType::kInt32, {c.batch}, c.lens_values);
  }
  b.g = std::move(g);
  return b;
}

void Check(const Case& c) {
  SCOPED_TRACE(absl::StrCat(c.cell, " ", c.direction, " hidden=", c.hidden, " batch=", c.batch));
  Built b = Build(c);
  const Graph& g = *b.g;
  ASSERT_EQ(WorkloadKind(g), "recurrence") << g.ToText();
  std::vector<ScheduleConfig> space = EnumerateSchedules(g, kSm90);
  ASSERT_FALSE(space.empty());
  EXPECT_NE(std::find(space.begin(), space.end(), DefaultSchedule(g, kSm90)), space.end());
  gpu_testing::CheckGpuConfigsAgainstInterpreter(g, b.feeds, space);
  gpu_testing::CheckPtxAssembles(g, space);
}

TEST(GpuRecurrenceLoweringTest, Lstm) {
  Check({});
  Check({.batch = 3, .direction = "reverse", .initial = true, .peepholes = true});
  Check({.hidden = 20, .direction = "bidirectional", .initial = true, .peepholes = true,
         .attrs = {{"clip", 0.6f}, {"input_forget", int64_t{1}}}});
  Check({.seq = 4, .batch = 5, .hidden = 33, .outputs = {false, true, false}});  // only Y_h; 2 units a thread
  Check({.seq = 3, .hidden = 16, .outputs = {false, false, true}});              // only Y_c
}

TEST(GpuRecurrenceLoweringTest, GruBothResetForms) {
  Check({.cell = "GRU"});
  Check({.cell = "GRU", .batch = 3, .hidden = 17, .direction = "reverse", .initial = true});
  Check({.cell = "GRU", .hidden = 24, .direction = "bidirectional", .rbh = true, .initial = true,
         .attrs = {{"linear_before_reset", int64_t{1}}}});
  Check({.cell = "GRU", .rbh = true, .attrs = {{"linear_before_reset", int64_t{1}}, {"clip", 0.4f}}});
  Check({.cell = "GRU", .seq = 3, .batch = 3, .hidden = 70});  // 1 to 3 units a thread
}

TEST(GpuRecurrenceLoweringTest, RnnEveryActivation) {
  for (const char* f : {"Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh",
                        "HardSigmoid", "Elu", "Softsign", "Softplus"}) {
    SCOPED_TRACE(f);
    Check({.cell = "RNN", .hidden = 9, .attrs = {{"activations", std::vector<std::string>{f}},
                                                 {"activation_alpha", std::vector<float>{0.3f}},
                                                 {"activation_beta", std::vector<float>{0.6f}}}});
  }
}

TEST(GpuRecurrenceLoweringTest, DirectionsWithDifferentActivations) {
  Check({.direction = "bidirectional",
         .attrs = {{"activations", std::vector<std::string>{"HardSigmoid", "Tanh", "Softsign", "Sigmoid", "Relu",
                                                              "Tanh"}}}});
  Check({.cell = "GRU", .direction = "bidirectional",
         .attrs = {{"activations", std::vector<std::string>{"Sigmoid", "Tanh", "HardSigmoid", "Elu"}}}});
}

// Past a sequence's end Y is zero and the final state is where it ended, in
// both directions; an empty sequence keeps the initial state; entries of
// one block end at different steps.
TEST(GpuRecurrenceLoweringTest, SequenceLengths) {
  Check({.batch = 3, .direction = "bidirectional", .initial = true, .lens = Case::kLensInput,
         .lens_values = {6, 2, 0}});
  Check({.cell = "GRU", .batch = 3, .direction = "reverse", .lens = Case::kLensConstant,
         .lens_values = {1, 4, 6}});
  Check({.cell = "GRU", .batch = 5, .direction = "bidirectional", .initial = true, .lens = Case::kLensInput,
         .lens_values = {3, 6, 0, 1, 5}});
  Check({.cell = "RNN", .batch = 2, .lens = Case::kLensConstant, .lens_values = {6, 6}});  // all full
}

TEST(GpuRecurrenceLoweringTest, LoopIrOfTheDefault) {
  {  // one LSTM entry of 128 units: a thread per unit, the state double-buffered
    Built b = Build({.seq = 10, .batch = 1, .hidden = 128}, false);
    const ScheduleConfig c = DefaultSchedule(*b.g, kSm90);
    EXPECT_EQ(c.ToString(), "bb=1,bt=128");
    absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*b.g, c, kSm90);
    ASSERT_TRUE(f.ok()) << f.status();
    const loop_ir::GpuLaunch launch = loop_ir::GpuLaunchOf(*f);
    EXPECT_EQ(launch.blocks, 1);
    EXPECT_EQ(launch.threads, 128);
    EXPECT_EQ(launch.shared_bytes, 2 * 128 * 4);
    const std::string ir = loop_ir::Print(*f);
    EXPECT_NE(ir.find("allocate local acc: f32[4]"), std::string::npos) << ir;
    EXPECT_NE(ir.find("for (s_, 0, 10)"), std::string::npos) << ir;
    EXPECT_NE(ir.find("fma(h[(((s_ % 2) * 128) + k_)]"), std::string::npos) << ir;
  }
  {  // 2 x 256 entries: 4 a block, 128 blocks
    Built b = Build({.seq = 2, .batch = 256, .hidden = 64, .direction = "bidirectional"}, false);
    const ScheduleConfig c = DefaultSchedule(*b.g, kSm90);
    EXPECT_EQ(c.ToString(), "bb=4,bt=64");
    absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*b.g, c, kSm90);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(loop_ir::GpuLaunchOf(*f).blocks, 128);
  }
}

TEST(GpuRecurrenceLoweringTest, RefusesKnobsAndSizes) {
  Built b = Build({.batch = 3});
  ScheduleConfig c;
  c.Set("bb", 4);
  absl::Status s = ValidateSchedule(*b.g, c, kSm90);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bb=4"), std::string::npos) << s;
  c = ScheduleConfig();
  c.Set("unroll", 2);
  EXPECT_NE(ValidateSchedule(*b.g, c, kSm90).message().find("on a GPU"), std::string::npos);
  // 8 LSTM entries of 256 units in a block of 32 threads: 8 units x 4 gates
  // x 8 entries, 256 accumulators a thread.
  Built wide = Build({.seq = 1, .batch = 8, .hidden = 256}, false);
  c = ScheduleConfig();
  c.Set("bt", 32);
  c.Set("bb", 8);
  s = ValidateSchedule(*wide.g, c, kSm90);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("256 accumulators per thread"), std::string::npos) << s;
  // A state beyond shared memory: no block takes it.
  Built huge = Build({.seq = 1, .batch = 1, .hidden = 6200, .outputs = {false, true, false}}, false);
  EXPECT_TRUE(EnumerateSchedules(*huge.g, kSm90).empty());
  s = ValidateSchedule(*huge.g, ScheduleConfig(), kSm90);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("hidden size 6200"), std::string::npos) << s;
}

}  // namespace
}  // namespace kiln
