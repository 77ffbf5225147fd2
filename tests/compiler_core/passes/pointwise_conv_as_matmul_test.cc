// Pointwise convolution as a transposed MatMul: which Convs are rewritten
// (1x1, stride 1, unpadded, ungrouped, small maps, enough output channels),
// with the interpreter's numbers unchanged, and how the result fuses.
#include "compiler_core/passes/pointwise_conv_as_matmul.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "compiler_core/driver/compile_driver.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

struct Case {
  std::vector<int64_t> x = {1, 24, 4, 4};
  int64_t k = 40;
  std::map<std::string, AttrValue> attrs = {};
  bool bias = true, relu = true, constant_weights = true;
  int64_t kernel = 1;
};

std::unique_ptr<Graph> Build(const Case& c) {
  return testing::ConvGraph({.x = c.x, .k = c.k, .kernel = c.kernel, .attrs = c.attrs, .bias = c.bias, .relu = c.relu,
                             .constant_weights = c.constant_weights});
}

bool Rewrite(Graph& g) {
  PassPipeline p("pointwise");
  p.Add(std::make_unique<PointwiseConvAsMatMul>());
  return testing::RunPasses(g, p);
}

TEST(PointwiseConvAsMatMulTest, SmallMapsBecomeATransposedMatMul) {
  for (const Case& c : {Case{}, Case{.x = {2, 16, 3, 3}, .k = 33, .bias = false},
                        Case{.x = {1, 96, 4, 4}, .k = 16, .attrs = {{"auto_pad", std::string("SAME_UPPER")}}},
                        Case{.x = {1, 20, 13}, .k = 24, .relu = false}, Case{.x = {3, 64, 1, 1}, .k = 16}}) {
    SCOPED_TRACE(absl::StrCat("c=", c.x[1], " k=", c.k, " rank ", c.x.size()));
    auto g = Build(c);
    auto original = g->Clone();
    ASSERT_TRUE(Rewrite(*g)) << g->ToText();
    std::string ops = testing::OpSequence(*g);
    const bool fc = c.x.back() == 1;  // a 1x1 map: no transposes
    const std::string product = fc || c.x[0] == 1 ? "Reshape,Gemm,"
                                                  : absl::StrCat("Reshape,Transpose,MatMul,", c.bias ? "Add," : "");
    EXPECT_EQ(ops, absl::StrCat(product, fc ? "" : "Transpose,", "Reshape", c.relu ? ",Relu" : ""));
    testing::ExpectSameOutputs(*original, *g, 1e-5);
  }
}

TEST(PointwiseConvAsMatMulTest, LeavesOtherConvs) {
  for (const Case& c : {Case{.x = {1, 24, 5, 5}},  // 25 pixels: the pointwise kernel's lanes are full enough
                        Case{.k = 8},              // fewer output channels than a vector
                        Case{.attrs = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, .kernel = 3},
                        Case{.attrs = {{"strides", std::vector<int64_t>{2, 2}}}},
                        Case{.attrs = {{"pads", std::vector<int64_t>{1, 0, 0, 0}}}},
                        Case{.k = 48, .attrs = {{"group", int64_t{2}}}}, Case{.constant_weights = false}}) {
    auto g = Build(c);
    EXPECT_FALSE(Rewrite(*g)) << g->ToText();
  }
}

// Through the whole pipeline: a copy of X's C*P floats (the Reshape), the
// Gemm reading it transposed with the bias, and the transpose back carrying
// the Relu; every group has a lowering.
TEST(PointwiseConvAsMatMulTest, CompilesToTransposesAroundAMatMul) {
  auto prepared = PrepareModel(Build({}));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  std::vector<std::string> kinds;
  for (const auto& grp : prepared->partition.groups) kinds.push_back(grp.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"data_movement", "matmul", "data_movement"}))
      << prepared->graph->ToText();
  EXPECT_EQ(prepared->partition.groups[1].nodes.size(), 1u);  // Gemm with its bias
  EXPECT_EQ(prepared->partition.groups[2].nodes.size(), 3u);  // Transpose, Reshape, Relu
  EXPECT_TRUE(CheckCompilable(*prepared, CpuTarget::Host()).ok());
}

}  // namespace
}  // namespace kiln
