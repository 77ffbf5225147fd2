// The importer's opset handling: attribute forms of older opsets import into
// the canonical input form, Softmax-family nodes of opset < 13 are marked,
// shape subgraphs fold to constants once shapes are bound, and bad models are
// rejected with the node, op and reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "tests/compiler_core/frontend/onnx_model_builder.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using testing::OnnxModelBuilder;

void Ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void I64Init(OnnxModelBuilder& m, const std::string& name, const std::vector<int64_t>& v, bool scalar = false) {
  onnx::TensorProto* t = m.graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  if (!scalar) t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
}

std::vector<float> Floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

absl::StatusOr<std::map<std::string, Tensor>> ImportAndRun(OnnxModelBuilder& m, const Tensor& x,
                                                           std::string* text = nullptr) {
  auto g = ImportOnnxModel(m.Bytes(), {});
  if (!g.ok()) return g.status();
  if (text) *text = (*g)->ToText();
  return Evaluate(**g, {{"x", x}});
}

TEST(ImporterOpsetTest, ClipAttributesAndInputsAgree) {
  Tensor x = Tensor::FromVector(DType::kFloat32, {4}, std::vector<float>{-2, -0.5f, 0.5f, 2});
  OnnxModelBuilder old_model(6);
  old_model.Input("x", {"4"});
  onnx::NodeProto* n = old_model.Node("Clip", "clip", {"x"}, {"y"});
  OnnxModelBuilder::AttrFloat(n, "min", -1.f);
  OnnxModelBuilder::AttrFloat(n, "max", 1.f);
  old_model.Output("y");
  std::string text;
  auto a = ImportAndRun(old_model, x, &text);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(text, HasSubstr("= Clip(%x, %clip_min, %clip_max) {name=\"clip\"}"));

  OnnxModelBuilder new_model(13);
  new_model.Input("x", {"4"});
  new_model.Initializer("lo", {}, {-1.f});
  new_model.Initializer("hi", {}, {1.f});
  new_model.Node("Clip", "clip", {"x", "lo", "hi"}, {"y"});
  new_model.Output("y");
  auto b = ImportAndRun(new_model, x);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Floats(a->at("y")), (std::vector<float>{-1, -0.5f, 0.5f, 1}));
  EXPECT_EQ(Floats(a->at("y")), Floats(b->at("y")));
}

// Opset 1-6 forms of older exporters (Caffe2, early PyTorch): binary ops with
// `broadcast`/`axis`, Gemm's `broadcast`, BatchNormalization's `is_test`,
// `spatial` and `consumed_inputs`, PRelu's [C] slope, Reshape's `shape`.
TEST(ImporterOpsetTest, Opset4FormsGiveTheOpset7Numbers) {
  OnnxModelBuilder m(4);
  m.Input("x", {"1", "2", "2", "2"});
  m.Initializer("bias", {2}, {10.f, 20.f});
  m.Initializer("slope", {2}, {0.5f, 0.25f});
  m.Initializer("scale", {2}, {1.f, 2.f});
  m.Initializer("shift", {2}, {0.f, 1.f});
  m.Initializer("mean", {2}, {0.f, 0.f});
  m.Initializer("var", {2}, {1.f, 1.f});
  m.Initializer("w", {8, 2}, {1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1});
  m.Initializer("c", {2}, {100.f, 200.f});
  onnx::NodeProto* add = m.Node("Add", "add", {"x", "bias"}, {"a"});
  OnnxModelBuilder::AttrInt(add, "broadcast", 1);
  OnnxModelBuilder::AttrInt(add, "axis", 1);
  Ints(add, "consumed_inputs", {0, 0});
  m.Node("PRelu", "prelu", {"a", "slope"}, {"p"});
  onnx::NodeProto* bn = m.Node("BatchNormalization", "bn", {"p", "scale", "shift", "mean", "var"}, {"n"});
  OnnxModelBuilder::AttrInt(bn, "is_test", 1);
  OnnxModelBuilder::AttrInt(bn, "spatial", 1);
  OnnxModelBuilder::AttrFloat(bn, "epsilon", 0.f);
  Ints(bn, "consumed_inputs", {0, 0, 0, 1, 1});
  Ints(m.Node("Reshape", "flat", {"n"}, {"f"}), "shape", {1, 8});
  OnnxModelBuilder::AttrInt(m.Node("Gemm", "fc", {"f", "w", "c"}, {"y"}), "broadcast", 1);
  m.Output("y");
  // Channel 0 is negative after its bias, channel 1 mixed.
  Tensor x = Tensor::FromVector(DType::kFloat32, {1, 2, 2, 2}, std::vector<float>{-15, -14, -13, -12, -21, -20, 0, 4});
  std::string text;
  auto r = ImportAndRun(m, x, &text);
  ASSERT_TRUE(r.ok()) << r.status();
  // a = x + bias per channel; p = PRelu per channel; n = p * scale + shift.
  std::vector<float> n;
  const float xs[8] = {-15, -14, -13, -12, -21, -20, 0, 4};
  for (int i = 0; i < 8; ++i) {
    const int ch = i / 4;
    const float a = xs[i] + (ch == 0 ? 10.f : 20.f);
    const float p = a < 0 ? a * (ch == 0 ? 0.5f : 0.25f) : a;
    n.push_back(p * (ch == 0 ? 1.f : 2.f) + (ch == 0 ? 0.f : 1.f));
  }
  float y0 = 100, y1 = 200;
  for (int k = 0; k < 8; ++k) (k % 2 == 0 ? y0 : y1) += n[k];
  EXPECT_EQ(Floats(r->at("y")), (std::vector<float>{y0, y1}));
  EXPECT_THAT(text, HasSubstr("Add(%x, %bias) {name=\"add\", _kiln_broadcast_axis=1}"));
  EXPECT_THAT(text, HasSubstr("PRelu(%a, %slope) {name=\"prelu\", _kiln_broadcast_axis=1}"));
  EXPECT_THAT(text, HasSubstr("Reshape(%n, %flat_shape)"));
}

TEST(ImporterOpsetTest, PerActivationBatchNormIsRefusedByName) {
  OnnxModelBuilder m(7);
  m.Input("x", {"1", "2"});
  for (const char* p : {"s", "b", "mu", "v"}) m.Initializer(p, {2}, {1.f, 1.f});
  OnnxModelBuilder::AttrInt(m.Node("BatchNormalization", "bn", {"x", "s", "b", "mu", "v"}, {"y"}), "spatial", 0);
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(),
              HasSubstr("node 'bn' (BatchNormalization): attribute 'spatial' 0 (statistics per activation) is not "
                        "supported"));
}

TEST(ImporterOpsetTest, ClipWithOnlyMaxKeepsMinOmitted) {
  OnnxModelBuilder m(9);
  m.Input("x", {"2"});
  OnnxModelBuilder::AttrFloat(m.Node("Clip", "clip", {"x"}, {"y"}), "max", 0.f);
  m.Output("y");
  std::string text;
  auto r = ImportAndRun(m, Tensor::FromVector(DType::kFloat32, {2}, std::vector<float>{-3, 3}), &text);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(text, HasSubstr("Clip(%x, _, %clip_max)"));
  EXPECT_EQ(Floats(r->at("y")), (std::vector<float>{-3, 0}));
}

TEST(ImporterOpsetTest, ReduceAxesAttributeBecomesInput) {
  Tensor x = Tensor::FromVector(DType::kFloat32, {2, 2}, std::vector<float>{1, 2, 3, 4});
  OnnxModelBuilder old_model(11);
  old_model.Input("x", {"2", "2"});
  Ints(old_model.Node("ReduceSum", "rs", {"x"}, {"y"}), "axes", {1});
  old_model.Output("y");
  std::string text;
  auto a = ImportAndRun(old_model, x, &text);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(text, HasSubstr("ReduceSum(%x, %rs_axes)"));

  OnnxModelBuilder new_model(13);
  new_model.Input("x", {"2", "2"});
  I64Init(new_model, "axes", {1});
  new_model.Node("ReduceSum", "rs", {"x", "axes"}, {"y"});
  new_model.Output("y");
  auto b = ImportAndRun(new_model, x);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Floats(a->at("y")), (std::vector<float>{3, 7}));
  EXPECT_EQ(Floats(a->at("y")), Floats(b->at("y")));
}

TEST(ImporterOpsetTest, SqueezeAndSliceAttributesBecomeInputs) {
  OnnxModelBuilder m(9);
  m.Input("x", {"1", "4"});
  Ints(m.Node("Squeeze", "sq", {"x"}, {"t"}), "axes", {0});
  onnx::NodeProto* s = m.Node("Slice", "sl", {"t"}, {"y"});
  Ints(s, "starts", {1});
  Ints(s, "ends", {3});
  m.Output("y");
  std::string text;
  auto r = ImportAndRun(m, Tensor::FromVector(DType::kFloat32, {1, 4}, std::vector<float>{1, 2, 3, 4}), &text);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(text, HasSubstr("Squeeze(%x, %sq_axes)"));
  EXPECT_THAT(text, HasSubstr("Slice(%t, %sl_starts, %sl_ends)"));
  EXPECT_EQ(Floats(r->at("y")), (std::vector<float>{2, 3}));
}

TEST(ImporterOpsetTest, AttributeAndInputTogetherIsRejected) {
  OnnxModelBuilder m(11);
  m.Input("x", {"1", "4"});
  I64Init(m, "axes", {0});
  Ints(m.Node("Squeeze", "sq", {"x", "axes"}, {"y"}), "axes", {0});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("node 'sq' (Squeeze): attribute 'axes' and input 1 are both given"));
}

TEST(ImporterOpsetTest, SoftmaxBeforeOpset13RemembersTheOpset) {
  for (int64_t opset : {11, 13}) {
    OnnxModelBuilder m(opset);
    m.Input("x", {"2", "3"});
    m.Node("Softmax", "sm", {"x"}, {"y"});
    m.Output("y");
    auto g = ImportOnnxModel(m.Bytes(), {});
    ASSERT_TRUE(g.ok()) << g.status();
    const Node& n = *(*g)->nodes()[0];
    EXPECT_EQ(n.has_attr(kOpsetAttr), opset < 13) << opset;
    if (opset < 13) EXPECT_EQ(n.GetInt(kOpsetAttr, 0), 11);
  }
}

// x: f32[N,3,4] -> Reshape(x, Concat(Gather(Shape(x), 0), [-1])) -> f32[N,12].
OnnxModelBuilder ShapeSubgraphModel() {
  OnnxModelBuilder m;
  m.Input("x", {"N", "3", "4"});
  I64Init(m, "zero", {0}, /*scalar=*/true);
  I64Init(m, "minus_one", {-1});
  I64Init(m, "unsq_axes", {0});
  m.Node("Shape", "shape", {"x"}, {"s"});
  m.Node("Gather", "batch", {"s", "zero"}, {"b"});
  m.Node("Unsqueeze", "b1", {"b", "unsq_axes"}, {"b_1d"});
  OnnxModelBuilder::AttrInt(m.Node("Concat", "cat", {"b_1d", "minus_one"}, {"new_shape"}), "axis", 0);
  m.Node("Reshape", "reshape", {"x", "new_shape"}, {"y"});
  m.Output("y");
  return m;
}

TEST(ImporterOpsetTest, ShapeSubgraphFoldsToAConstantOnceShapesAreBound) {
  OnnxModelBuilder m = ShapeSubgraphModel();
  ImportOptions options;
  options.input_shapes["x"] = {2, 3, 4};
  auto g = ImportOnnxModel(m.Bytes(), options);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ((*g)->nodes().size(), 1u) << (*g)->ToText();
  const Node& reshape = *(*g)->nodes()[0];
  EXPECT_EQ(reshape.op_type(), "Reshape");
  ASSERT_TRUE(reshape.input(1)->is_constant());
  const Tensor& shape = reshape.input(1)->constant();
  EXPECT_EQ(std::vector<int64_t>(shape.data<int64_t>(), shape.data<int64_t>() + 2), (std::vector<int64_t>{2, -1}));
  EXPECT_EQ((*g)->FindValue("y")->type().ToString(), "f32[2,12]");
  // The constants only the folded nodes used are gone.
  EXPECT_EQ((*g)->FindValue("unsq_axes"), nullptr);
}

TEST(ImporterOpsetTest, UnboundSymbolInAShapeSubgraphNamesInputAndDim) {
  OnnxModelBuilder m = ShapeSubgraphModel();
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("node 'reshape' (Reshape): shape 'new_shape' must be a constant"));
  EXPECT_THAT(g.status().message(), HasSubstr("input 'x' dimension 0, which is symbolic ('N')"));
  EXPECT_THAT(g.status().message(), HasSubstr("--shape"));
}

TEST(ImporterOpsetTest, SplitAttributeBecomesInputAndOneNodePerOutput) {
  OnnxModelBuilder m(11);
  m.Input("x", {"5"});
  Ints(m.Node("Split", "sp", {"x"}, {"a", "b"}), "split", {2, 3});
  m.Output("a").Output("b");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ((*g)->nodes().size(), 2u);
  EXPECT_EQ((*g)->nodes()[0]->name(), "sp#0");
  EXPECT_EQ((*g)->nodes()[1]->name(), "sp#1");
  EXPECT_EQ((*g)->FindValue("b")->type().ToString(), "f32[3]");
}

TEST(ImporterOpsetTest, PadBeforeOpset11UsesAttributes) {
  OnnxModelBuilder m(10);
  m.Input("x", {"2"});
  onnx::NodeProto* n = m.Node("Pad", "pad", {"x"}, {"y"});
  Ints(n, "pads", {1, 0});
  OnnxModelBuilder::AttrFloat(n, "value", 9.f);
  m.Output("y");
  auto r = ImportAndRun(m, Tensor::FromVector(DType::kFloat32, {2}, std::vector<float>{1, 2}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats(r->at("y")), (std::vector<float>{9, 1, 2}));
}

TEST(ImporterOpsetTest, BadModelsAreRejectedWithNodeOpAndReason) {
  {
    OnnxModelBuilder m(99);
    m.Input("x", {"2"});
    m.Node("Relu", "r", {"x"}, {"y"});
    m.Output("y");
    auto g = ImportOnnxModel(m.Bytes(), {});
    EXPECT_THAT(g.status().message(), HasSubstr("ONNX opset 99 is not supported"));
  }
  {
    OnnxModelBuilder m;
    m.model().set_ir_version(2);
    m.Input("x", {"2"});
    m.Node("Relu", "r", {"x"}, {"y"});
    m.Output("y");
    auto g = ImportOnnxModel(m.Bytes(), {});
    EXPECT_THAT(g.status().message(), HasSubstr("IR version 2 is not supported"));
  }
  {
    OnnxModelBuilder m;
    m.Input("x", {"2"});
    m.Node("Relu", "r", {"x"}, {"y"})->set_domain("com.example");
    m.Output("y");
    auto g = ImportOnnxModel(m.Bytes(), {});
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), HasSubstr("unsupported operator: node 'r' (com.example.Relu)"));
  }
  {
    OnnxModelBuilder m;
    m.Input("x", {"2"});
    m.Node("NonMaxSuppression", "nms", {"x"}, {"y"});
    m.Output("y");
    auto g = ImportOnnxModel(m.Bytes(), {});
    EXPECT_EQ(g.status().message(),
              "unsupported operator: node 'nms' (NonMaxSuppression) (the supported ones: docs/operators.md)");
  }
  {
    OnnxModelBuilder m(18);
    m.Input("x", {"2"});
    I64Init(m, "pads", {1, 1});
    auto* a = m.Node("Pad", "pad", {"x", "pads"}, {"y"})->add_attribute();
    a->set_name("mode");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s("mirror");
    m.Output("y");
    auto g = ImportOnnxModel(m.Bytes(), {});
    EXPECT_EQ(g.status().message(), "node 'pad' (Pad): unsupported mode 'mirror'");
  }
}

TEST(ImporterOpsetTest, GraphInputShadowingAnInitializerStaysConstant) {
  OnnxModelBuilder m;
  m.Input("x", {"2", "2"});
  m.Input("shape", {"1"}, onnx::TensorProto::INT64);  // also an initializer below
  I64Init(m, "shape", {4});
  m.Node("Reshape", "r", {"x", "shape"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE((*g)->FindValue("shape")->is_constant());
  EXPECT_EQ((*g)->inputs().size(), 1u);
  EXPECT_EQ((*g)->FindValue("y")->type().ToString(), "f32[4]");
}

}  // namespace
}  // namespace kiln
