// The shape family (shape_ops.cc): ConstantOfShape and Range fold once shapes
// are bound.
#include <gtest/gtest.h>

#include "tests/compiler_core/frontend/ops/op_testing.h"

namespace kiln {
namespace {

using ::kiln::testing::IntInit;
using ::kiln::testing::Iota;
using ::kiln::testing::OnnxModelBuilder;
using ::kiln::testing::RunModel;
using ::kiln::testing::Values;

TEST(ShapeOpsTest, ConstantOfShapeAndRangeFold) {
  testing::OnnxModelBuilder m;
  m.Input("x", {"4"});
  IntInit(m, "shape", {4});
  onnx::NodeProto* c = m.Node("ConstantOfShape", "c", {"shape"}, {"ones"});
  onnx::TensorProto one = testing::OnnxModelBuilder::FloatTensor("v", {1}, {1.f});
  testing::OnnxModelBuilder::AttrTensor(c, "value", one);
  m.Node("Add", "add", {"x", "ones"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ((*g)->nodes().size(), 1u);  // ConstantOfShape folded
  EXPECT_TRUE((*g)->FindValue("ones")->is_constant());
  Tensor y = RunModel(m, Tensor::FromVector(DType::kFloat32, {4}, Iota(4)));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace kiln
