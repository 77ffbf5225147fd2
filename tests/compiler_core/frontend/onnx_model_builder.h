// Test helper: builds small ONNX models with the generated onnx:: messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "onnx/onnx.pb.h"

namespace kiln::testing {

class OnnxModelBuilder {
 public:
  explicit OnnxModelBuilder(int64_t opset = 13) {
    model_.set_ir_version(8);
    auto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model_.mutable_graph()->set_name("main");
  }

  onnx::GraphProto* graph() { return model_.mutable_graph(); }
  onnx::ModelProto& model() { return model_; }

  // Dims given as strings: digits are extents, anything else a symbol ("batch").
  OnnxModelBuilder& Input(const std::string& name, const std::vector<std::string>& dims, int elem_type = 1) {
    auto* vi = graph()->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (const std::string& d : dims) {
      auto* dim = shape->add_dim();
      if (!d.empty() && d.find_first_not_of("0123456789") == std::string::npos) {
        dim->set_dim_value(std::stoll(d));
      } else {
        dim->set_dim_param(d);
      }
    }
    return *this;
  }

  OnnxModelBuilder& Initializer(const std::string& name, const std::vector<int64_t>& dims,
                                const std::vector<float>& values) {
    *graph()->add_initializer() = FloatTensor(name, dims, values);
    return *this;
  }

  static onnx::TensorProto FloatTensor(const std::string& name, const std::vector<int64_t>& dims,
                                       const std::vector<float>& values) {
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t.add_dims(d);
    t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    return t;
  }

  onnx::NodeProto* Node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs) {
    auto* n = graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }

  static void AttrInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void AttrFloat(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void AttrTensor(onnx::NodeProto* n, const std::string& name, const onnx::TensorProto& t) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = t;
  }

  OnnxModelBuilder& Output(const std::string& name) {
    graph()->add_output()->set_name(name);
    return *this;
  }

  std::string Bytes() const { return model_.SerializeAsString(); }

 private:
  onnx::ModelProto model_;
};

}  // namespace kiln::testing
