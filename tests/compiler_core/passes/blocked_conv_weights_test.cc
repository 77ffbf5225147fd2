// Blocked conv weights: which Convs become kiln.BlockedConv with their
// weights blocked by 16 output channels (and which stay), with the
// interpreter's numbers unchanged bit for bit, and the rewritten model
// compiling to one conv group for CPU targets and not at all for GPUs.
#include "compiler_core/passes/blocked_conv_weights.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/conv_blocking.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

struct Case {
  int64_t n = 1, c = 24, k = 32, h = 14, w = 14;
  std::map<std::string, AttrValue> attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                           {"strides", std::vector<int64_t>{2, 2}}};
  int64_t kernel = 3;
  bool bias = true, constant_weights = true;
};

std::unique_ptr<Graph> Build(const Case& c) {
  return testing::ConvGraph({.x = {c.n, c.c, c.h, c.w}, .k = c.k, .kernel = c.kernel, .attrs = c.attrs, .bias = c.bias,
                             .relu = true, .constant_weights = c.constant_weights});
}

bool Rewrite(Graph& g, bool pointwise = false) {
  PassPipeline p("blocked");
  p.Add(std::make_unique<BlockedConvWeights>(pointwise));
  return testing::RunPasses(g, p);
}

void ExpectRewritten(const Case& c) {
  SCOPED_TRACE(absl::StrCat("c=", c.c, " k=", c.k, " ", c.h, "x", c.w));
  auto g = Build(c);
  auto original = g->Clone();
  ASSERT_TRUE(Rewrite(*g)) << g->ToText();
  EXPECT_EQ(testing::OpSequence(*g), "BlockedConv,Relu");
  const Node* conv = g->nodes().front().get();
  EXPECT_EQ(conv->domain(), kKilnDomain);
  const int64_t group = c.attrs.count("group") ? std::get<int64_t>(c.attrs.at("group")) : 1;
  EXPECT_EQ(conv->input(1)->type().StaticDims(),
            (std::vector<int64_t>{c.k / ops::kConvWeightBlock, c.c / group, c.kernel, c.kernel, ops::kConvWeightBlock}))
      << g->ToText();
  testing::ExpectSameOutputs(*original, *g, 0);
}

TEST(BlockedConvWeightsTest, BlocksConvsWithOutputChannelsInTheLanes) {
  ExpectRewritten({});                                                       // 3x3 s2 onto 7x7
  ExpectRewritten({.n = 2, .k = 48, .h = 13, .w = 13, .attrs = {}});         // unpadded onto 11x11
  ExpectRewritten({.c = 8, .k = 32, .attrs = {{"pads", std::vector<int64_t>{2, 2, 2, 2}},
                                              {"dilations", std::vector<int64_t>{2, 2}},
                                              {"group", int64_t{2}}}});      // 2 groups of 16
  ExpectRewritten({.h = 9, .w = 9, .attrs = {{"auto_pad", std::string("SAME_UPPER")}}, .bias = false});
  ExpectRewritten({.h = 6, .w = 6});                                         // 3x3 outputs
  ExpectRewritten({.h = 2, .w = 34, .attrs = {}, .kernel = 2});             // one row of 33 (CRNN)
}

TEST(BlockedConvWeightsTest, LeavesTheOthers) {
  const std::vector<Case> stay = {
      {.attrs = {}, .kernel = 1},                                      // 1x1: the pointwise kernels
      {.k = 24},                                                       // not whole blocks of 16
      {.c = 16, .k = 32, .attrs = {{"group", int64_t{4}}}},            // 8 output channels per group
      {.h = 32, .w = 32, .attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}},  // 32 columns fill the lanes
      {.c = 3},                                                        // a stem: 27 multiply-adds per output
      {.constant_weights = false},
  };
  for (const Case& c : stay) {
    auto g = Build(c);
    EXPECT_FALSE(Rewrite(*g)) << g->ToText();
  }
}

// With `pointwise`: 1x1 unit-stride unpadded convs of one group whose
// output channels are whole blocks of 4 (else of 6, 5 or 3), chunked by input channel
// (PointwiseWeightChunk: every channel up to 256, else a divisor up to 128),
// with the interpreter's numbers unchanged; the others stay.
TEST(BlockedConvWeightsTest, BlocksPointwiseConvsInChunksOfInputChannels) {
  struct Blocked {
    Case c;
    std::vector<int64_t> wb;
  };
  for (const Blocked& b : std::vector<Blocked>{
           {{.c = 24, .k = 32, .attrs = {}, .kernel = 1}, {1, 8, 24, 1, 1, 4}},
           {{.c = 728, .k = 8, .h = 5, .w = 5, .attrs = {}, .kernel = 1}, {7, 2, 104, 1, 1, 4}},
           {{.c = 300, .k = 12, .h = 3, .w = 3, .attrs = {}, .kernel = 1, .bias = false}, {3, 3, 100, 1, 1, 4}},
           {{.c = 24, .k = 30, .attrs = {}, .kernel = 1}, {1, 5, 24, 1, 1, 6}},
           {{.c = 16, .k = 25, .attrs = {}, .kernel = 1}, {1, 5, 16, 1, 1, 5}},
           {{.c = 16, .k = 21, .attrs = {}, .kernel = 1}, {1, 7, 16, 1, 1, 3}}}) {
    SCOPED_TRACE(absl::StrCat("c=", b.c.c, " k=", b.c.k));
    auto g = Build(b.c);
    auto original = g->Clone();
    ASSERT_TRUE(Rewrite(*g, true)) << g->ToText();
    EXPECT_EQ(testing::OpSequence(*g), "BlockedConv,Relu");
    EXPECT_EQ(g->nodes().front()->input(1)->type().StaticDims(), b.wb);
    testing::ExpectSameOutputs(*original, *g, 0);
  }
  EXPECT_FALSE(Rewrite(*Build({.attrs = {}, .kernel = 1})));  // not asked
  const std::vector<Case> stay = {
      {.k = 14, .attrs = {}, .kernel = 1},                                       // not whole blocks of 4, 6, 5 or 3
      {.c = 16, .k = 32, .attrs = {{"group", int64_t{2}}}, .kernel = 1},         // two groups
      {.attrs = {{"strides", std::vector<int64_t>{2, 2}}}, .kernel = 1},        // strided
      {.attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, .kernel = 1},     // padded
      {.attrs = {}, .kernel = 1, .constant_weights = false},
  };
  for (const Case& c : stay) {
    auto g = Build(c);
    EXPECT_FALSE(Rewrite(*g, true)) << g->ToText();
  }
}

// The blocking's inverse gives the weights back exactly.
TEST(BlockedConvWeightsTest, UnblockInvertsBlock) {
  Tensor w(DType::kFloat32, {32, 3, 2, 5});
  for (int64_t i = 0; i < w.num_elements(); ++i) w.data<float>()[i] = static_cast<float>(i);
  Tensor wb = ops::BlockConvWeights(w, 16);
  EXPECT_EQ(wb.dims(), (std::vector<int64_t>{2, 3, 2, 5, 16}));
  EXPECT_EQ(wb.data<float>()[1], 30.0f);  // output channel 1, first tap: 1 * 30
  EXPECT_EQ(ops::UnblockConvWeights(wb, 4).bytes(), w.bytes());
  Tensor pw(DType::kFloat32, {8, 6, 1, 1});
  for (int64_t i = 0; i < pw.num_elements(); ++i) pw.data<float>()[i] = static_cast<float>(i);
  Tensor chunked = ops::BlockPointwiseWeights(pw, 4, 3);
  EXPECT_EQ(chunked.dims(), (std::vector<int64_t>{2, 2, 3, 1, 1, 4}));
  EXPECT_EQ(chunked.data<float>()[1], 6.0f);                    // output channel 1, input channel 0
  EXPECT_EQ(chunked.data<float>()[12 * 2], 3.0f);               // chunk 1 starts at input channel 3
  EXPECT_EQ(ops::UnblockedWeightDims(chunked.dims(), 4), (std::vector<int64_t>{8, 6, 1, 1}));
  EXPECT_EQ(ops::UnblockConvWeights(chunked, 4).bytes(), pw.bytes());
}

// Through the whole pipeline: one conv group (the Relu rides on it) that has
// a lowering; a GPU target keeps the Conv.
TEST(BlockedConvWeightsTest, CompilesToOneConvGroupForCpusOnly) {
  auto prepared = PrepareModel(Build({}));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  ASSERT_EQ(prepared->partition.groups.size(), 1u) << prepared->graph->ToText();
  EXPECT_EQ(prepared->partition.groups[0].kind, "conv");
  EXPECT_EQ(testing::OpSequence(*prepared->workloads[0].graph), "BlockedConv,Relu");
  EXPECT_TRUE(CheckCompilable(*prepared, CpuTarget::Host()).ok());
  absl::StatusOr<Target> gpu = Target::Named("cuda:sm_90");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto on_gpu = PrepareModel(Build({}), PrepareOptionsFor(*gpu));
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  EXPECT_EQ(testing::OpSequence(*on_gpu->graph), "Conv,Relu");
}

}  // namespace
}  // namespace kiln
