// Einsum decomposition: the common equations of real models become
// Transpose / Reshape / ReduceSum / MatMul with the interpreter's numbers
// unchanged, and then compile; diagonals stay Einsum.
#include "compiler_core/passes/einsum_decomposition.h"

#include <gtest/gtest.h>

#include "compiler_core/driver/compile_driver.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using testing::GraphBuilder;

// Decomposes `equation` over inputs of `shapes`, checks the numbers, that no
// Einsum is left, and that the result compiles.
void Check(const std::string& equation, const std::vector<std::vector<int64_t>>& shapes) {
  SCOPED_TRACE(equation);
  GraphBuilder b;
  std::vector<Value*> ins;
  for (size_t i = 0; i < shapes.size(); ++i) ins.push_back(b.Input("x" + std::to_string(i), shapes[i]));
  b.Output(b.Op("Einsum", ins, {{"equation", equation}}, "y"));
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p("einsum");
  p.Add(std::make_unique<EinsumDecomposition>());
  EXPECT_TRUE(testing::RunPasses(*g, p));
  for (const auto& n : g->nodes()) EXPECT_NE(n->op_type(), "Einsum") << g->ToText();
  testing::ExpectSameOutputs(*original, *g, 1e-4);
  auto prepared = PrepareModel(std::move(g));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_TRUE(CheckCompilable(*prepared, CpuTarget::Host()).ok()) << CheckCompilable(*prepared, CpuTarget::Host());
}

TEST(EinsumDecompositionTest, AttentionAndLinearForms) {
  Check("bhqd,bhkd->bhqk", {{2, 3, 5, 8}, {2, 3, 7, 8}});  // attention scores
  Check("bhqk,bhkd->bhqd", {{2, 3, 5, 7}, {2, 3, 7, 8}});  // attention context
  Check("bij,bjk->bik", {{4, 3, 5}, {4, 5, 2}});
  Check("ij,jk", {{3, 5}, {5, 2}});                        // implicit output
  Check("...ij,jk->...ik", {{2, 3, 4, 5}, {5, 6}});        // ellipsis batch
  Check("bnd,df->bnf", {{2, 7, 16}, {16, 12}});           // a dense layer
}

TEST(EinsumDecompositionTest, OuterInnerSumsAndTransposes) {
  Check("i,j->ij", {{5}, {7}});
  Check("i,i->", {{9}, {9}});
  Check("bij,bj->bi", {{3, 4, 5}, {3, 5}});
  Check("ij->ji", {{3, 5}});
  Check("ijk->ki", {{3, 4, 5}});
  Check("ij->", {{3, 5}});
  Check("bij,bkj->bjk", {{2, 3, 4}, {2, 5, 4}});          // a shared label kept: batch
  Check("abc,cd->abd", {{2, 1, 4}, {4, 3}});
}

TEST(EinsumDecompositionTest, BroadcastBatchLabel) {
  Check("...ij,...jk->...ik", {{1, 3, 5}, {4, 5, 2}});  // ellipsis dims broadcast
}

TEST(EinsumDecompositionTest, DiagonalStaysEinsum) {
  GraphBuilder b;
  Value* x = b.Input("x", {4, 4});
  b.Output(b.Op("Einsum", {x}, {{"equation", std::string("ii->i")}}, "y"));
  auto g = b.Finish();
  PassPipeline p("einsum");
  p.Add(std::make_unique<EinsumDecomposition>());
  EXPECT_FALSE(testing::RunPasses(*g, p));
}

}  // namespace
}  // namespace kiln
