// ONNX import: textual IR of imported models, constants, shape binding, and one
// test per error class (malformed bytes, unsupported op, dangling name, shapes).
#include "compiler_core/frontend/onnx_importer.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/frontend/onnx_model_builder.h"

namespace kiln {
namespace {

using ::kiln::testing::OnnxModelBuilder;
using ::testing::HasSubstr;

// x[2,3] @ w[3,4] + b[4] -> Relu, with b from a Constant node.
OnnxModelBuilder SmallModel() {
  OnnxModelBuilder m;
  m.Input("x", {"2", "3"});
  m.Initializer("w", {3, 4}, std::vector<float>(12, 0.5f));
  m.Node("MatMul", "mm", {"x", "w"}, {"t"});
  auto* c = m.Node("Constant", "c", {}, {"b"});
  OnnxModelBuilder::AttrTensor(c, "value", OnnxModelBuilder::FloatTensor("", {4}, {1, 2, 3, 4}));
  m.Node("Add", "add", {"t", "b"}, {"u"});
  m.Node("Relu", "r", {"u"}, {"y"});
  m.Output("y");
  return m;
}

TEST(OnnxImporterTest, SmallModelToText) {
  auto g = ImportOnnxModel(SmallModel().Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->ToText(),
            "graph main(%x: f32[2,3]) -> (%y) {\n"
            "  %w: f32[3,4] = const f32[3,4]\n"
            "  %b: f32[4] = const f32[4]{1,2,3,4}\n"
            "  %t: f32[2,4] = MatMul(%x, %w) {name=\"mm\"}\n"
            "  %u: f32[2,4] = Add(%t, %b) {name=\"add\"}\n"
            "  %y: f32[2,4] = Relu(%u) {name=\"r\"}\n"
            "}\n");
  EXPECT_EQ((*g)->opset_version(), 13);
}

TEST(OnnxImporterTest, AttributesOptionalInputsAndShadowedInitializers) {
  OnnxModelBuilder m(11);
  m.Input("a", {"2", "3"});
  m.Input("w", {"4", "3"});  // shadows the initializer: stays a constant
  m.Initializer("w", {4, 3}, std::vector<float>(12, 1.0f));
  auto* n = m.Node("Gemm", "", {"a", "w", ""}, {"y"});  // unnamed, C omitted
  OnnxModelBuilder::AttrInt(n, "transB", 1);
  OnnxModelBuilder::AttrFloat(n, "alpha", 0.5f);
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->ToText(),
            "graph main(%a: f32[2,3]) -> (%y) {\n"
            "  %w: f32[4,3] = const f32[4,3]\n"
            "  %y: f32[2,4] = Gemm(%a, %w, _) {name=\"Gemm_0\", alpha=0.5, transB=1}\n"
            "}\n");
  EXPECT_EQ((*g)->opset_version(), 11);
}

TEST(OnnxImporterTest, NodesOutOfOrderAreSorted) {
  OnnxModelBuilder m;
  m.Input("x", {"2"});
  m.Node("Relu", "second", {"t"}, {"y"});
  m.Node("Neg", "first", {"x"}, {"t"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->nodes()[0]->name(), "first");
  EXPECT_EQ((*g)->nodes()[1]->name(), "second");
}

TEST(OnnxImporterTest, CycleIsAnError) {
  OnnxModelBuilder m;
  m.Input("x", {"2"});
  m.Node("Add", "a0", {"x", "q"}, {"p"});
  m.Node("Relu", "r0", {"p"}, {"q"});
  m.Output("q");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("node 'a0' (Add): node is part of a cycle"));
}

TEST(OnnxImporterTest, SymbolicDimsPropagateAndBind) {
  OnnxModelBuilder m;
  m.Input("x", {"batch", "3"});
  m.Input("z", {"batch", "1"});
  m.Node("Add", "add0", {"x", "z"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->FindValue("y")->type().ToString(), "f32[batch,3]");

  ImportOptions opts;
  opts.input_shapes["x"] = {8, 3};
  g = ImportOnnxModel(m.Bytes(), opts);
  ASSERT_TRUE(g.ok()) << g.status();
  // Binding x binds 'batch' in z too.
  EXPECT_EQ((*g)->FindValue("z")->type().ToString(), "f32[8,1]");
  EXPECT_EQ((*g)->FindValue("y")->type().ToString(), "f32[8,3]");
}

TEST(OnnxImporterTest, ShapeBindingErrors) {
  OnnxModelBuilder m;
  m.Input("x", {"batch", "3"});
  m.Node("Relu", "r", {"x"}, {"y"});
  m.Output("y");
  ImportOptions opts;
  opts.input_shapes["nope"] = {1, 3};
  auto g = ImportOnnxModel(m.Bytes(), opts);
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("nope"));

  opts.input_shapes.clear();
  opts.input_shapes["x"] = {1, 3, 1};
  g = ImportOnnxModel(m.Bytes(), opts);
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("rank"));

  opts.input_shapes["x"] = {1, 4};
  g = ImportOnnxModel(m.Bytes(), opts);
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("dimension 1 is 3"));
}

TEST(OnnxImporterTest, InputWithoutShapeNeedsBinding) {
  OnnxModelBuilder m;
  m.Input("x", {});
  m.graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  m.Node("Sigmoid", "s", {"x"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("graph input 'x' has no shape"));
  ImportOptions opts;
  opts.input_shapes["x"] = {2, 5};
  g = ImportOnnxModel(m.Bytes(), opts);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->FindValue("y")->type().ToString(), "f32[2,5]");
}

TEST(OnnxImporterTest, SymbolNeededStaticNamesInputAndDimension) {
  OnnxModelBuilder m;
  m.Input("x", {"2", "k"});
  m.Initializer("w", {3, 4}, std::vector<float>(12, 0.f));
  m.Node("MatMul", "mm", {"x", "w"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("node 'mm' (MatMul): input 'x' dimension 1 is symbolic ('k')"));
}

TEST(OnnxImporterTest, MalformedBytes) {
  auto g = ImportOnnxModel("\xff\xff\xff\xff garbage", {});
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("malformed ONNX model"));
  g = ImportOnnxModel("", {});  // parses, but has no graph
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("malformed ONNX model"));
}

TEST(OnnxImporterTest, UnsupportedOperator) {
  OnnxModelBuilder m;
  m.Input("x", {"1", "3", "8", "8"});
  m.Initializer("w", {4, 3, 3, 3}, std::vector<float>(108, 0.f));
  m.Node("FancyConv", "conv1", {"x", "w"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(),
            "unsupported operator: node 'conv1' (FancyConv) (the supported ones: docs/operators.md)");
}

TEST(OnnxImporterTest, EveryUnsupportedOperatorIsNamedAtOnce) {
  OnnxModelBuilder m;
  m.Input("x", {"4"});
  m.Node("Relu", "r", {"x"}, {"a"});
  m.Node("NonZero", "nz", {"a"}, {"b"});
  m.Node("Loop", "loop", {"b"}, {"c"});
  m.Output("c");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(),
            "unsupported operators: node 'nz' (NonZero), node 'loop' (Loop) (the supported ones: docs/operators.md)");
}

TEST(OnnxImporterTest, UnknownDomain) {
  OnnxModelBuilder m;
  m.Input("x", {"2"});
  m.Node("FusedGelu", "g0", {"x"}, {"y"})->set_domain("com.microsoft");
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(),
            "unsupported operator: node 'g0' (com.microsoft.FusedGelu) (the supported ones: docs/operators.md)");
}

TEST(OnnxImporterTest, UnsupportedAttributeIsRejected) {
  OnnxModelBuilder m;
  m.Input("x", {"2"});
  OnnxModelBuilder::AttrInt(m.Node("Add", "add0", {"x", "x"}, {"y"}), "broadcast", 1);
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(), "node 'add0' (Add): unsupported attribute 'broadcast'");
}

TEST(OnnxImporterTest, DanglingInputName) {
  OnnxModelBuilder m;
  m.Input("x", {"2"});
  m.Node("Add", "add0", {"x", "foo"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(),
            "node 'add0' (Add): input 'foo' is not defined by any node, input or initializer");
}

TEST(OnnxImporterTest, ShapeMismatch) {
  OnnxModelBuilder m;
  m.Input("x", {"2", "3"});
  m.Input("z", {"4"});
  m.Node("Add", "add0", {"x", "z"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(), "node 'add0' (Add): shapes f32[2,3] and f32[4] cannot be broadcast");
}

TEST(OnnxImporterTest, OtherMalformedGraphs) {
  {  // value defined twice
    OnnxModelBuilder m;
    m.Input("x", {"2"});
    m.Node("Relu", "r0", {"x"}, {"y"});
    m.Node("Neg", "n0", {"x"}, {"y"});
    m.Output("y");
    auto g = ImportOnnxModel(m.Bytes(), {});
    EXPECT_THAT(g.status().message(), HasSubstr("node 'n0' (Neg): output 'y' is already defined"));
  }
  {  // undefined graph output
    OnnxModelBuilder m;
    m.Input("x", {"2"});
    m.Node("Relu", "r0", {"x"}, {"y"});
    m.Output("nothing");
    auto g = ImportOnnxModel(m.Bytes(), {});
    EXPECT_THAT(g.status().message(), HasSubstr("graph output 'nothing'"));
  }
  {  // initializer whose raw_data is short
    OnnxModelBuilder m;
    m.Input("x", {"2"});
    auto t = OnnxModelBuilder::FloatTensor("w", {1000}, {1.f});
    *m.graph()->add_initializer() = t;
    m.Node("Add", "a", {"x", "w"}, {"y"});
    m.Output("y");
    auto g = ImportOnnxModel(m.Bytes(), {});
    EXPECT_THAT(g.status().message(), HasSubstr("tensor 'w': raw_data has 4 bytes, expected 4000"));
  }
  {  // absurd input shape
    OnnxModelBuilder m;
    m.Input("x", {"1000000000", "1000000000", "1000000000"});
    m.Node("Relu", "r0", {"x"}, {"y"});
    m.Output("y");
    auto g = ImportOnnxModel(m.Bytes(), {});
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), HasSubstr("graph input 'x'"));
  }
  {  // wrong arity, wrong attribute value
    OnnxModelBuilder m;
    m.Input("x", {"2", "2"});
    OnnxModelBuilder::AttrInt(m.Node("Gemm", "gm", {"x", "x"}, {"y"}), "transA", 2);
    m.Node("Relu", "r", {"x", "x"}, {"z"});
    m.Output("y");
    auto g = ImportOnnxModel(m.Bytes(), {});
    EXPECT_EQ(g.status().message(), "node 'gm' (Gemm): attribute 'transA' must be 0 or 1, got 2");
  }
  {  // no default-domain opset
    OnnxModelBuilder m;
    m.model().mutable_opset_import(0)->set_domain("com.example");
    m.Input("x", {"2"});
    m.Node("Relu", "r0", {"x"}, {"y"});
    m.Output("y");
    auto g = ImportOnnxModel(m.Bytes(), {});
    EXPECT_THAT(g.status().message(), HasSubstr("opset_import"));
  }
}

// Truncations and bit flips of a valid model: an error or a valid graph, never a crash.
TEST(OnnxImporterTest, FuzzTruncationsAndBitFlips) {
  OnnxModelBuilder m = SmallModel();
  OnnxModelBuilder::AttrInt(m.Node("Gemm", "gm", {"x", "w", "b"}, {"z"}), "transB", 0);
  m.Output("z");
  const std::string bytes = m.Bytes();
  ASSERT_TRUE(ImportOnnxModel(bytes, {}).ok());
  int ok = 0, failed = 0;
  for (size_t len = 0; len < bytes.size(); ++len) {
    auto g = ImportOnnxModel(std::string_view(bytes).substr(0, len), {});
    (g.ok() ? ok : failed)++;
    if (!g.ok()) EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
  }
  std::mt19937 rng(42);
  for (int iter = 0; iter < 10000; ++iter) {
    std::string mutated = bytes;
    int flips = 1 + iter % 4;
    for (int f = 0; f < flips; ++f) {
      size_t pos = rng() % mutated.size();
      mutated[pos] = static_cast<char>(mutated[pos] ^ (1u << (rng() % 8)));
    }
    auto g = ImportOnnxModel(mutated, {});
    (g.ok() ? ok : failed)++;
    if (!g.ok()) EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
  }
  EXPECT_GT(failed, 0);
}

}  // namespace
}  // namespace kiln
