// A conv whose taps mostly read padding as a sum of pointwise convs over the
// taps' live regions: which Convs are rewritten (the interpreter's numbers
// unchanged, one 1x1 conv per live tap), which stay, and the ASPP branch
// through the whole pipeline.
#include "compiler_core/passes/live_tap_regions.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "compiler_core/passes/optimize.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;

bool Rewrite(Graph& g) {
  PassPipeline p("live_tap_regions");
  p.Add(std::make_unique<LiveTapRegions>());
  return testing::RunPasses(g, p);
}

int Count(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op_type() == op;
  return n;
}

TEST(LiveTapRegionsTest, SumsOnePointwiseConvPerLiveTap) {
  struct Case {
    Ints x;
    int64_t kernel;
    std::map<std::string, AttrValue> attrs;
    bool bias;
    int convs;
  };
  for (const Case& c : {
           // DeepLab's ASPP at rate 12 on 16x16: 9 live taps, the centre one whole.
           Case{{1, 32, 16, 16}, 3, {{"dilations", Ints{12, 12}}, {"pads", Ints{12, 12, 12, 12}}}, true, 9},
           // No bias; rows and columns of different sizes and rates.
           Case{{1, 40, 6, 9}, 3, {{"dilations", Ints{4, 6}}, {"pads", Ints{4, 6, 4, 6}}}, false, 9},
           // A 5x5 kernel on a 3x3 map, asymmetric pads: 5 x 4 live taps.
           Case{{1, 32, 3, 3}, 5, {{"pads", Ints{2, 1, 2, 3}}}, true, 20},
           // An output larger than the input: no tap covers every output,
           // so the bias is added at the end.
           Case{{1, 32, 2, 2}, 3, {{"pads", Ints{2, 2, 2, 2}}}, true, 9},
       }) {
    SCOPED_TRACE(absl::StrCat("x ", c.x[2], "x", c.x[3], " kernel ", c.kernel));
    auto g = testing::ConvGraph({.x = c.x, .k = 8, .kernel = c.kernel, .attrs = c.attrs, .bias = c.bias});
    auto original = g->Clone();
    ASSERT_TRUE(Rewrite(*g)) << g->ToText();
    EXPECT_EQ(Count(*g, "Conv"), c.convs) << g->ToText();
    for (const auto& n : g->nodes()) {
      if (n->op_type() == "Conv") EXPECT_EQ(n->input(1)->constant().dims(), (Ints{8, c.x[1], 1, 1}));
    }
    testing::ExpectSameOutputs(*original, *g, 1e-4);
  }
}

TEST(LiveTapRegionsTest, LeavesConvsWhoseTapsMostlyReadInput) {
  for (const testing::ConvGraphSpec& c : {
           testing::ConvGraphSpec{.x = {1, 32, 14, 14}, .kernel = 3, .attrs = {{"pads", Ints{1, 1, 1, 1}}}},
           testing::ConvGraphSpec{.x = {1, 32, 16, 16}, .kernel = 3,
                                  .attrs = {{"dilations", Ints{2, 2}}, {"pads", Ints{2, 2, 2, 2}}}},
           // Strided, grouped, few channels, weights not constant.
           testing::ConvGraphSpec{.x = {1, 32, 16, 16}, .kernel = 3,
                                  .attrs = {{"dilations", Ints{12, 12}}, {"pads", Ints{12, 12, 12, 12}},
                                            {"strides", Ints{2, 2}}}},
           testing::ConvGraphSpec{.x = {1, 32, 16, 16}, .kernel = 3,
                                  .attrs = {{"dilations", Ints{12, 12}}, {"pads", Ints{12, 12, 12, 12}},
                                            {"group", int64_t{2}}}},
           testing::ConvGraphSpec{.x = {1, 8, 16, 16}, .kernel = 3,
                                  .attrs = {{"dilations", Ints{12, 12}}, {"pads", Ints{12, 12, 12, 12}}}},
           testing::ConvGraphSpec{.x = {1, 32, 16, 16}, .kernel = 3,
                                  .attrs = {{"dilations", Ints{12, 12}}, {"pads", Ints{12, 12, 12, 12}}},
                                  .constant_weights = false},
       }) {
    auto g = testing::ConvGraph(c);
    EXPECT_FALSE(Rewrite(*g)) << g->ToText();
  }
}

// Through the default pipeline and CPU algorithm selection the dilated conv
// leaves no 3x3 conv behind, and the numbers hold.
TEST(LiveTapRegionsTest, AsppBranchThroughThePipeline) {
  auto g = testing::ConvGraph({.x = {1, 64, 16, 16}, .k = 16, .kernel = 3,
                               .attrs = {{"dilations", Ints{12, 12}}, {"pads", Ints{12, 12, 12, 12}}}});
  auto original = g->Clone();
  ASSERT_TRUE(OptimizeGraph(*g, {}, AlgorithmChoice::kCpu).ok());
  for (const auto& n : g->nodes()) {
    if (n->op_type() == "Conv") EXPECT_EQ(n->input(1)->constant().dims()[2], 1) << g->ToText();
  }
  testing::ExpectSameOutputs(*original, *g, 1e-4);
}

}  // namespace
}  // namespace kiln
