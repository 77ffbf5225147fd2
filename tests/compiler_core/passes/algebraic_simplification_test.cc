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

// One row of A (a classifier head at batch 1) keeps W[N,K] as it is: the
// dot-form GEMV streams its rows (lower_matmul.h, gv=2).
TEST(AlgebraicSimplificationTest, GemmOfOneRowKeepsItsTransposedB) {
  GraphBuilder b;
  Value* x = b.Input("x", {1, 3});
  Value* w = b.Const("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  b.Output(b.Op("Gemm", {x, w}, {{"transB", int64_t{1}}}, "y"));
  auto g = b.Finish();
  const std::string before = g->ToText();
  PassPipeline p = SimplifyThenClean();
  testing::RunPasses(*g, p);
  EXPECT_EQ(g->ToText(), before);
}

// DeepLab's ASPP: a 3x3 conv at dilation 6 (pads 6) over a 5x5 map reads
// only padding at every tap but the centre: it becomes a 1x1 conv without
// pads. At dilation 2 every tap is live somewhere and the conv stays; on a
// 5x9 map at dilation 6 only the rows are cut.
TEST(AlgebraicSimplificationTest, ConvTapsThatReadOnlyPaddingAreCut) {
  auto conv = [](int64_t w, int64_t dilation) {
    GraphBuilder b;
    Value* x = b.Input("x", {1, 2, 5, w});
    std::vector<float> wv(3 * 2 * 3 * 3);
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    Value* wt = b.Const("w", {3, 2, 3, 3}, wv);
    Value* y = b.Op("Conv", {x, wt},
                    {{"kernel_shape", std::vector<int64_t>{3, 3}},
                     {"dilations", std::vector<int64_t>{dilation, dilation}},
                     {"pads", std::vector<int64_t>{dilation, dilation, dilation, dilation}}},
                    "y");
    b.Output(y);
    return b.Finish();
  };
  auto g = conv(5, 6);
  auto original = g->Clone();
  PassPipeline p = SimplifyThenClean();
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(g->ToText(),
            "graph main(%x: f32[1,2,5,5]) -> (%y) {\n"
            "  %w_live_taps: f32[3,2,1,1] = const f32[3,2,1,1]\n"
            "  %y: f32[1,3,5,5] = Conv(%x, %w_live_taps) {name=\"Conv_y\", dilations=[6,6], kernel_shape=[1,1], "
            "pads=[0,0,0,0]}\n"
            "}\n");
  const Tensor& centre = g->FindValue("w_live_taps")->constant();
  const Tensor& full = original->FindValue("w")->constant();
  for (int64_t mc = 0; mc < 6; ++mc) EXPECT_EQ(centre.data<float>()[mc], full.data<float>()[mc * 9 + 4]) << mc;
  testing::ExpectSameOutputs(*original, *g, 1e-6);

  auto dense = conv(5, 2);
  PassPipeline p2 = SimplifyThenClean();
  EXPECT_FALSE(testing::RunPasses(*dense, p2));

  auto rows_only = conv(9, 6);  // columns: tap 0 reads column o - 6 >= 0 for o >= 6
  auto rows_before = rows_only->Clone();
  PassPipeline p3 = SimplifyThenClean();
  EXPECT_TRUE(testing::RunPasses(*rows_only, p3));
  EXPECT_EQ(rows_only->FindValue("w_live_taps")->constant().dims(), (std::vector<int64_t>{3, 2, 1, 3}));
  testing::ExpectSameOutputs(*rows_before, *rows_only, 1e-6);
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
