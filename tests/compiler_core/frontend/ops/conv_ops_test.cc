// The convolution family (conv_ops.cc) through import, shape inference and the
// reference interpreter: shapes, attribute errors, a hand-computed depthwise case.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/compiler_core/frontend/ops/op_testing.h"

namespace kiln {
namespace {

using ::kiln::testing::AttrInts;
using ::kiln::testing::AttrString;
using ::kiln::testing::F32;
using ::kiln::testing::OnnxModelBuilder;
using ::testing::HasSubstr;

absl::StatusOr<std::unique_ptr<Graph>> ConvModel(const std::function<void(onnx::NodeProto*)>& attrs,
                                                 std::vector<std::string> x_dims = {"1", "2", "5", "5"},
                                                 std::vector<int64_t> w_dims = {4, 2, 3, 3}) {
  OnnxModelBuilder m;
  m.Input("x", x_dims);
  m.Initializer("w", w_dims, std::vector<float>(NumElements(w_dims), 1.0f));
  attrs(m.Node("Conv", "conv1", {"x", "w"}, {"y"}));
  m.Output("y");
  return ImportOnnxModel(m.Bytes(), {});
}

TEST(ConvOpsTest, ConvShapesAndAttributeErrors) {
  auto ok = ConvModel([](onnx::NodeProto* n) { AttrInts(n, "pads", {1, 1, 1, 1}); });
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->FindValue("y")->type().ToString(), "f32[1,4,5,5]");

  auto sym = ConvModel([](onnx::NodeProto* n) { OnnxModelBuilder::AttrInt(n, "group", 2); },
                       {"batch", "4", "7", "7"});
  ASSERT_TRUE(sym.ok()) << sym.status();
  EXPECT_EQ((*sym)->FindValue("y")->type().ToString(), "f32[batch,4,5,5]");

  auto bad_pad = ConvModel([](onnx::NodeProto* n) { AttrString(n, "auto_pad", "SAME"); });
  ASSERT_FALSE(bad_pad.ok());
  EXPECT_EQ(bad_pad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_pad.status().message(), HasSubstr("conv1"));
  EXPECT_THAT(bad_pad.status().message(), HasSubstr("auto_pad"));

  auto unknown = ConvModel([](onnx::NodeProto* n) { OnnxModelBuilder::AttrInt(n, "bogus", 1); });
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unsupported attribute 'bogus'"));

  auto channels = ConvModel([](onnx::NodeProto*) {}, {"1", "3", "5", "5"});
  ASSERT_FALSE(channels.ok());
  EXPECT_THAT(channels.status().message(), HasSubstr("f32[1,3,5,5]"));
  EXPECT_THAT(channels.status().message(), HasSubstr("f32[4,2,3,3]"));

  auto too_small = ConvModel([](onnx::NodeProto*) {}, {"1", "2", "2", "2"});
  ASSERT_FALSE(too_small.ok());
  EXPECT_THAT(too_small.status().message(), HasSubstr("larger than the padded input"));

  auto spatial = ConvModel([](onnx::NodeProto*) {}, {"1", "2", "h", "5"});
  ASSERT_FALSE(spatial.ok());
  EXPECT_THAT(spatial.status().message(), HasSubstr("symbolic"));
}

TEST(ConvOpsTest, DepthwiseConvWithBiasMatchesHandComputation) {
  OnnxModelBuilder m;
  m.Input("x", {"1", "2", "3", "3"});
  m.Initializer("w", {2, 1, 2, 2}, {1, 0, 0, 1, 0, 1, 1, 0});
  m.Initializer("b", {2}, {10, 20});
  onnx::NodeProto* n = m.Node("Conv", "dw", {"x", "w", "b"}, {"y"});
  OnnxModelBuilder::AttrInt(n, "group", 2);
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  Tensor x = F32({1, 2, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto out = Evaluate(**g, {{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = out->at("y");
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{1, 2, 2, 2}));
  // Channel 0: x[i][j] + x[i+1][j+1]; channel 1: x[i][j+1] + x[i+1][j].
  std::vector<float> want = {16, 18, 22, 24, 26, 28, 32, 34};
  EXPECT_EQ(std::vector<float>(y.data<float>(), y.data<float>() + 8), want);
}

}  // namespace
}  // namespace kiln
