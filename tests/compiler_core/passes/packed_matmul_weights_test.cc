// Packed matmul weights: which MatMuls and Gemms become kiln.PackedMatMul with
// their constant B in column panels (and which stay), the interpreter's
// numbers unchanged, the panels' layout, and the rewritten product compiling
// to one matmul group for CPU targets and not at all for GPUs.
#include "compiler_core/passes/packed_matmul_weights.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/matmul_panels.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;

bool Rewrite(Graph& g, int64_t lanes = 8) {
  PassPipeline p("packed");
  p.Add(std::make_unique<PackedMatMulWeights>(lanes));
  return testing::RunPasses(g, p);
}

// Y = Relu(MatMul(x, W)), W [k, n] a random constant (or an input).
std::unique_ptr<Graph> MatMulGraph(const Ints& x, int64_t k, int64_t n, bool constant = true) {
  testing::GraphBuilder b;
  Value* w = constant ? b.Random("w", {k, n}) : b.Input("w", {k, n});
  b.Output(b.Op("Relu", {b.Op("MatMul", {b.Input("x", x), w})}));
  return b.Finish();
}

// Gemm(a, B, c) with B a random constant of `b` dims and the attributes given.
std::unique_ptr<Graph> GemmGraph(const Ints& a, const Ints& bd, const Ints& c, std::map<std::string, AttrValue> attrs) {
  testing::GraphBuilder b;
  std::vector<Value*> in = {b.Input("a", a), b.Random("b", bd)};
  if (!c.empty()) in.push_back(b.Random("c", c));
  b.Output(b.Op("Gemm", in, std::move(attrs)));
  return b.Finish();
}

// `g` rewritten to one kiln.PackedMatMul (then `rest`) whose panels are
// `panels` dims, attribute n = `n`, computing what it computed before.
void ExpectPacked(std::unique_ptr<Graph> g, const Ints& panels, int64_t n, const std::string& rest = "",
                  int64_t lanes = 8) {
  auto original = g->Clone();
  ASSERT_TRUE(Rewrite(*g, lanes)) << g->ToText();
  EXPECT_EQ(testing::OpSequence(*g), "PackedMatMul" + rest) << g->ToText();
  const Node* mm = g->nodes().front().get();
  EXPECT_EQ(mm->domain(), kKilnDomain);
  EXPECT_EQ(mm->GetInt("n", 0), n);
  EXPECT_EQ(mm->input(1)->type().StaticDims(), panels) << g->ToText();
  EXPECT_TRUE(mm->input(1)->is_constant());
  testing::ExpectSameOutputs(*original, *g, 1e-5);
}

TEST(PackedMatMulWeightsTest, PacksConstantBOfProductsWithRows) {
  ExpectPacked(MatMulGraph({49, 256}, 256, 1280), {160, 256, 8}, 1280, ",Relu");  // LeViT's MLP
  ExpectPacked(MatMulGraph({1, 7, 33}, 33, 20), {3, 33, 8}, 20, ",Relu");         // the last panel 4 wide
  ExpectPacked(MatMulGraph({3, 1, 17}, 17, 16), {1, 17, 16}, 16, ",Relu", 16);    // batches as rows
  ExpectPacked(GemmGraph({5, 13}, {13, 24}, {24}, {}), {3, 13, 8}, 24);
  // transB applied at compile time; transA, alpha, beta and C kept.
  ExpectPacked(GemmGraph({13, 5}, {19, 13}, {5, 1}, {{"transA", int64_t{1}}, {"transB", int64_t{1}},
                                                     {"alpha", 0.5f}, {"beta", 2.0f}}),
               {3, 13, 8}, 19);
  auto g = GemmGraph({13, 5}, {13, 19}, {}, {{"transA", int64_t{1}}, {"alpha", -1.5f}});
  ASSERT_TRUE(Rewrite(*g));
  const Node* mm = g->nodes().front().get();
  EXPECT_EQ(mm->GetInt("transA", 0), 1);
  EXPECT_EQ(mm->GetFloat("alpha", 1.0f), -1.5f);
  EXPECT_FALSE(mm->has_attr("transB"));
}

TEST(PackedMatMulWeightsTest, LeavesTheOthers) {
  auto leaves = [](std::unique_ptr<Graph> g) {
    SCOPED_TRACE(g->ToText());
    const std::string before = testing::OpSequence(*g);
    EXPECT_FALSE(Rewrite(*g));
    EXPECT_EQ(testing::OpSequence(*g), before);
  };
  leaves(MatMulGraph({12, 64}, 64, 32, false));  // B an input
  leaves(MatMulGraph({1, 64}, 64, 256));         // one row: a GEMV streams B as it is
  leaves(MatMulGraph({1, 1, 64}, 64, 256));
  leaves(MatMulGraph({12, 64}, 64, 7));          // fewer columns than one panel
  leaves(GemmGraph({1, 64}, {64, 32}, {32}, {}));
  testing::GraphBuilder b;                       // a batched B
  b.Output(b.Op("MatMul", {b.Input("x", {2, 6, 9}), b.Random("w", {2, 9, 16})}));
  leaves(b.Finish());
}

// Element (k, n) of B lies at (n / L) * K * L + k * L + n % L, zeros past
// column N; unpacking gives B back exactly, from B or from its transpose.
TEST(PackedMatMulWeightsTest, PanelLayoutAndItsInverse) {
  Tensor b(DType::kFloat32, {3, 10});
  for (int64_t i = 0; i < b.num_elements(); ++i) b.data<float>()[i] = static_cast<float>(i + 1);
  Tensor bp = ops::PackMatMulColumns(b, 4, false);
  EXPECT_EQ(bp.dims(), (Ints{3, 3, 4}));
  const float* p = bp.data<float>();
  EXPECT_EQ(p[0], 1.0f);                         // (0, 0)
  EXPECT_EQ(p[1 * 4 + 2], 13.0f);                // (1, 2): row 1 of panel 0
  EXPECT_EQ(p[(1 * 3 + 2) * 4 + 1], 26.0f);      // (2, 5): row 2 of panel 1
  EXPECT_EQ(p[(2 * 3 + 0) * 4 + 2], 0.0f);       // column 10 does not exist
  EXPECT_EQ(ops::UnpackMatMulColumns(bp, 10).bytes(), b.bytes());
  Tensor bt(DType::kFloat32, {10, 3});
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 10; ++c) bt.data<float>()[c * 3 + r] = b.data<float>()[r * 10 + c];
  }
  EXPECT_EQ(ops::PackMatMulColumns(bt, 4, true).bytes(), bp.bytes());
  EXPECT_TRUE(ops::HoldsColumns({3, 3, 4}, 9));
  EXPECT_FALSE(ops::HoldsColumns({3, 3, 4}, 8));  // a whole panel of nothing
  EXPECT_FALSE(ops::HoldsColumns({3, 3, 4}, 13));
  EXPECT_FALSE(ops::HoldsColumns({3, 12}, 12));
}

// Through the whole pipeline for a CPU target: one matmul group (the Relu
// rides on it) whose default schedule lowers, with panels of the target's
// lanes; a GPU target keeps the MatMul.
TEST(PackedMatMulWeightsTest, CompilesToOneMatMulGroupForCpusOnly) {
  for (const std::string name : {"cpu:x86-64-v3", "cpu:znver4"}) {
    absl::StatusOr<Target> target = Target::Named(name);
    ASSERT_TRUE(target.ok()) << target.status();
    auto prepared = PrepareModel(MatMulGraph({49, 256}, 256, 200), PrepareOptionsFor(*target));
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    ASSERT_EQ(prepared->partition.groups.size(), 1u) << prepared->graph->ToText();
    EXPECT_EQ(prepared->partition.groups[0].kind, "matmul");
    EXPECT_EQ(testing::OpSequence(*prepared->workloads[0].graph), "PackedMatMul,Relu");
    const int64_t lanes = target->cpu().FloatLanes();
    EXPECT_EQ(prepared->graph->nodes().front()->input(1)->type().StaticDims(),
              (Ints{(200 + lanes - 1) / lanes, 256, lanes}));
    EXPECT_TRUE(CheckCompilable(*prepared, *target).ok()) << CheckCompilable(*prepared, *target);
  }
  absl::StatusOr<Target> gpu = Target::Named("cuda:sm_90");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto on_gpu = PrepareModel(MatMulGraph({49, 256}, 256, 200), PrepareOptionsFor(*gpu));
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  EXPECT_EQ(testing::OpSequence(*on_gpu->graph), "MatMul,Relu");
}

}  // namespace
}  // namespace kiln
