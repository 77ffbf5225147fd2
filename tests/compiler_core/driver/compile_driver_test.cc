// The compile driver's fail-fast check: a model whose groups cannot all be
// built is refused before any tuning, in the model's node names, every
// failing group listed once.
#include "compiler_core/driver/compile_driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using testing::GraphBuilder;

TEST(CompileDriverTest, ZeroExtentFailsBeforeTuningNamingTheModelsNode) {
  GraphBuilder b;
  Value* x = b.Input("x", {0, 64});
  Value* w = b.Const("w", {64, 32}, std::vector<float>(64 * 32, 1.f));
  Value* y = b.Op("MatMul", {x, w}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto prepared = PrepareModel(std::move(g));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  absl::Status s = CheckCompilable(*prepared, CpuTarget::Host());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("unsupported: group 0 [node 'MatMul_y' (MatMul)]: node 'MatMul_y': empty matmul"));
}

TEST(CompileDriverTest, CompilableModelPassesTheCheck) {
  GraphBuilder b;
  Value* x = b.Input("x", {4, 64});
  Value* w = b.Const("w", {64, 32}, std::vector<float>(64 * 32, 1.f));
  b.Output(b.Op("Relu", {b.Op("MatMul", {x, w})}, {}, "y"));
  auto prepared = PrepareModel(b.Finish());
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_TRUE(CheckCompilable(*prepared, CpuTarget::Host()).ok());
}

}  // namespace
}  // namespace kiln
