// The data-movement family (data_movement_ops.cc) through import, shape
// inference and the reference interpreter: edge semantics the ONNX node tests
// do not pin down (negative pads, clamped slices, symbolic dims through views).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/compiler_core/frontend/ops/op_testing.h"

namespace kiln {
namespace {

using ::kiln::testing::AttrString;
using ::kiln::testing::IntInit;
using ::kiln::testing::Iota;
using ::kiln::testing::OnnxModelBuilder;
using ::kiln::testing::RunModel;
using ::kiln::testing::Values;
using ::testing::HasSubstr;

TEST(DataMovementOpsTest, PadModesAndNegativePads) {
  Tensor x = Tensor::FromVector(DType::kFloat32, {1, 4}, std::vector<float>{1, 2, 3, 4});
  struct Case {
    std::string mode;
    std::vector<int64_t> pads;
    std::vector<float> want;
  };
  for (const Case& c : std::vector<Case>{
           {"constant", {0, 2, 0, -1}, {0, 0, 1, 2, 3}},   // crop the end
           {"reflect", {0, 2, 0, 1}, {3, 2, 1, 2, 3, 4, 3}},
           {"edge", {0, 1, 0, 2}, {1, 1, 2, 3, 4, 4, 4}},
           {"wrap", {0, 1, 0, 1}, {4, 1, 2, 3, 4, 1}}}) {
    testing::OnnxModelBuilder m(18);
    m.Input("x", {"1", "4"});
    IntInit(m, "pads", c.pads);
    AttrString(m.Node("Pad", "pad", {"x", "pads"}, {"y"}), "mode", c.mode);
    m.Output("y");
    Tensor y = RunModel(m, x);
    EXPECT_EQ(Values<float>(y), c.want) << c.mode;
  }
}

TEST(DataMovementOpsTest, PadWithAxesAndIntConstantValue) {
  testing::OnnxModelBuilder m(18);
  m.Input("x", {"2", "2"}, onnx::TensorProto::INT64);
  IntInit(m, "pads", {1, 0});  // axis 1: one before, none after
  IntInit(m, "value", {7});
  m.graph()->mutable_initializer(1)->clear_dims();  // scalar
  IntInit(m, "axes", {-1});
  m.Node("Pad", "pad", {"x", "pads", "value", "axes"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  Tensor x = Tensor::FromVector(DType::kInt64, {2, 2}, std::vector<int64_t>{1, 2, 3, 4});
  auto out = Evaluate(**g, {{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("y").dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<int64_t>(out->at("y")), (std::vector<int64_t>{7, 1, 2, 7, 3, 4}));
}

TEST(DataMovementOpsTest, ReshapeZeroMinusOneAndAllowzero) {
  {
    testing::OnnxModelBuilder m;
    m.Input("x", {"2", "3", "4"});
    IntInit(m, "shape", {0, -1});
    m.Node("Reshape", "r", {"x", "shape"}, {"y"});
    m.Output("y");
    Tensor y = RunModel(m, Tensor::FromVector(DType::kFloat32, {2, 3, 4}, Iota(24)));
    EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 12}));
    EXPECT_EQ(Values<float>(y), Iota(24));
  }
  {
    testing::OnnxModelBuilder m(14);
    m.Input("x", {"0", "3"});
    IntInit(m, "shape", {3, 0});
    testing::OnnxModelBuilder::AttrInt(m.Node("Reshape", "r", {"x", "shape"}, {"y"}), "allowzero", 1);
    m.Output("y");
    auto g = ImportOnnxModel(m.Bytes(), {});
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ((*g)->FindValue("y")->type().ToString(), "f32[3,0]");
  }
  {
    testing::OnnxModelBuilder m;
    m.Input("x", {"2", "3"});
    IntInit(m, "shape", {4, -1});
    m.Node("Reshape", "r", {"x", "shape"}, {"y"});
    m.Output("y");
    auto g = ImportOnnxModel(m.Bytes(), {});
    ASSERT_FALSE(g.ok());
    EXPECT_THAT(g.status().message(), HasSubstr("node 'r' (Reshape): cannot reshape f32[2,3]"));
  }
}

TEST(DataMovementOpsTest, SliceClampsAndStepsBackwards) {
  testing::OnnxModelBuilder m;
  m.Input("x", {"2", "5"});
  IntInit(m, "starts", {100, -1});
  IntInit(m, "ends", {-100, -1000});
  IntInit(m, "axes", {0, 1});
  IntInit(m, "steps", {-1, -2});
  m.Node("Slice", "s", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  m.Output("y");
  Tensor y = RunModel(m, Tensor::FromVector(DType::kFloat32, {2, 5}, Iota(10)));
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{9, 7, 5, 4, 2, 0}));
}

TEST(DataMovementOpsTest, TransposeAndTileOnBool) {
  testing::OnnxModelBuilder m;
  m.Input("x", {"2", "3"}, onnx::TensorProto::BOOL);
  m.Node("Transpose", "t", {"x"}, {"t0"});
  IntInit(m, "reps", {1, 2});
  m.Node("Tile", "tile", {"t0", "reps"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<uint8_t> xv = {1, 0, 0, 0, 1, 1};
  auto out = Evaluate(**g, {{"x", Tensor::FromVector(DType::kBool, {2, 3}, xv)}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("y").dims(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(Values<uint8_t>(out->at("y")), (std::vector<uint8_t>{1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 0, 1}));
}

TEST(DataMovementOpsTest, SymbolicDimsPropagateThroughViews) {
  testing::OnnxModelBuilder m;
  m.Input("x", {"batch", "3"});
  IntInit(m, "axes", {1});
  m.Node("Unsqueeze", "u", {"x", "axes"}, {"t0"});
  m.Node("Transpose", "t", {"t0"}, {"t1"});
  IntInit(m, "axes0", {1});
  m.Node("Squeeze", "s", {"t1", "axes0"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->FindValue("t0")->type().ToString(), "f32[batch,1,3]");
  EXPECT_EQ((*g)->FindValue("y")->type().ToString(), "f32[3,batch]");
}

}  // namespace
}  // namespace kiln
