// The default optimisation pipeline on a small model touching every pass.
#include "compiler_core/passes/optimize.h"

#include <gtest/gtest.h>

#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using testing::GraphBuilder;

// Conv -> BN -> Relu -> Reshape -> Identity -> LayerNorm (decomposed) -> GELU
// (decomposed) -> Div by a constant -> y; plus a dead branch.
std::unique_ptr<Graph> SmallModel() {
  GraphBuilder b;
  Value* x = b.Input("x", {1, 3, 4, 4});
  Value* c = b.Op("Conv", {x, b.Random("w", {8, 3, 1, 1}), b.Random("cb", {8})});
  Value* bn = b.Op("BatchNormalization",
                   {c, b.Random("bn_scale", {8}, 0.5f, 2), b.Random("bn_bias", {8}), b.Random("bn_mean", {8}),
                    b.Random("bn_var", {8}, 0.1f, 2)});
  Value* r = b.Op("Relu", {bn});
  Value* flat = b.Op("Reshape", {r, b.Ints("shape", {1, 8, 16})});
  Value* id = b.Op("Identity", {flat});
  (void)b.Op("Neg", {id});  // dead
  Value* mean = b.Op("ReduceMean", {id}, {{"axes", std::vector<int64_t>{-1}}});
  Value* d = b.Op("Sub", {id, mean});
  Value* var = b.Op("ReduceMean", {b.Op("Pow", {d, b.Scalar("two", 2)})}, {{"axes", std::vector<int64_t>{-1}}});
  Value* n = b.Op("Div", {d, b.Op("Sqrt", {b.Op("Add", {var, b.Scalar("eps", 1e-5f)})})});
  Value* ln = b.Op("Add", {b.Op("Mul", {n, b.Random("gamma", {16})}), b.Random("beta", {16})});
  Value* e = b.Op("Erf", {b.Op("Div", {ln, b.Scalar("sqrt2", 1.4142135f)})});
  Value* gl = b.Op("Mul", {b.Op("Mul", {ln, b.Op("Add", {e, b.Scalar("one", 1)})}), b.Scalar("half", 0.5f)});
  Value* y = b.Op("Div", {gl, b.Scalar("four", 4)}, {}, "y");
  b.Output(y);
  return b.Finish();
}

TEST(OptimizeGraphTest, RunsTheDefaultPipelineToAFixedPoint) {
  auto g = SmallModel();
  auto original = g->Clone();
  std::vector<std::string> dumped;
  PassPipelineOptions options;
  options.dump_after = {"gelu_recognition"};
  options.dump = [&](const std::string& pass, const std::string&) { dumped.push_back(pass); };
  auto records = OptimizeGraph(*g, options);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(testing::OpSequence(*g), "Conv,Relu,Reshape,LayerNormalization,Gelu,Mul") << g->ToText();
  EXPECT_EQ(g->outputs()[0]->name(), "y");
  const size_t per_round = DefaultOptimizationPipeline().PassNames().size();
  const size_t late = AlgorithmSelectionPipeline().PassNames().size();  // once, after the fixed point
  ASSERT_GE(records->size(), late);
  EXPECT_EQ((*records)[records->size() - late].name, "live_tap_regions");
  records->resize(records->size() - late);
  ASSERT_EQ(records->size() % per_round, 0u);
  const size_t rounds = records->size() / per_round;
  EXPECT_GE(rounds, 2u);
  EXPECT_LE(rounds, static_cast<size_t>(kMaxOptimizationRounds));
  if (rounds < static_cast<size_t>(kMaxOptimizationRounds)) {
    for (size_t i = records->size() - per_round; i < records->size(); ++i) EXPECT_FALSE((*records)[i].changed);
  }
  EXPECT_EQ(dumped.size(), rounds);
  EXPECT_TRUE(VerifyGraph(*g).ok());
  testing::ExpectSameOutputs(*original, *g, 1e-4);
}

TEST(OptimizeGraphTest, PipelineIsAFlatNamedList) {
  EXPECT_EQ(DefaultOptimizationPipeline().PassNames(),
            (std::vector<std::string>{"legacy_forms", "einsum_decomposition", "rnn_recurrence", "constant_folding", "transpose_sinking", "algebraic_simplification", "dce",
                                      "batchnorm_folding", "pad_folding", "conv_branch_merging", "strided_pointwise_conv",
                                      "hardswish_recognition", "gelu_recognition", "layer_norm_recognition",
                                      "softmax_recognition", "cse", "dce"}));
}

}  // namespace
}  // namespace kiln
