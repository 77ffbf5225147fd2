// Algebraic simplification: textual IR before/after and unchanged numbers.
#include "compiler_core/passes/algebraic_simplification.h"

#include <gtest/gtest.h>

#include "compiler_core/passes/dead_code_elimination.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using testing::GraphBuilder;

PassPipeline SimplifyThenClean() {
  PassPipeline p("simplify");
  p.Add(std::make_unique<AlgebraicSimplification>()).Add(std::make_unique<DeadCodeElimination>());
  return p;
}

TEST(AlgebraicSimplificationTest, RemovesNeutralOperationsAndIdentities) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 3});
  Value* one = b.Scalar("one", 1);
  Value* zero = b.Const("zero", {3}, {0, 0, 0});
  Value* v = b.Op("Identity", {x});
  v = b.Op("Mul", {v, one});
  v = b.Op("Mul", {one, v});
  v = b.Op("Add", {zero, v});
  v = b.Op("Add", {v, zero});
  v = b.Op("Sub", {v, zero});
  v = b.Op("Div", {v, one});
  v = b.Op("Dropout", {v}, {{"ratio", 0.3f}});
  v = b.Op("Cast", {v}, {{"to", int64_t{1}}});
  Value* y = b.Op("Relu", {v}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p = SimplifyThenClean();
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(g->ToText(),
            "graph main(%x: f32[2,3]) -> (%y) {\n"
            "  %y: f32[2,3] = Relu(%x) {name=\"Relu_y\"}\n"
            "}\n");
  testing::ExpectSameOutputs(*original, *g, 0);
  EXPECT_FALSE(*AlgebraicSimplification().Run(*g));
}

TEST(AlgebraicSimplificationTest, KeepsNeutralOperationsThatBroadcast) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 3});
  Value* ones = b.Const("ones", {2, 1, 1}, {1, 1});
  Value* zero = b.Const("zero", {1, 2, 3}, {0, 0, 0, 0, 0, 0});
  Value* y = b.Op("Mul", {x, ones}, {}, "y");
  Value* z = b.Op("Add", {zero, x}, {}, "z");
  b.Output(y);
  b.Output(z);
  auto g = b.Finish();
  EXPECT_FALSE(*AlgebraicSimplification().Run(*g));
  EXPECT_EQ(testing::OpSequence(*g), "Mul,Add");
}

TEST(AlgebraicSimplificationTest, IdentityOnGraphOutputKeepsTheOutputName) {
  GraphBuilder b;
  Value* x = b.Input("x", {4});
  Value* r = b.Op("Relu", {x}, {}, "r");
  Value* y = b.Op("Identity", {r}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto original = g->Clone();
  EXPECT_TRUE(*AlgebraicSimplification().Run(*g));
  EXPECT_EQ(g->ToText(),
            "graph main(%x: f32[4]) -> (%y) {\n"
            "  %y: f32[4] = Relu(%x) {name=\"Relu_r\"}\n"
            "}\n");
  testing::ExpectSameOutputs(*original, *g, 0);
}

TEST(AlgebraicSimplificationTest, DivisionByConstantBecomesMultiplication) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 3});
  Value* c = b.Const("c", {3}, {2, 4, -8});
  Value* y = b.Op("Div", {x, c}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p = SimplifyThenClean();
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(g->ToText(),
            "graph main(%x: f32[2,3]) -> (%y) {\n"
            "  %c_reciprocal: f32[3] = const f32[3]{0.5,0.25,-0.125}\n"
            "  %y: f32[2,3] = Mul(%x, %c_reciprocal) {name=\"Div_y\"}\n"
            "}\n");
  testing::ExpectSameOutputs(*original, *g, 0);  // powers of two: exact
}

// nn.Linear's Gemm(x, W[N,K], transB=1): W is transposed once at compile time.
TEST(AlgebraicSimplificationTest, GemmReadsAConstantBTransposedOnce) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 3});
  Value* w = b.Const("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  Value* bias = b.Const("bias", {2}, {0.5, -1});
  Value* y = b.Op("Gemm", {x, w, bias}, {{"transB", int64_t{1}}, {"alpha", 0.5f}}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p = SimplifyThenClean();
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(g->ToText(),
            "graph main(%x: f32[2,3]) -> (%y) {\n"
            "  %bias: f32[2] = const f32[2]{0.5,-1}\n"
            "  %w_transposed: f32[3,2] = const f32[3,2]\n"
            "  %y: f32[2,2] = Gemm(%x, %w_transposed, %bias) {name=\"Gemm_y\", alpha=0.5}\n"
            "}\n");
  const Tensor& wt = g->FindValue("w_transposed")->constant();
  EXPECT_EQ(std::vector<float>(wt.data<float>(), wt.data<float>() + 6), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  testing::ExpectSameOutputs(*original, *g, 0);
}

TEST(AlgebraicSimplificationTest, MergesTransposePairs) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 3, 4});
  Value* t1 = b.Op("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 2, 0}}});
  Value* t2 = b.Op("Transpose", {t1}, {{"perm", std::vector<int64_t>{2, 0, 1}}});  // cancels t1
  Value* t3 = b.Op("Transpose", {t2}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  Value* y = b.Op("Transpose", {t3}, {{"perm", std::vector<int64_t>{1, 0, 2}}}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p = SimplifyThenClean();
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(g->ToText(),
            "graph main(%x: f32[2,3,4]) -> (%y) {\n"
            "  %y: f32[4,2,3] = Transpose(%x) {name=\"Transpose_y\", perm=[2,0,1]}\n"
            "}\n");
  testing::ExpectSameOutputs(*original, *g, 0);
}

TEST(AlgebraicSimplificationTest, MergesReshapeChainsAndCancelsSqueezePairs) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 1, 6});
  Value* s1 = b.Op("Squeeze", {x, b.Ints("ax1", {1})});
  Value* u1 = b.Op("Unsqueeze", {s1, b.Ints("ax2", {1})});  // back to x
  Value* r1 = b.Op("Reshape", {u1, b.Ints("shape1", {3, 4})});
  Value* y = b.Op("Reshape", {r1, b.Ints("shape2", {4, 3})}, {}, "y");
  Value* same = b.Op("Reshape", {y, b.Ints("shape3", {4, 3})});
  Value* z = b.Op("Relu", {same}, {}, "z");
  b.Output(z);
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p = SimplifyThenClean();
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(testing::OpSequence(*g), "Reshape,Relu") << g->ToText();
  EXPECT_EQ(g->nodes()[0]->input(0)->name(), "x");
  testing::ExpectSameOutputs(*original, *g, 0);
}

}  // namespace
}  // namespace kiln
