// Constant folding: textual IR before/after and unchanged numbers.
#include "compiler_core/passes/constant_folding.h"

#include <gtest/gtest.h>

#include "compiler_core/passes/dead_code_elimination.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using testing::F32;
using testing::GraphBuilder;

// InferShapes folds tiny subgraphs itself: these graphs get their types by
// hand so that the pass has something to do.
TEST(ConstantFoldingTest, FoldsConstantChainsAndShapeSubgraphs) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 3});
  Value* w = b.Const("w", {3}, {1, 2, 3});
  Value* two = b.Scalar("two", 2);
  Value* shape = b.Ints("shape", {3, 2});
  Value* w2 = b.Op("Add", {w, w}, {}, "w2");
  Value* w4 = b.Op("Mul", {w2, two}, {}, "w4");
  Value* s = b.Op("Add", {x, w4}, {}, "s");
  Value* y = b.Op("Reshape", {s, shape}, {}, "y");
  b.Output(y);
  w2->set_type(F32({3}));
  w4->set_type(F32({3}));
  s->set_type(F32({2, 3}));
  y->set_type(F32({3, 2}));
  std::unique_ptr<Graph> g = b.Release();
  auto original = g->Clone();
  ConstantFolding cf;
  auto changed = cf.Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(g->ToText(),
            "graph main(%x: f32[2,3]) -> (%y) {\n"
            "  %shape: i64[2] = const i64[2]{3,2}\n"
            "  %w4: f32[3] = const f32[3]{4,8,12}\n"
            "  %s: f32[2,3] = Add(%x, %w4) {name=\"Add_s\"}\n"
            "  %y: f32[3,2] = Reshape(%s, %shape) {name=\"Reshape_y\"}\n"
            "}\n");
  EXPECT_FALSE(*cf.Run(*g));
  testing::ExpectSameOutputs(*original, *g, 0);
}

TEST(ConstantFoldingTest, FoldedGraphOutputKeepsItsName) {
  Graph g;
  Value* x = *g.AddInput("x", F32({2}));
  Value* c = *g.AddConstant("c", Tensor::FromVector<float>(DType::kFloat32, {2}, {1, -2}));
  Value* y = *g.AddValue("y", F32({2}));
  Value* z = *g.AddValue("z", F32({2}));
  (void)*g.AddNode("Neg", "neg", {c}, {y});
  (void)*g.AddNode("Add", "add", {x, y}, {z});
  g.AddOutput(y);
  g.AddOutput(z);
  auto original = g.Clone();
  ASSERT_TRUE(*ConstantFolding().Run(g));
  EXPECT_EQ(g.ToText(),
            "graph main(%x: f32[2]) -> (%y, %z) {\n"
            "  %y: f32[2] = const f32[2]{-1,2}\n"
            "  %z: f32[2] = Add(%x, %y) {name=\"add\"}\n"
            "}\n");
  EXPECT_TRUE(VerifyGraph(g).ok());
  testing::ExpectSameOutputs(*original, g, 0);
}

TEST(ConstantFoldingTest, LeavesLargeResultsAndNonConstantInputs) {
  Graph g;
  Value* x = *g.AddInput("x", F32({4, 8}));
  Value* c = *g.AddConstant("c", Tensor::FromVector<float>(DType::kFloat32, {8}, {1, 2, 3, 4, 5, 6, 7, 8}));
  Value* shape = *g.AddConstant("shape", Tensor::FromVector<int64_t>(DType::kInt64, {2}, {4, 8}));
  Value* big = *g.AddValue("big", F32({4, 8}));
  Value* y = *g.AddValue("y", F32({4, 8}));
  (void)*g.AddNode("Expand", "expand", {c, shape}, {big});
  (void)*g.AddNode("Add", "add", {x, big}, {y});
  g.AddOutput(y);
  const std::string before = g.ToText();
  ConstantFolding small(/*max_output_elements=*/16);  // 32 elements from 10: it would grow
  EXPECT_FALSE(*small.Run(g));
  EXPECT_EQ(g.ToText(), before);
  EXPECT_TRUE(*ConstantFolding().Run(g));
  EXPECT_EQ(testing::OpSequence(g), "Add");
}

// Past the limit a node still folds when its result is no larger than its
// constant inputs: weights reshaped, transposed or combined.
TEST(ConstantFoldingTest, FoldsLargeResultsThatDoNotGrowTheWeights) {
  Graph g;
  Value* x = *g.AddInput("x", F32({8}));
  Value* c = *g.AddConstant("c", Tensor::FromVector<float>(DType::kFloat32, {8}, {1, 2, 3, 4, 5, 6, 7, 8}));
  Value* e = *g.AddValue("e", F32({8}));
  Value* y = *g.AddValue("y", F32({8}));
  (void)*g.AddNode("Exp", "exp", {c}, {e});
  (void)*g.AddNode("Add", "add", {x, e}, {y});
  g.AddOutput(y);
  ConstantFolding small(/*max_output_elements=*/4);
  EXPECT_TRUE(*small.Run(g));
  EXPECT_EQ(testing::OpSequence(g), "Add");
}

}  // namespace
}  // namespace kiln
