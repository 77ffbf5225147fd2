// The tensor family (data movement and shape operators) through import, shape
// inference and the reference interpreter: edge semantics the ONNX node tests
// do not pin down (negative pads, clamped slices, uneven splits, symbolic dims).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "tests/compiler_core/frontend/onnx_model_builder.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

void AttrInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void AttrString(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

void IntInit(testing::OnnxModelBuilder& m, const std::string& name, const std::vector<int64_t>& v) {
  onnx::TensorProto* t = m.graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
}

std::vector<float> Iota(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

// Imports `m` and runs it on x (f32) -> the output named "y".
Tensor RunModel(testing::OnnxModelBuilder& m, const Tensor& x, const ImportOptions& options = {}) {
  auto g = ImportOnnxModel(m.Bytes(), options);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return Tensor();
  auto out = Evaluate(**g, {{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return Tensor();
  return out->at("y");
}

TEST(TensorOpsTest, PadModesAndNegativePads) {
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

TEST(TensorOpsTest, PadWithAxesAndIntConstantValue) {
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

TEST(TensorOpsTest, ReshapeZeroMinusOneAndAllowzero) {
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

TEST(TensorOpsTest, SliceClampsAndStepsBackwards) {
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

TEST(TensorOpsTest, UnevenSplitWithNumOutputs) {
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

TEST(TensorOpsTest, GatherNegativeIndicesAndOutOfRange) {
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

TEST(TensorOpsTest, DepthToSpaceAndSpaceToDepthAreInverse) {
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

TEST(TensorOpsTest, TransposeAndTileOnBool) {
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

TEST(TensorOpsTest, SymbolicDimsPropagateThroughViews) {
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

TEST(TensorOpsTest, ConstantOfShapeAndRangeFold) {
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
