// Helpers of the operator-family tests: ONNX attributes and initializers the
// model builder lacks, and running a one-output model through import and the
// reference interpreter.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "tests/compiler_core/frontend/onnx_model_builder.h"

namespace kiln::testing {

inline void AttrInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

inline void AttrString(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// An int64 [n] initializer.
inline void IntInit(OnnxModelBuilder& m, const std::string& name, const std::vector<int64_t>& v) {
  onnx::TensorProto* t = m.graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
}

inline std::vector<float> Iota(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

inline Tensor F32(std::vector<int64_t> dims, std::vector<float> v) {
  return Tensor::FromVector(DType::kFloat32, std::move(dims), v);
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

// Imports `m` and runs it on x (f32) -> the output named "y".
inline Tensor RunModel(OnnxModelBuilder& m, const Tensor& x, const ImportOptions& options = {}) {
  auto g = ImportOnnxModel(m.Bytes(), options);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return Tensor();
  auto out = Evaluate(**g, {{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return Tensor();
  return out->at("y");
}

}  // namespace kiln::testing
