// BatchNorm folding: Conv/Gemm/MatMul followed by BatchNormalization or a
// per-channel scale and shift; textual IR and unchanged numbers.
#include "compiler_core/passes/batchnorm_folding.h"

#include <gtest/gtest.h>

#include "compiler_core/passes/dead_code_elimination.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using testing::GraphBuilder;

PassPipeline FoldThenClean() {
  PassPipeline p("fold");
  p.Add(std::make_unique<BatchNormFolding>()).Add(std::make_unique<DeadCodeElimination>());
  return p;
}

Value* BatchNorm(GraphBuilder& b, Value* x, int64_t c, const std::string& out = "") {
  return b.Op("BatchNormalization",
              {x, b.Random("gamma", {c}, 0.5f, 2), b.Random("beta", {c}), b.Random("mean", {c}),
               b.Random("var", {c}, 0.1f, 2)},
              {{"epsilon", 1e-3f}}, out);
}

TEST(BatchNormFoldingTest, FoldsConvBatchNormReluChain) {
  GraphBuilder b;
  Value* x = b.Input("x", {1, 4, 5, 5});
  Value* w = b.Random("w", {6, 2, 3, 3});  // group 2: [M, C/group, kh, kw]
  Value* bias = b.Random("b", {6});
  Value* c = b.Op("Conv", {x, w, bias}, {{"group", int64_t{2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "c");
  Value* bn = BatchNorm(b, c, 6, "bn");
  Value* y = b.Op("Relu", {bn}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p = FoldThenClean();
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(g->ToText(),
            "graph main(%x: f32[1,4,5,5]) -> (%y) {\n"
            "  %w_folded: f32[6,2,3,3] = const f32[6,2,3,3]\n"
            "  %b_folded: f32[6] = const f32[6]\n"
            "  %bn: f32[1,6,5,5] = Conv(%x, %w_folded, %b_folded) {name=\"Conv_c\", group=2, pads=[1,1,1,1]}\n"
            "  %y: f32[1,6,5,5] = Relu(%bn) {name=\"Relu_y\"}\n"
            "}\n");
  testing::ExpectSameOutputs(*original, *g, 1e-4);
}

TEST(BatchNormFoldingTest, FoldsBatchNormThenPerChannelScaleAndShiftIntoBiaslessConv) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 3, 4, 4});
  Value* c = b.Op("Conv", {x, b.Random("w", {5, 3, 1, 1})});
  Value* bn = BatchNorm(b, c, 5);
  Value* s = b.Op("Mul", {b.Random("scale", {5, 1, 1}), bn});
  Value* y = b.Op("Add", {s, b.Random("shift", {1, 5, 1, 1})}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p = FoldThenClean();
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(testing::OpSequence(*g), "Conv") << g->ToText();
  EXPECT_EQ(g->outputs()[0]->name(), "y");
  testing::ExpectSameOutputs(*original, *g, 1e-4);
}

TEST(BatchNormFoldingTest, KeepsConvWhoseOutputHasAnotherReader) {
  GraphBuilder b;
  Value* x = b.Input("x", {1, 2, 3, 3});
  Value* c = b.Op("Conv", {x, b.Random("w", {2, 2, 1, 1})}, {}, "c");
  Value* bn = BatchNorm(b, c, 2, "bn");
  Value* y = b.Op("Add", {bn, c}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  EXPECT_FALSE(*BatchNormFolding().Run(*g));
  EXPECT_EQ(testing::OpSequence(*g), "Conv,BatchNormalization,Add");
}

TEST(BatchNormFoldingTest, KeepsScaleThatVariesAlongAnotherAxis) {
  GraphBuilder b;
  Value* x = b.Input("x", {1, 2, 3, 3});
  Value* c = b.Op("Conv", {x, b.Random("w", {2, 2, 1, 1})});
  Value* y = b.Op("Mul", {c, b.Random("s", {3, 1})}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  EXPECT_FALSE(*BatchNormFolding().Run(*g));
}

TEST(BatchNormFoldingTest, FoldsGemmBatchNorm) {
  GraphBuilder b;
  Value* x = b.Input("x", {3, 4});
  Value* gm = b.Op("Gemm", {x, b.Random("w", {5, 4}), b.Random("c", {5})},
                   {{"transB", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}});
  Value* y = BatchNorm(b, gm, 5, "y");
  b.Output(y);
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p = FoldThenClean();
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(testing::OpSequence(*g), "Gemm") << g->ToText();
  testing::ExpectSameOutputs(*original, *g, 1e-4);
}

TEST(BatchNormFoldingTest, FoldsMatMulAddBatchNormAndMatMulScale) {
  GraphBuilder b;
  Value* x = b.Input("x", {3, 4});
  Value* mm = b.Op("MatMul", {x, b.Random("w", {4, 5})});
  Value* a = b.Op("Add", {mm, b.Random("bias", {5})});
  Value* bn = BatchNorm(b, a, 5);
  Value* mm2 = b.Op("MatMul", {bn, b.Random("w2", {5, 2})});
  Value* y = b.Op("Mul", {mm2, b.Random("s", {2})}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p = FoldThenClean();
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(testing::OpSequence(*g), "MatMul,Add,MatMul") << g->ToText();
  testing::ExpectSameOutputs(*original, *g, 1e-4);
}

}  // namespace
}  // namespace kiln
