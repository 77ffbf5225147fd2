// Legacy-form canonicalization: Softmax-family nodes of opset < 13 become
// Flatten -> op(axis=1) -> Reshape (or op(axis=-1) at the last axis), with the
// interpreter's numbers unchanged, and then compile like any opset-13 softmax.
#include "compiler_core/passes/legacy_forms.h"

#include <gtest/gtest.h>

#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/shape_inference.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using testing::GraphBuilder;

TEST(LegacyFormsTest, SoftmaxBeforeOpset13IsFlattenSoftmaxReshape) {
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    GraphBuilder b;
    Value* x = b.Input("x", {2, 3, 4});
    b.Output(b.Op(op, {x}, {{"axis", int64_t{1}}, {kOpsetAttr, int64_t{11}}}, "y"));
    auto g = b.Finish();
    auto original = g->Clone();
    PassPipeline p("legacy");
    p.Add(std::make_unique<LegacyFormCanonicalization>());
    EXPECT_TRUE(testing::RunPasses(*g, p));
    EXPECT_EQ(g->ToText(), absl::StrCat("graph main(%x: f32[2,3,4]) -> (%y) {\n"
                                        "  %", op, "_y_shape: i64[3] = const i64[3]{2,3,4}\n"
                                        "  %",
                                        op, "_y_2d: f32[2,12] = Flatten(%x) {name=\"", op,
                                        "_y/flatten\", axis=1}\n"
                                        "  %",
                                        op, "_y_y2d: f32[2,12] = ", op, "(%", op, "_y_2d) {name=\"", op,
                                        "_y\", axis=1}\n"
                                        "  %y: f32[2,3,4] = Reshape(%",
                                        op, "_y_y2d, %", op, "_y_shape) {name=\"", op, "_y/reshape\"}\n"
                                        "}\n"))
        << g->ToText();
    testing::ExpectSameOutputs(*original, *g, 1e-6);
  }
}

TEST(LegacyFormsTest, SoftmaxAtTheLastAxisKeepsOneNode) {
  GraphBuilder b;
  Value* x = b.Input("x", {5, 7});
  b.Output(b.Op("Softmax", {x}, {{"axis", int64_t{1}}, {kOpsetAttr, int64_t{9}}}, "y"));
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p("legacy");
  p.Add(std::make_unique<LegacyFormCanonicalization>());
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(g->ToText(),
            "graph main(%x: f32[5,7]) -> (%y) {\n"
            "  %y: f32[5,7] = Softmax(%x) {name=\"Softmax_y\", axis=-1}\n"
            "}\n");
  testing::ExpectSameOutputs(*original, *g, 1e-6);
}

// The failure the issue reported: an opset-9 classifier ending in Softmax now
// compiles (the group it makes lowers) instead of failing after tuning.
TEST(LegacyFormsTest, Opset9SoftmaxCompiles) {
  GraphBuilder b;
  Value* x = b.Input("x", {3, 10, 2, 2});
  b.Output(b.Op("Softmax", {x}, {{kOpsetAttr, int64_t{9}}}, "y"));
  auto g = b.Finish();
  auto prepared = PrepareModel(std::move(g));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_TRUE(CheckCompilable(*prepared, CpuTarget::Host()).ok()) << CheckCompilable(*prepared, CpuTarget::Host());
}

// Opset < 7 `broadcast`/`axis`: input 1 aligned at the axis becomes an
// Unsqueeze to trailing unit dims, then a numpy-broadcasting Add; the numbers
// stay the interpreter's, and the graph compiles.
TEST(LegacyFormsTest, AxisAlignedBroadcastBecomesUnsqueeze) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 3, 4, 5});
  Value* bias = b.Input("bias", {3});
  b.Output(b.Op("Add", {x, bias}, {{ops::kBroadcastAxisAttr, int64_t{1}}}, "y"));
  auto g = b.Finish();
  auto original = g->Clone();
  PassPipeline p("legacy");
  p.Add(std::make_unique<LegacyFormCanonicalization>());
  EXPECT_TRUE(testing::RunPasses(*g, p));
  EXPECT_EQ(g->ToText(),
            "graph main(%x: f32[2,3,4,5], %bias: f32[3]) -> (%y) {\n"
            "  %Add_y_const: i64[2] = const i64[2]{1,2}\n"
            "  %Add_y/Unsqueeze_0: f32[3,1,1] = Unsqueeze(%bias, %Add_y_const) {name=\"Add_y/Unsqueeze_0\"}\n"
            "  %y: f32[2,3,4,5] = Add(%x, %Add_y/Unsqueeze_0) {name=\"Add_y\"}\n"
            "}\n")
      << g->ToText();
  testing::ExpectSameOutputs(*original, *g, 0);
  auto prepared = PrepareModel(std::move(g));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_TRUE(CheckCompilable(*prepared, CpuTarget::Host()).ok());
}

TEST(LegacyFormsTest, AxisThatDoesNotFitNamesTheNode) {
  GraphBuilder b;
  Value* x = b.Input("x", {2, 3});
  Value* bias = b.Input("bias", {3, 4});
  b.Output(b.Op("Mul", {x, bias}, {{ops::kBroadcastAxisAttr, int64_t{1}}}, "y"));
  auto g = b.Release();
  absl::Status s = InferShapes(*g);
  EXPECT_EQ(s.message(), "node 'Mul_y' (Mul): legacy broadcast axis 1 does not fit input 1 of rank 2 into input 0 of rank 2");
}

}  // namespace
}  // namespace kiln
