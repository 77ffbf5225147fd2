// Graph <-> kiln.v1.Graph round trips and tensor conversions.
#include "compiler_core/frontend/graph_proto.h"

#include <random>

#include "compiler_core/frontend/onnx_importer.h"
#include "gmock/gmock.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/frontend/onnx_model_builder.h"

namespace kiln {
namespace {

using ::kiln::testing::OnnxModelBuilder;
using ::testing::HasSubstr;

std::unique_ptr<Graph> ImportedModel() {
  OnnxModelBuilder m(12);
  m.Input("x", {"batch", "3"});
  m.Initializer("w", {3, 4}, std::vector<float>(12, 0.25f));
  m.Initializer("c", {4}, {1, 2, 3, 4});
  auto* g = m.Node("Gemm", "fc", {"x", "w", "c"}, {"h"});
  OnnxModelBuilder::AttrFloat(g, "alpha", 0.5f);
  m.Node("Sigmoid", "s", {"h"}, {"y"});
  m.Node("MatMul", "mm", {"y", "w2"}, {"z"});
  m.Initializer("w2", {4}, {1, 1, 1, 1});
  auto* l = m.Node("LeakyRelu", "lr", {"z"}, {"out"});
  OnnxModelBuilder::AttrFloat(l, "alpha", 0.2f);
  m.Output("out");
  m.Output("h");
  auto graph = ImportOnnxModel(m.Bytes(), {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return graph.ok() ? std::move(*graph) : nullptr;
}

TEST(GraphProtoTest, RoundTripPreservesText) {
  auto g = ImportedModel();
  ASSERT_NE(g, nullptr);
  kiln::v1::Graph proto;
  GraphToProto(*g, &proto);
  EXPECT_EQ(proto.opset_version(), 12);
  EXPECT_EQ(proto.initializers_size(), 3);
  EXPECT_EQ(proto.value_info_size(), 4);
  // Through the wire bytes too.
  kiln::v1::Graph parsed;
  ASSERT_TRUE(parsed.ParseFromString(proto.SerializeAsString()));
  auto back = GraphFromProto(parsed);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->ToText(), g->ToText());
  EXPECT_EQ((*back)->opset_version(), 12);
  // Constant values survive byte for byte.
  EXPECT_EQ((*back)->FindValue("w")->constant().bytes(), g->FindValue("w")->constant().bytes());
  // And a second trip is a fixed point.
  kiln::v1::Graph again;
  GraphToProto(**back, &again);
  EXPECT_EQ(again.SerializeAsString(), proto.SerializeAsString());
}

TEST(GraphProtoTest, RoundTripKeepsAllAttributeKinds) {
  Graph g;
  Value* x = *g.AddInput("x", TensorType::Static(DType::kFloat32, {2}));
  Value* y = *g.AddValue("y");
  Tensor t = Tensor::FromVector(DType::kInt64, {2}, std::vector<int64_t>{7, 8});
  // Identity accepts no attributes, so this graph is checked only structurally:
  // serialize and compare the proto of the parse of the proto.
  ASSERT_TRUE(g.AddNode("Identity", "id", {x}, {y},
                        {{"i", int64_t{3}},
                         {"f", 1.5f},
                         {"s", std::string("str")},
                         {"t", t},
                         {"ints", std::vector<int64_t>{1, 2}},
                         {"floats", std::vector<float>{}},
                         {"strings", std::vector<std::string>{"a", "b"}}})
                  .ok());
  y->set_type(TensorType::Static(DType::kFloat32, {2}));
  g.AddOutput(y);
  kiln::v1::Graph proto;
  GraphToProto(g, &proto);
  ASSERT_EQ(proto.nodes(0).attributes_size(), 7);
  // GraphFromProto runs shape inference, which rejects the unknown attributes
  // and names the node.
  auto back = GraphFromProto(proto);
  ASSERT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(back.status().message(), HasSubstr("node 'id' (Identity): unsupported attribute"));
  // The empty float list stays a (present) empty list on the wire.
  bool saw_floats = false;
  for (const auto& a : proto.nodes(0).attributes()) {
    if (a.name() == "floats") {
      saw_floats = true;
      EXPECT_EQ(a.value_case(), kiln::v1::Attribute::kFloats);
    }
    if (a.name() == "t") {
      auto tt = TensorFromProto(a.t());
      ASSERT_TRUE(tt.ok());
      EXPECT_EQ(tt->DebugString(), "i64[2]{7,8}");
    }
  }
  EXPECT_TRUE(saw_floats);
}

TEST(GraphProtoTest, BadProtos) {
  auto g = ImportedModel();
  ASSERT_NE(g, nullptr);
  kiln::v1::Graph good;
  GraphToProto(*g, &good);
  {
    kiln::v1::Graph p = good;
    p.mutable_nodes(1)->set_inputs(0, "nope");
    auto r = GraphFromProto(p);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), "node 's' (Sigmoid): input 'nope' is not defined by any node, input or initializer");
  }
  {
    kiln::v1::Graph p = good;
    p.mutable_initializers(0)->mutable_data()->resize(3);
    auto r = GraphFromProto(p);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("tensor 'w'"));
  }
  {  // nodes swapped: not in topological order
    kiln::v1::Graph p = good;
    p.mutable_nodes()->SwapElements(0, 1);
    auto r = GraphFromProto(p);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("node 's' (Sigmoid): input 'h' is used before node 'fc'"));
  }
  {  // declared type disagrees with inference
    kiln::v1::Graph p = good;
    p.mutable_value_info(0)->mutable_type()->mutable_dims(1)->set_value(5);
    auto r = GraphFromProto(p);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("node 'fc' (Gemm): declared type f32[batch,5]"));
  }
  {
    kiln::v1::Graph p = good;
    p.mutable_nodes(0)->set_op_type("FancyConv");
    auto r = GraphFromProto(p);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), "node 'fc' (FancyConv): unsupported operator");
  }
  {
    kiln::v1::Graph p = good;
    p.mutable_inputs(0)->mutable_type()->mutable_dims(1)->set_value(-3);
    EXPECT_EQ(GraphFromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  }
  {
    kiln::v1::Graph p = good;
    p.mutable_nodes(0)->add_outputs("x");  // redefines a graph input
    EXPECT_EQ(GraphFromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// Bit flips of a valid wire graph: an error or a valid graph, never a crash.
TEST(GraphProtoTest, FuzzBitFlips) {
  auto g = ImportedModel();
  ASSERT_NE(g, nullptr);
  kiln::v1::Graph proto;
  GraphToProto(*g, &proto);
  const std::string bytes = proto.SerializeAsString();
  std::mt19937 rng(7);
  int parsed = 0;
  google::protobuf::LogSilencer quiet;  // flipped strings trip protobuf's UTF-8 log
  for (int iter = 0; iter < 5000; ++iter) {
    std::string mutated = bytes;
    for (int f = 0; f < 1 + iter % 3; ++f) {
      size_t pos = rng() % mutated.size();
      mutated[pos] = static_cast<char>(mutated[pos] ^ (1u << (rng() % 8)));
    }
    kiln::v1::Graph p;
    if (!p.ParseFromString(mutated)) continue;
    ++parsed;
    auto r = GraphFromProto(p);
    if (!r.ok()) EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  EXPECT_GT(parsed, 0);
}

TEST(GraphProtoTest, TensorProtoRoundTrip) {
  Tensor t = Tensor::FromVector(DType::kFloat32, {2, 2}, std::vector<float>{1, 2, 3, 4});
  kiln::v1::Tensor p;
  TensorToProto(t, &p);
  auto back = TensorFromProto(p);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->DebugString(), "f32[2,2]{1,2,3,4}");
  p.set_dtype(kiln::v1::DATA_TYPE_UNSPECIFIED);
  EXPECT_EQ(TensorFromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  p.set_dtype(kiln::v1::FLOAT32);
  p.add_dims(-1);
  EXPECT_EQ(TensorFromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GraphProtoTest, TensorFromOnnxTypedFields) {
  onnx::TensorProto p;
  p.set_name("f");
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(3);
  for (float v : {1.5f, -2.f, 3.f}) p.add_float_data(v);
  auto t = TensorFromOnnx(p);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->DebugString(), "f32[3]{1.5,-2,3}");

  onnx::TensorProto i64;
  i64.set_data_type(onnx::TensorProto::INT64);
  i64.add_dims(2);
  i64.add_int64_data(-7);
  i64.add_int64_data(1LL << 40);
  t = TensorFromOnnx(i64);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->DebugString(), "i64[2]{-7,1099511627776}");

  onnx::TensorProto i32;
  i32.set_data_type(onnx::TensorProto::INT32);
  i32.add_int32_data(42);  // rank 0: one element
  t = TensorFromOnnx(i32);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->DebugString(), "i32[]{42}");

  onnx::TensorProto b;
  b.set_data_type(onnx::TensorProto::BOOL);
  b.add_dims(2);
  b.add_int32_data(1);
  b.add_int32_data(0);
  t = TensorFromOnnx(b);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->DebugString(), "bool[2]{true,false}");

  onnx::TensorProto d;
  d.set_data_type(onnx::TensorProto::DOUBLE);
  d.add_dims(1);
  d.add_double_data(0.25);
  t = TensorFromOnnx(d);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->DebugString(), "f64[1]{0.25}");

  onnx::TensorProto raw = OnnxModelBuilder::FloatTensor("r", {2}, {5, 6});
  t = TensorFromOnnx(raw);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->DebugString(), "f32[2]{5,6}");
}

TEST(GraphProtoTest, TensorFromOnnxErrors) {
  onnx::TensorProto p;
  p.set_name("w");
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(4);
  p.add_float_data(1);
  auto t = TensorFromOnnx(p);
  ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(), "tensor 'w': float_data has 1 elements, expected 4");

  p.set_data_type(onnx::TensorProto::STRING);
  EXPECT_EQ(TensorFromOnnx(p).status().code(), absl::StatusCode::kInvalidArgument);

  onnx::TensorProto ext = OnnxModelBuilder::FloatTensor("e", {1}, {1});
  ext.set_data_location(onnx::TensorProto::EXTERNAL);
  t = TensorFromOnnx(ext);
  ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("external data"));

  onnx::TensorProto huge;
  huge.set_data_type(onnx::TensorProto::FLOAT);
  for (int i = 0; i < 4; ++i) huge.add_dims(1 << 20);
  EXPECT_EQ(TensorFromOnnx(huge).status().code(), absl::StatusCode::kInvalidArgument);
  huge.clear_dims();
  huge.add_dims(-2);
  EXPECT_EQ(TensorFromOnnx(huge).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln
