// GELU recognition: torch's erf export, its variants, the tanh form, and a
// pattern with an extra reader that must stay.
#include "compiler_core/passes/gelu_recognition.h"

#include <gtest/gtest.h>

#include "compiler_core/passes/dead_code_elimination.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using testing::GraphBuilder;

PassPipeline Recognize() {
  PassPipeline p("gelu");
  p.Add(std::make_unique<GeluRecognition>()).Add(std::make_unique<DeadCodeElimination>());
  return p;
}

// torch.nn.functional.gelu as exported by torch.onnx (opset 13+ before Gelu):
//   Div(x, 1.4142135) -> Erf -> Add(., 1) -> Mul(x, .) -> Mul(., 0.5)
TEST(GeluRecognitionTest, RecognizesTorchErfExport) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 8});
  Value* d = b.Op("Div", {x, b.Scalar("sqrt2", 1.4142135f)});
  Value* e = b.Op("Erf", {d});
  Value* a = b.Op("Add", {e, b.Scalar("one", 1)});
  Value* m = b.Op("Mul", {x, a});
  Value* y = b.Op("Mul", {m, b.Scalar("half", 0.5f)}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p = Recognize();
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(g->ToText(),
            "graph main(%x: f32[2,8]) -> (%y) {\n"
            "  %y: f32[2,8] = Gelu(%x) {name=\"Mul_y\", approximate=\"none\"}\n"
            "}\n");
  testing::ExpectSameOutputs(*original, *g, 1e-5);
}

// Mul by 1/sqrt(2), operands swapped, the 0.5 applied to x first.
TEST(GeluRecognitionTest, RecognizesReorderedErfForm) {
  GraphBuilder b;
  Value* x = b.Input("x", {3, 4});
  Value* d = b.Op("Mul", {b.Scalar("inv_sqrt2", 0.70710678f), x});
  Value* e = b.Op("Erf", {d});
  Value* a = b.Op("Add", {b.Scalar("one", 1), e});
  Value* h = b.Op("Mul", {x, b.Scalar("half", 0.5f)});
  Value* y = b.Op("Mul", {a, h}, {}, "y");
  Value* z = b.Op("Relu", {y}, {}, "z");
  b.Output(z);
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p = Recognize();
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(testing::OpSequence(*g), "Gelu,Relu") << g->ToText();
  testing::ExpectSameOutputs(*original, *g, 1e-5);
}

TEST(GeluRecognitionTest, RecognizesTanhForm) {
  for (bool use_pow : {true, false}) {
    GraphBuilder b;
    Value* x = b.Input("x", {2, 5});
    Value* cube = use_pow ? b.Op("Pow", {x, b.Scalar("three", 3)}) : b.Op("Mul", {b.Op("Mul", {x, x}), x});
    Value* k = b.Op("Mul", {cube, b.Scalar("k", 0.044715f)});
    Value* inner = b.Op("Add", {x, k});
    Value* s = b.Op("Mul", {b.Scalar("sqrt_2_pi", 0.7978845608f), inner});
    Value* t = b.Op("Tanh", {s});
    Value* a = b.Op("Add", {t, b.Scalar("one", 1)});
    Value* h = b.Op("Mul", {b.Scalar("half", 0.5f), x});
    Value* y = b.Op("Mul", {h, a}, {}, "y");
    b.Output(y);
    auto g = b.Finish();
    auto original = g->Clone();
    PassPipeline p = Recognize();
    EXPECT_TRUE(testing::RunPasses(*g, p));
    EXPECT_EQ(g->ToText(),
              "graph main(%x: f32[2,5]) -> (%y) {\n"
              "  %y: f32[2,5] = Gelu(%x) {name=\"Mul_y\", approximate=\"tanh\"}\n"
              "}\n");
    testing::ExpectSameOutputs(*original, *g, 1e-5);
  }
}

TEST(GeluRecognitionTest, KeepsPatternWhoseIntermediateHasAnotherReader) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 8});
  Value* d = b.Op("Div", {x, b.Scalar("sqrt2", 1.4142135f)});
  Value* e = b.Op("Erf", {d}, {}, "e");
  Value* a = b.Op("Add", {e, b.Scalar("one", 1)});
  Value* m = b.Op("Mul", {x, a});
  Value* y = b.Op("Mul", {m, b.Scalar("half", 0.5f)}, {}, "y");
  b.Output(y);
  b.Output(e);  // erf(x/sqrt2) is read outside the pattern
  auto g = b.Finish();
  EXPECT_FALSE(*GeluRecognition().Run(*g));
}

TEST(GeluRecognitionTest, KeepsWrongConstants) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 8});
  Value* d = b.Op("Div", {x, b.Scalar("two", 2.0f)});
  Value* e = b.Op("Erf", {d});
  Value* a = b.Op("Add", {e, b.Scalar("one", 1)});
  Value* m = b.Op("Mul", {x, a});
  Value* y = b.Op("Mul", {m, b.Scalar("half", 0.5f)}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  EXPECT_FALSE(*GeluRecognition().Run(*g));
}

}  // namespace
}  // namespace kiln
