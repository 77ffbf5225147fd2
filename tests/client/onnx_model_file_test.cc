// ONNX models with external data: the CLI inlines the tensors from their
// files beside the model, so the model imports and evaluates as if embedded;
// a location outside the model's folder, a missing file and a range past the
// file's end are refused naming the tensor and the file.
#include "client/onnx_model_file.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx.pb.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// y = x + w, w = {1.5, -2} stored at `location` (offset 8, length 8).
std::string ModelWithExternalWeight(const std::string& location) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  for (const char* name : {"x", "y"}) {
    onnx::ValueInfoProto* v = name[0] == 'x' ? g->add_input() : g->add_output();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(2);
  }
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [k, v] : {std::pair<const char*, std::string>{"location", location}, {"offset", "8"}, {"length", "8"}}) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Add");
  n->set_name("add");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  return m.SerializeAsString();
}

class OnnxModelFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kiln_model_file_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "sub");
    const float w[2] = {1.5f, -2.f};
    std::string bytes(8, 'J');
    bytes.append(reinterpret_cast<const char*>(w), sizeof(w));
    std::ofstream(dir_ / "weights.bin", std::ios::binary) << bytes;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(OnnxModelFileTest, ExternalTensorsAreInlinedAndEvaluate) {
  auto bytes = ReadOnnxModelFile(Write("m.onnx", ModelWithExternalWeight("weights.bin")));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto g = ImportOnnxModel(*bytes, {});
  ASSERT_TRUE(g.ok()) << g.status();
  auto out = Evaluate(**g, {{"x", Tensor::FromVector(DType::kFloat32, {2}, std::vector<float>{1, 1})}});
  ASSERT_TRUE(out.ok()) << out.status();
  const float* y = out->at("y").data<float>();
  EXPECT_EQ(y[0], 2.5f);
  EXPECT_EQ(y[1], -1.f);
}

TEST_F(OnnxModelFileTest, EmbeddedModelsAreReadAsTheyAre) {
  const std::string original = ModelWithExternalWeight("weights.bin");
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(original));
  onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_external_data();
  w->set_data_location(onnx::TensorProto::DEFAULT);
  w->add_float_data(1.5f);
  w->add_float_data(-2.f);
  const std::string embedded = m.SerializeAsString();
  auto bytes = ReadOnnxModelFile(Write("e.onnx", embedded));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, embedded);
}

TEST_F(OnnxModelFileTest, BadLocationsAreRefusedNamingTensorAndFile) {
  auto outside = ReadOnnxModelFile(Write("sub/m.onnx", ModelWithExternalWeight("../weights.bin")));
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(outside.status().message(),
              HasSubstr("tensor 'w': external data location '../weights.bin' is outside the model's folder"));
  auto absolute = ReadOnnxModelFile(Write("a.onnx", ModelWithExternalWeight((dir_ / "weights.bin").string())));
  EXPECT_THAT(absolute.status().message(), HasSubstr("is outside the model's folder"));
  auto missing = ReadOnnxModelFile(Write("n.onnx", ModelWithExternalWeight("nope.bin")));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("tensor 'w': cannot open external data file"));
  EXPECT_THAT(missing.status().message(), HasSubstr("nope.bin"));
  Write("short.bin", "0123456789");
  auto past_end = ReadOnnxModelFile(Write("s.onnx", ModelWithExternalWeight("short.bin")));
  EXPECT_EQ(past_end.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(past_end.status().message(), HasSubstr("tensor 'w': bytes [8, 16) are beyond the end of"));
}

}  // namespace
}  // namespace kiln
