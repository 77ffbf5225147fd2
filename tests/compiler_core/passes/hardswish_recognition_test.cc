// HardSwish recognition: the clip forms, the HardSigmoid form, and an extra
// reader that blocks the rewrite.
#include "compiler_core/passes/hardswish_recognition.h"

#include <gtest/gtest.h>

#include "compiler_core/passes/dead_code_elimination.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using testing::GraphBuilder;

TEST(HardSwishRecognitionTest, RecognizesClipForms) {
  for (int form = 0; form < 3; ++form) {
    GraphBuilder b;
    Value* x = b.Input("x", {2, 7});
    Value* a = b.Op("Add", {b.Scalar("three", 3), x});
    Value* c = b.Op("Clip", {a, b.Scalar("lo", 0), b.Scalar("hi", 6)});
    Value* y = nullptr;
    if (form == 0) y = b.Op("Div", {b.Op("Mul", {x, c}), b.Scalar("six", 6)}, {}, "y");
    if (form == 1) y = b.Op("Mul", {b.Scalar("sixth", 1.0f / 6), b.Op("Mul", {c, x})}, {}, "y");
    if (form == 2) y = b.Op("Mul", {x, b.Op("Div", {c, b.Scalar("six", 6)})}, {}, "y");
    b.Output(y);
    auto g = b.Finish();
    auto original = g->Clone();
    PassPipeline p("hardswish");
    p.Add(std::make_unique<HardSwishRecognition>()).Add(std::make_unique<DeadCodeElimination>());
    EXPECT_TRUE(testing::RunPasses(*g, p)) << form;
    EXPECT_EQ(g->ToText(),
              "graph main(%x: f32[2,7]) -> (%y) {\n"
              "  %y: f32[2,7] = HardSwish(%x) {name=\"" + std::string(form == 2 ? "Mul_y" : form == 1 ? "Mul_y" : "Div_y") +
                  "\"}\n"
              "}\n");
    testing::ExpectSameOutputs(*original, *g, 1e-5);
  }
}

TEST(HardSwishRecognitionTest, RecognizesHardSigmoidForm) {
  GraphBuilder b;
  Value* x = b.Input("x", {3, 4});
  Value* h = b.Op("HardSigmoid", {x}, {{"alpha", 1.0f / 6}, {"beta", 0.5f}});
  Value* y = b.Op("Mul", {h, x}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto original = g->Clone();
  EXPECT_TRUE(*HardSwishRecognition().Run(*g));
  EXPECT_EQ(testing::OpSequence(*g), "HardSwish");
  testing::ExpectSameOutputs(*original, *g, 1e-5);
}

TEST(HardSwishRecognitionTest, KeepsPatternWhoseClipHasAnotherReader) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 7});
  Value* a = b.Op("Add", {x, b.Scalar("three", 3)});
  Value* c = b.Op("Clip", {a, b.Scalar("lo", 0), b.Scalar("hi", 6)}, {}, "c");
  Value* y = b.Op("Div", {b.Op("Mul", {x, c}), b.Scalar("six", 6)}, {}, "y");
  b.Output(y);
  b.Output(c);
  auto g = b.Finish();
  EXPECT_FALSE(*HardSwishRecognition().Run(*g));
  // A plain ReLU6-style clip (bounds 0, 4) is not HardSwish either.
  GraphBuilder b2;
  Value* x2 = b2.Input("x", {2, 7});
  Value* c2 = b2.Op("Clip", {b2.Op("Add", {x2, b2.Scalar("three", 3)}), b2.Scalar("lo", 0), b2.Scalar("hi", 4)});
  b2.Output(b2.Op("Div", {b2.Op("Mul", {x2, c2}), b2.Scalar("six", 6)}, {}, "y"));
  auto g2 = b2.Finish();
  EXPECT_FALSE(*HardSwishRecognition().Run(*g2));
}

}  // namespace
}  // namespace kiln
