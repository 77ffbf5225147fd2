// Winograd convolution: which Convs become WinogradInput -> MatMul ->
// WinogradOutput (and which stay direct), with the interpreter's numbers
// unchanged (the direct Conv is the reference), and the rewritten model
// compiling to winograd_input / matmul / winograd_output groups.
#include "compiler_core/passes/winograd_convolution.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/frontend/op_registry.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

struct Case {
  int64_t n = 1, c = 16, k = 40, h = 17, w = 17;
  std::map<std::string, AttrValue> attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  int64_t kernel = 3;
  bool bias = true, relu = true, constant_weights = true;
};

std::unique_ptr<Graph> Build(const Case& c) {
  return testing::ConvGraph({.x = {c.n, c.c, c.h, c.w}, .k = c.k, .kernel = c.kernel, .attrs = c.attrs, .bias = c.bias,
                             .relu = c.relu, .constant_weights = c.constant_weights});
}

// The tile the pass chose, or 0 when the Conv stayed; `lanes` as the pass takes it.
int64_t Rewrite(Graph& g, int64_t lanes = 0) {
  PassPipeline p("winograd");
  p.Add(std::make_unique<WinogradConvolution>(lanes));
  if (!testing::RunPasses(g, p)) return 0;
  for (const auto& n : g.nodes()) {
    EXPECT_NE(n->op_type(), "Conv") << g.ToText();
    if (n->op_type() == "WinogradInput" && n->domain() == kKilnDomain) return n->GetInt("tile", 0);
  }
  ADD_FAILURE() << "changed without a WinogradInput\n" << g.ToText();
  return 0;
}

void ExpectRewritten(const Case& c, int64_t tile, double tol = 1e-4) {
  SCOPED_TRACE(absl::StrCat("c=", c.c, " k=", c.k, " ", c.h, "x", c.w));
  auto g = Build(c);
  auto original = g->Clone();
  EXPECT_EQ(Rewrite(*g), tile);
  std::string ops = testing::OpSequence(*g);
  EXPECT_EQ(ops, c.relu ? "WinogradInput,MatMul,WinogradOutput,Relu" : "WinogradInput,MatMul,WinogradOutput");
  testing::ExpectSameOutputs(*original, *g, tol);
}

TEST(WinogradConvolutionTest, TileFollowsTheOutputSize) {
  ExpectRewritten({}, 4);                          // 17x17: 5x5 = 25 tiles of 4x4, the last ragged
  ExpectRewritten({.c = 32, .k = 48, .h = 7, .w = 7}, 2);  // 7x7: 2x2 tiles of 4 too few, 4x4 of 2
  ExpectRewritten({.n = 2, .h = 6, .w = 6, .bias = false, .relu = false}, 2);  // 2 images of 3x3 tiles of 2
}

TEST(WinogradConvolutionTest, PaddingOfEveryForm) {
  ExpectRewritten({.attrs = {{"pads", std::vector<int64_t>{0, 2, 1, 0}}}}, 4);
  ExpectRewritten({.attrs = {}, .bias = false}, 4);  // no padding: 15x15
  ExpectRewritten({.h = 18, .w = 13, .attrs = {{"auto_pad", std::string("SAME_UPPER")}}}, 4);
  ExpectRewritten({.attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{1, 1}},
                             {"dilations", std::vector<int64_t>{1, 1}}, {"group", int64_t{1}}}},
                  4);
}

// Many channels: F(4x4)'s transforms cost digits; still within 1e-4 of the
// direct Conv relative to the output's scale.
TEST(WinogradConvolutionTest, AccurateOverManyChannels) {
  ExpectRewritten({.c = 128, .k = 48, .h = 14, .w = 14}, 4);
}

// A grouped conv of 16 channels or more a group (ResNeSt's radix-2 3x3
// convs): the transforms over all channels, the MatMul batched over the
// groups, the interpreter's numbers those of the grouped Conv.
TEST(WinogradConvolutionTest, GroupedConvBatchesItsGroups) {
  ExpectRewritten({.c = 32, .k = 96, .attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", int64_t{2}}}}, 4);
  ExpectRewritten({.c = 48, .k = 48, .h = 8, .w = 8, .attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                                               {"group", int64_t{3}}}},
                  2);
  auto prepared = PrepareModel(
      Build({.c = 32, .k = 96, .attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", int64_t{2}}}}));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  std::vector<std::string> kinds;
  for (const auto& grp : prepared->partition.groups) kinds.push_back(grp.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"winograd_input", "matmul", "winograd_output"}))
      << prepared->graph->ToText();
  EXPECT_TRUE(CheckCompilable(*prepared, CpuTarget::Host()).ok());
}

// Few output channels pay when the tiles fit the map exactly.
TEST(WinogradConvolutionTest, FewOutputChannelsInExactTiles) {
  ExpectRewritten({.c = 64, .k = 16, .h = 16, .w = 16}, 4);
  ExpectRewritten({.c = 32, .k = 32, .h = 10, .w = 10}, 2);
}

TEST(WinogradConvolutionTest, LeavesWhatDoesNotPay) {
  const std::vector<Case> stay = {
      {.attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}}}},
      {.attrs = {{"pads", std::vector<int64_t>{2, 2, 2, 2}}, {"dilations", std::vector<int64_t>{2, 2}}}},
      {.attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", int64_t{2}}}},  // 8 channels a group
      {.c = 8},                  // too few input channels
      {.k = 8},                  // too few output channels
      {.h = 4, .w = 4},          // 2x2 tiles of 2: less than a vector of tiles
      {.c = 128, .k = 32, .h = 14, .w = 14},  // few output channels, 16x16 of tiles over 14x14
      {.c = 32, .k = 16, .h = 7, .w = 7},     // the same in tiles of 2
      {.attrs = {{"pads", std::vector<int64_t>{2, 2, 2, 2}}}, .kernel = 5},
      {.constant_weights = false},
  };
  for (const Case& c : stay) {
    auto g = Build(c);
    EXPECT_EQ(Rewrite(*g), 0) << g->ToText();
  }
}

// With the target's 16 lanes known: tiles that fill one vector keep F(2x2)
// out and F(4x4) where U is over 12 MiB, and F(2x2) stays out where U is;
// output channels the direct conv's blocks of 8 do not divide keep Winograd.
TEST(WinogradConvolutionTest, OneVectorOfTilesOrLargeWeightsStayDirectOnWideVectors) {
  struct Want {
    Case c;
    int64_t tile;
  };
  const std::vector<Want> wants = {
      {{.c = 32, .k = 48, .h = 7, .w = 7}, 0},     // F(2x2): 16 tiles, one vector
      {{.c = 32, .k = 48, .h = 12, .w = 12}, 2},   // F(2x2): 36 tiles
      {{.c = 64, .k = 64, .h = 14, .w = 14}, 4},   // F(4x4): 16 tiles, U 0.6 MB
      {{.c = 344, .k = 344, .h = 14, .w = 14}, 0}, // F(4x4): 16 tiles, U 17 MB
      {{.c = 344, .k = 344, .h = 20, .w = 20}, 4}, // F(4x4): 25 tiles
      {{.c = 512, .k = 512, .h = 12, .w = 12}, 0}, // F(2x2): 36 tiles, U 16.8 MB
      {{.c = 32, .k = 36, .h = 7, .w = 7}, 2},     // 36 output channels: blocks of 8 do not divide them
  };
  for (const Want& w : wants) {
    auto g = Build(w.c);
    EXPECT_EQ(Rewrite(*g, 16), w.tile) << w.c.c << " -> " << w.c.k << " on " << w.c.h << "x" << w.c.w;
    auto unknown = Build(w.c);
    EXPECT_NE(Rewrite(*unknown, 0), 0) << "no lanes: the vector rules stay out";
  }
}

// Through the whole pipeline: the groups are the transforms and the GEMM, the
// Relu rides on the output transform, and every group has a lowering.
TEST(WinogradConvolutionTest, CompilesToTransformAndMatMulGroups) {
  auto prepared = PrepareModel(Build({}));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  std::vector<std::string> kinds;
  for (const auto& grp : prepared->partition.groups) kinds.push_back(grp.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"winograd_input", "matmul", "winograd_output"}))
      << prepared->graph->ToText();
  EXPECT_EQ(prepared->partition.groups.back().nodes.size(), 2u);  // WinogradOutput + Relu
  EXPECT_TRUE(CheckCompilable(*prepared, CpuTarget::Host()).ok());
}

}  // namespace
}  // namespace kiln
