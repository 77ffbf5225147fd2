// The reduction family (reduction_ops.cc): constant axes, axis range, and the
// coerced-2-D Softmax of opsets before 13.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/compiler_core/frontend/ops/op_testing.h"

namespace kiln {
namespace {

using ::kiln::testing::AttrInts;
using ::kiln::testing::F32;
using ::kiln::testing::OnnxModelBuilder;
using ::testing::HasSubstr;

TEST(ReductionOpsTest, ReduceAxesInputMustBeConstant) {
  OnnxModelBuilder m;
  m.Input("x", {"2", "3"});
  m.Input("axes", {"1"}, onnx::TensorProto::INT64);
  m.Node("ReduceSum", "rs", {"x", "axes"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("must be a constant"));
}

TEST(ReductionOpsTest, ReduceRejectsOutOfRangeAxis) {
  OnnxModelBuilder m;
  m.Input("x", {"2", "3"});
  AttrInts(m.Node("ReduceMean", "rm", {"x"}, {"y"}), "axes", {2});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("rank 2"));
}

TEST(ReductionOpsTest, LegacySoftmaxCoercesTo2D) {
  OnnxModelBuilder m(11);
  m.Input("x", {"1", "2", "2"});
  onnx::NodeProto* n = m.Node("Softmax", "sm", {"x"}, {"y"});
  OnnxModelBuilder::AttrInt(n, "_kiln_opset", 11);
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  auto out = Evaluate(**g, {{"x", F32({1, 2, 2}, {0, 0, 0, 0})}});
  ASSERT_TRUE(out.ok()) << out.status();
  // Axis 1 of a [1,2,2] input: softmax over the 4 trailing elements.
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(out->at("y").data<float>()[i], 0.25f);
}

}  // namespace
}  // namespace kiln
