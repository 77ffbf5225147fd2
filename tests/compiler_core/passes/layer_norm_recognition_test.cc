// LayerNorm recognition: torch's decomposition (with and without the affine
// part, axes as attribute or input) and a pattern with an extra reader.
#include "compiler_core/passes/layer_norm_recognition.h"

#include <gtest/gtest.h>

#include "compiler_core/passes/dead_code_elimination.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using testing::GraphBuilder;

PassPipeline Recognize() {
  PassPipeline p("layer_norm");
  p.Add(std::make_unique<LayerNormRecognition>()).Add(std::make_unique<DeadCodeElimination>());
  return p;
}

struct Decomposition {
  Value* mean;
  Value* y;
};

// ReduceMean/Sub/Pow(2)/ReduceMean/Add(eps)/Sqrt/Div[/Mul(gamma)/Add(beta)],
// as torch.onnx exports nn.LayerNorm for opsets without LayerNormalization.
Decomposition LayerNormOps(GraphBuilder& b, Value* x, int64_t d, bool affine, bool axes_as_input,
                           bool square_as_mul) {
  auto reduce = [&](Value* v, const std::string& n) {
    if (axes_as_input) return b.Op("ReduceMean", {v, b.Ints(n, {-1})});
    return b.Op("ReduceMean", {v}, {{"axes", std::vector<int64_t>{-1}}});
  };
  Value* mean = reduce(x, "axes1");
  Value* c = b.Op("Sub", {x, mean});
  Value* sq = square_as_mul ? b.Op("Mul", {c, c}) : b.Op("Pow", {c, b.Scalar("two", 2)});
  Value* var = reduce(sq, "axes2");
  Value* ve = b.Op("Add", {var, b.Scalar("eps", 1e-5f)});
  Value* sd = b.Op("Sqrt", {ve});
  Value* n = b.Op("Div", {c, sd}, {}, affine ? "" : "y");
  if (!affine) return {mean, n};
  Value* sc = b.Op("Mul", {n, b.Random("gamma", {d})});
  return {mean, b.Op("Add", {sc, b.Random("beta", {d})}, {}, "y")};
}

TEST(LayerNormRecognitionTest, RecognizesTorchDecomposition) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 3, 8});
  Decomposition ln = LayerNormOps(b, x, 8, /*affine=*/true, /*axes_as_input=*/false, /*square_as_mul=*/false);
  b.Output(ln.y);
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p = Recognize();
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(g->ToText(),
            "graph main(%x: f32[2,3,8]) -> (%y) {\n"
            "  %gamma: f32[8] = const f32[8]\n"
            "  %beta: f32[8] = const f32[8]\n"
            "  %y: f32[2,3,8] = LayerNormalization(%x, %gamma, %beta) {name=\"Add_y\", axis=2, epsilon=1e-05}\n"
            "}\n");
  testing::ExpectSameOutputs(*original, *g, 1e-4);
}

TEST(LayerNormRecognitionTest, RecognizesWithoutAffineAndWithAxesInput) {
  GraphBuilder b;
  Value* x = b.Input("x", {4, 6});
  Decomposition ln = LayerNormOps(b, x, 6, /*affine=*/false, /*axes_as_input=*/true, /*square_as_mul=*/true);
  b.Output(ln.y);
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p = Recognize();
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(testing::OpSequence(*g), "LayerNormalization") << g->ToText();
  testing::ExpectSameOutputs(*original, *g, 1e-4);
}

TEST(LayerNormRecognitionTest, KeepsPatternWhoseMeanHasAnotherReader) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 8});
  Decomposition ln = LayerNormOps(b, x, 8, true, false, false);
  b.Output(ln.y);
  b.Output(ln.mean);
  auto g = b.Finish();
  EXPECT_FALSE(*LayerNormRecognition().Run(*g));
}

TEST(LayerNormRecognitionTest, KeepsReductionOverANonTrailingAxis) {
  GraphBuilder b;
  Value* x = b.Input("x", {4, 6});
  Value* mean = b.Op("ReduceMean", {x}, {{"axes", std::vector<int64_t>{0}}});
  Value* c = b.Op("Sub", {x, mean});
  Value* var = b.Op("ReduceMean", {b.Op("Mul", {c, c})}, {{"axes", std::vector<int64_t>{0}}});
  Value* sd = b.Op("Sqrt", {b.Op("Add", {var, b.Scalar("eps", 1e-5f)})});
  Value* y = b.Op("Div", {c, sd}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  EXPECT_FALSE(*LayerNormRecognition().Run(*g));
}

}  // namespace
}  // namespace kiln
