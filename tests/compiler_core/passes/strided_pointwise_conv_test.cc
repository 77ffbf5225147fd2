// Strided pointwise convolution: which Convs become a subsample and a
// stride-1 conv (the interpreter's numbers unchanged), which stay, and two
// strided convs of one input sharing one subsample through the pipeline.
#include "compiler_core/passes/strided_pointwise_conv.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "compiler_core/passes/optimize.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;

bool Rewrite(Graph& g) {
  PassPipeline p("strided_pointwise");
  p.Add(std::make_unique<StridedPointwiseConv>());
  return testing::RunPasses(g, p);
}

TEST(StridedPointwiseConvTest, StridedOneByOneConvReadsASubsample) {
  struct Case {
    Ints x;
    std::map<std::string, AttrValue> attrs;
  };
  for (const Case& c : {Case{{1, 8, 14, 14}, {{"strides", Ints{2, 2}}}},      // ResNet-v1 downsample
                        Case{{2, 6, 9, 7}, {{"strides", Ints{2, 3}}, {"group", int64_t{2}}}},  // odd sizes, grouped
                        Case{{1, 4, 11}, {{"strides", Ints{3}}, {"auto_pad", std::string("VALID")}}},  // 1-D
                        Case{{1, 4, 5, 8}, {{"strides", Ints{1, 2}}, {"pads", Ints{0, 0, 0, 0}}}},
                        // A 1x1 kernel's SAME padding is zero at any stride.
                        Case{{1, 4, 13, 13}, {{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}}}) {
    SCOPED_TRACE(absl::StrCat("rank ", c.x.size(), " h ", c.x[2]));
    auto g = testing::ConvGraph({.x = c.x, .k = 12, .attrs = c.attrs});
    auto original = g->Clone();
    ASSERT_TRUE(Rewrite(*g)) << g->ToText();
    EXPECT_EQ(testing::OpSequence(*g), "Slice,Conv,Relu") << g->ToText();
    for (const auto& n : g->nodes()) {
      if (n->op_type() == "Conv") EXPECT_EQ(n->GetInts("strides", {}), Ints(c.x.size() - 2, 1));
    }
    testing::ExpectSameOutputs(*original, *g, 1e-5);
  }
}

TEST(StridedPointwiseConvTest, LeavesOtherConvs) {
  for (const testing::ConvGraphSpec& c :
       {testing::ConvGraphSpec{.x = {1, 8, 14, 14}},  // stride 1
        testing::ConvGraphSpec{.x = {1, 8, 14, 14}, .kernel = 3, .attrs = {{"strides", Ints{2, 2}}}},
        testing::ConvGraphSpec{.x = {1, 8, 14, 14}, .attrs = {{"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 0, 1}}}}}) {
    auto g = testing::ConvGraph(c);
    EXPECT_FALSE(Rewrite(*g)) << g->ToText();
  }
}

// The shortcut and the main branch of a ResNet-v1 downsampling block both
// read the block input at stride 2: after the default pipeline they share
// one subsample. (Were the Add's operands the two convs themselves,
// conv_branch_merging would make them one.)
TEST(StridedPointwiseConvTest, TwoStridedConvsOfOneInputShareTheSubsample) {
  testing::GraphBuilder b;
  Value* x = b.Input("x", {1, 8, 10, 10});
  const std::map<std::string, AttrValue> s2 = {{"strides", Ints{2, 2}}};
  Value* shortcut = b.Op("Conv", {x, b.Random("w1", {16, 8, 1, 1})}, s2, "shortcut");
  Value* main = b.Op("Conv", {x, b.Random("w2", {16, 8, 1, 1})}, s2, "main");
  b.Output(b.Op("Add", {shortcut, b.Op("Relu", {main}, {}, "relu")}, {}, "add"));
  auto g = b.Finish();
  auto original = g->Clone();
  ASSERT_TRUE(OptimizeGraph(*g, {}).ok());
  EXPECT_EQ(testing::OpSequence(*g), "Slice,Conv,Conv,Relu,Add") << g->ToText();
  testing::ExpectSameOutputs(*original, *g, 1e-5);
}

}  // namespace
}  // namespace kiln
