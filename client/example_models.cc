// Example models built with ONNX's own protobuf schema.
#include "client/example_models.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "onnx/onnx.pb.h"

namespace kiln::client {
namespace {

Tensor RandomTensor(std::vector<int64_t> dims, uint64_t seed, float scale) {
  Tensor t(DType::kFloat32, std::move(dims));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

void AddInitializer(onnx::GraphProto* g, const std::string& name, const Tensor& t) {
  onnx::TensorProto* p = g->add_initializer();
  p->set_name(name);
  p->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : t.dims()) p->add_dims(d);
  p->set_raw_data(std::string(t.bytes()));
}

void AddNode(onnx::GraphProto* g, const std::string& op, const std::string& name,
             std::vector<std::string> inputs, const std::string& output) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& i : inputs) n->add_input(i);
  n->add_output(output);
}

void SetType(onnx::ValueInfoProto* v, const std::string& name, std::vector<std::string> dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (const std::string& d : dims) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (!d.empty() && d[0] >= '0' && d[0] <= '9') {
      dim->set_dim_value(std::stoll(d));
    } else {
      dim->set_dim_param(d);
    }
  }
}

ExampleModel MakeMlp() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("kiln example");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("mlp");
  SetType(g->add_input(), "x", {"batch", "64"});
  SetType(g->add_output(), "y", {"batch", "32"});
  AddInitializer(g, "w1", RandomTensor({64, 128}, 1, 0.2f));
  AddInitializer(g, "b1", RandomTensor({128}, 2, 0.1f));
  AddInitializer(g, "w2", RandomTensor({32, 128}, 3, 0.2f));
  AddInitializer(g, "b2", RandomTensor({32}, 4, 0.1f));
  AddInitializer(g, "center", RandomTensor({1, 32}, 5, 0.1f));
  AddInitializer(g, "scale", Tensor::FromVector<float>(DType::kFloat32, {}, {3.0f}));
  AddInitializer(g, "norm", RandomTensor({32}, 6, 1.0f));
  // Keep the divisor away from zero.
  for (const char* name : {"norm"}) {
    for (auto& init : *g->mutable_initializer()) {
      if (init.name() != name) continue;
      std::string raw = init.raw_data();
      auto* f = reinterpret_cast<float*>(raw.data());
      for (size_t i = 0; i < raw.size() / 4; ++i) f[i] = 1.5f + f[i];
      init.set_raw_data(raw);
    }
  }
  AddNode(g, "MatMul", "fc1", {"x", "w1"}, "h1");
  AddNode(g, "Add", "fc1_bias", {"h1", "b1"}, "h2");
  AddNode(g, "Relu", "relu1", {"h2"}, "h3");
  AddNode(g, "Gemm", "fc2", {"h3", "w2", "b2"}, "h4");
  auto* trans_b = g->mutable_node(g->node_size() - 1)->add_attribute();
  trans_b->set_name("transB");
  trans_b->set_type(onnx::AttributeProto::INT);
  trans_b->set_i(1);
  AddNode(g, "Sigmoid", "gate", {"h4"}, "h5");
  AddNode(g, "Sub", "center_sub", {"h5", "center"}, "h6");
  AddNode(g, "Mul", "scale_mul", {"h6", "scale"}, "h7");
  AddNode(g, "Div", "normalize", {"h7", "norm"}, "y");

  ExampleModel out;
  model.SerializeToString(&out.onnx_bytes);
  out.shapes["x"] = {8, 64};
  out.inputs.emplace("x", RandomTensor({8, 64}, 42, 1.0f));
  return out;
}

}  // namespace

std::vector<std::string> ExampleModelNames() { return {"mlp"}; }

absl::StatusOr<ExampleModel> MakeExampleModel(const std::string& name) {
  if (name == "mlp") return MakeMlp();
  return absl::InvalidArgumentError(absl::StrCat("no example model '", name, "'; known: ",
                                                 absl::StrJoin(ExampleModelNames(), ", ")));
}

}  // namespace kiln::client
