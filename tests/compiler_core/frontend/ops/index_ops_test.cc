// The index family (index_ops.cc): uneven splits, Gather's negative and
// out-of-range indices, DepthToSpace/SpaceToDepth, Trilu.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/compiler_core/frontend/ops/op_testing.h"

namespace kiln {
namespace {

using ::kiln::testing::F32;
using ::kiln::testing::Iota;
using ::kiln::testing::OnnxModelBuilder;
using ::kiln::testing::RunModel;
using ::kiln::testing::Values;
using ::testing::HasSubstr;

TEST(IndexOpsTest, UnevenSplitWithNumOutputs) {
  testing::OnnxModelBuilder m(18);
  m.Input("x", {"7"});
  testing::OnnxModelBuilder::AttrInt(m.Node("Split", "sp", {"x"}, {"a", "b", "y"}), "num_outputs", 3);
  m.Output("a").Output("b").Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->nodes().size(), 3u);  // one single-output Split per output
  EXPECT_EQ((*g)->FindValue("a")->type().ToString(), "f32[3]");
  EXPECT_EQ((*g)->FindValue("y")->type().ToString(), "f32[1]");
  auto out = Evaluate(**g, {{"x", Tensor::FromVector(DType::kFloat32, {7}, Iota(7))}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>(out->at("b")), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(Values<float>(out->at("y")), (std::vector<float>{6}));
}

TEST(IndexOpsTest, GatherNegativeIndicesAndOutOfRange) {
  testing::OnnxModelBuilder m;
  m.Input("x", {"3", "2"});
  m.Input("i", {"2"}, onnx::TensorProto::INT32);
  m.Node("Gather", "g", {"x", "i"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  Tensor x = Tensor::FromVector(DType::kFloat32, {3, 2}, Iota(6));
  auto out = Evaluate(**g, {{"x", x}, {"i", Tensor::FromVector(DType::kInt32, {2}, std::vector<int32_t>{-1, 0})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>(out->at("y")), (std::vector<float>{4, 5, 0, 1}));
  auto bad = Evaluate(**g, {{"x", x}, {"i", Tensor::FromVector(DType::kInt32, {2}, std::vector<int32_t>{0, 3})}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("node 'g' (Gather): index 3 is out of range for extent 3"));
}

TEST(IndexOpsTest, DepthToSpaceAndSpaceToDepthAreInverse) {
  testing::OnnxModelBuilder m;
  m.Input("x", {"1", "8", "2", "3"});
  testing::OnnxModelBuilder::AttrInt(m.Node("DepthToSpace", "d2s", {"x"}, {"t"}), "blocksize", 2);
  testing::OnnxModelBuilder::AttrInt(m.Node("SpaceToDepth", "s2d", {"t"}, {"y"}), "blocksize", 2);
  m.Output("y");
  Tensor x = Tensor::FromVector(DType::kFloat32, {1, 8, 2, 3}, Iota(48));
  Tensor y = RunModel(m, x);
  EXPECT_EQ(y.dims(), x.dims());
  EXPECT_EQ(Values<float>(y), Iota(48));
}

TEST(IndexOpsTest, LowerTrilu) {
  OnnxModelBuilder m;
  m.Input("x", {"2", "3"});
  OnnxModelBuilder::AttrInt(m.Node("Trilu", "t", {"x"}, {"y"}), "upper", 0);
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  auto out = Evaluate(**g, {{"x", F32({2, 3}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = out->at("y");
  EXPECT_EQ(std::vector<float>(y.data<float>(), y.data<float>() + 6), (std::vector<float>{1, 0, 0, 4, 5, 0}));
}

}  // namespace
}  // namespace kiln
