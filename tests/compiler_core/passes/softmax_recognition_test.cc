// Softmax recognition: with and without the max subtraction, and an extra
// reader that blocks the rewrite.
#include "compiler_core/passes/softmax_recognition.h"

#include <gtest/gtest.h>

#include "compiler_core/passes/dead_code_elimination.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using testing::GraphBuilder;

TEST(SoftmaxRecognitionTest, RecognizesStableSoftmax) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 5, 3});
  Value* m = b.Op("ReduceMax", {x}, {{"axes", std::vector<int64_t>{1}}});
  Value* e = b.Op("Exp", {b.Op("Sub", {x, m})});
  Value* s = b.Op("ReduceSum", {e, b.Ints("axes", {1})});
  Value* y = b.Op("Div", {e, s}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p("softmax");
  p.Add(std::make_unique<SoftmaxRecognition>()).Add(std::make_unique<DeadCodeElimination>());
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(g->ToText(),
            "graph main(%x: f32[2,5,3]) -> (%y) {\n"
            "  %y: f32[2,5,3] = Softmax(%x) {name=\"Div_y\", axis=1}\n"
            "}\n");
  testing::ExpectSameOutputs(*original, *g, 1e-5);
}

TEST(SoftmaxRecognitionTest, RecognizesSoftmaxWithoutMaxSubtraction) {
  GraphBuilder b;
  Value* x = b.Input("x", {4, 6});
  Value* e = b.Op("Exp", {x});
  Value* s = b.Op("ReduceSum", {e, b.Ints("axes", {-1})});
  Value* y = b.Op("Div", {e, s}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto original = g->Clone();
  EXPECT_TRUE(*SoftmaxRecognition().Run(*g));
  EXPECT_EQ(testing::OpSequence(*g), "Softmax");
  testing::ExpectSameOutputs(*original, *g, 1e-5);
}

TEST(SoftmaxRecognitionTest, KeepsPatternWhoseExpHasAnotherReader) {
  GraphBuilder b;
  Value* x = b.Input("x", {4, 6});
  Value* e = b.Op("Exp", {x});
  Value* s = b.Op("ReduceSum", {e, b.Ints("axes", {-1})});
  Value* y = b.Op("Div", {e, s}, {}, "y");
  Value* z = b.Op("Neg", {e}, {}, "z");
  b.Output(y);
  b.Output(z);
  auto g = b.Finish();
  EXPECT_FALSE(*SoftmaxRecognition().Run(*g));
}

TEST(SoftmaxRecognitionTest, KeepsSumOverADifferentAxisThanTheMax) {
  GraphBuilder b;
  Value* x = b.Input("x", {4, 6});
  Value* m = b.Op("ReduceMax", {x}, {{"axes", std::vector<int64_t>{0}}});
  Value* e = b.Op("Exp", {b.Op("Sub", {x, m})});
  Value* s = b.Op("ReduceSum", {e, b.Ints("axes", {1})});
  Value* y = b.Op("Div", {e, s}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto original = g->Clone();
  // Exp(x - max0) / sum1 is still softmax over axis 1 of (x - max0): only
  // the Exp/ReduceSum/Div part is rewritten.
  EXPECT_TRUE(*SoftmaxRecognition().Run(*g));
  EXPECT_EQ(testing::OpSequence(*g), "ReduceMax,Sub,Softmax");
  testing::ExpectSameOutputs(*original, *g, 1e-5);
}

}  // namespace
}  // namespace kiln
