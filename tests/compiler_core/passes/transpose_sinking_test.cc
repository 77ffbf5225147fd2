// Transpose sinking: the NHWC wrapping tf2onnx leaves around NCHW Convs (an
// activation and padding, a squeeze-and-excitation block, a residual add
// between two wrapped convs) disappears through the default pipeline with
// the interpreter's numbers unchanged; a Transpose whose region would hand a
// feature map to another reader stays.
#include "compiler_core/passes/transpose_sinking.h"

#include <gtest/gtest.h>

#include "compiler_core/passes/optimize.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;
using testing::GraphBuilder;

const Ints kToNhwc = {0, 2, 3, 1}, kToNchw = {0, 3, 1, 2};

Value* ToNhwc(GraphBuilder& b, Value* v, const std::string& name) {
  return b.Op("Transpose", {v}, {{"perm", kToNhwc}}, name);
}
Value* ToNchw(GraphBuilder& b, Value* v, const std::string& name) {
  return b.Op("Transpose", {v}, {{"perm", kToNchw}}, name);
}

// A 1x1 conv of `c` channels in NCHW.
Value* Conv(GraphBuilder& b, Value* x, int64_t cin, int64_t cout, const std::string& name) {
  return b.Op("Conv", {x, b.Random(name + "_w", {cout, cin, 1, 1}, -0.5f, 0.5f), b.Random(name + "_b", {cout})}, {},
              name);
}

int Transposes(const Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op_type() == "Transpose";
  return n;
}

void Optimize(Graph& g) { ASSERT_TRUE(OptimizeGraph(g, {}).ok()); }

TEST(TransposeSinkingTest, ActivationAndPaddingBetweenWrappedConvs) {
  GraphBuilder b;
  Value* x = b.Input("x", {1, 8, 6, 5});
  Value* t = ToNhwc(b, Conv(b, x, 8, 8, "c1"), "t1");
  Value* r = b.Op("Relu", {t}, {}, "relu");
  Value* biased = b.Op("Add", {r, b.Random("per_channel", {8})}, {}, "bias");  // broadcast over NHWC's C
  Value* p = b.Op("Pad", {biased, b.Ints("pads", {0, 1, 0, 0, 0, 1, 2, 0})}, {}, "pad");
  b.Output(Conv(b, ToNchw(b, p, "t2"), 8, 4, "c2"));
  auto g = b.Finish();
  auto original = g->Clone();
  Optimize(*g);
  EXPECT_EQ(Transposes(*g), 0) << g->ToText();
  testing::ExpectSameOutputs(*original, *g, 1e-5);
}

// Squeeze-and-excitation in NHWC: the mean over H and W, a small branch
// through its own wrapped 1x1 convs, the scale multiplied back in.
TEST(TransposeSinkingTest, SqueezeAndExcitationBlock) {
  GraphBuilder b;
  Value* x = b.Input("x", {1, 16, 7, 7});
  Value* h = b.Op("HardSwish", {ToNhwc(b, Conv(b, x, 16, 16, "c1"), "t1")}, {}, "hs");
  Value* mean = b.Op("ReduceMean", {h}, {{"axes", Ints{1, 2}}, {"keepdims", int64_t{1}}}, "mean");
  Value* squeeze = ToNhwc(b, Conv(b, ToNchw(b, mean, "t2"), 16, 4, "se1"), "t3");
  Value* relu = b.Op("Relu", {squeeze}, {}, "se_relu");
  Value* excite = ToNhwc(b, Conv(b, ToNchw(b, relu, "t4"), 4, 16, "se2"), "t5");
  Value* gate = b.Op("HardSigmoid", {excite}, {}, "gate");
  Value* scaled = b.Op("Mul", {h, gate}, {}, "scale");
  b.Output(Conv(b, ToNchw(b, scaled, "t6"), 16, 8, "c2"));
  auto g = b.Finish();
  auto original = g->Clone();
  Optimize(*g);
  // Only transposes of the 16 means may stay.
  for (const auto& n : g->nodes()) {
    if (n->op_type() == "Transpose") EXPECT_LE(NumElements(n->output(0)->type().StaticDims()), 16) << g->ToText();
  }
  testing::ExpectSameOutputs(*original, *g, 1e-5);
}

// Two wrapped blocks with a residual add of the first block's NHWC output:
// once the first is rewritten the add's other operand is a transpose again.
TEST(TransposeSinkingTest, ResidualAddBetweenWrappedBlocks) {
  GraphBuilder b;
  Value* x = b.Input("x", {1, 8, 5, 5});
  Value* a = b.Op("Relu", {ToNhwc(b, Conv(b, x, 8, 8, "c1"), "t1")}, {}, "a");
  Value* y = ToNhwc(b, Conv(b, ToNchw(b, a, "t2"), 8, 8, "c2"), "t3");
  Value* sum = b.Op("Add", {a, y}, {}, "residual");
  b.Output(Conv(b, ToNchw(b, sum, "t4"), 8, 8, "c3"));
  auto g = b.Finish();
  auto original = g->Clone();
  Optimize(*g);
  EXPECT_EQ(Transposes(*g), 0) << g->ToText();
  testing::ExpectSameOutputs(*original, *g, 1e-5);
}

// The region would hand its feature map (more than kSinkSmallElements) to a
// MatMul that wants NHWC, and no Transpose undoes the root: moving it below
// the Relu copies as much.
TEST(TransposeSinkingTest, LeavesATransposeNothingUndoes) {
  GraphBuilder b;
  Value* x = b.Input("x", {1, 8, 32, 32});
  Value* r = b.Op("Relu", {ToNhwc(b, x, "t1")}, {}, "relu");
  b.Output(b.Op("MatMul", {r, b.Random("w", {8, 3})}, {}, "mm"));
  auto g = b.Finish();
  PassPipeline p("sinking");
  p.Add(std::make_unique<TransposeSinking>());
  EXPECT_FALSE(testing::RunPasses(*g, p)) << g->ToText();
}

}  // namespace
}  // namespace kiln
