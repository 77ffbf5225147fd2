// Shared by the model tests: where the exported models are, and inputs for them.
#pragma once

#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "base/file.h"
#include "compiler_core/ir/graph.h"

namespace kiln {

inline std::string ModelPath(const std::string& name) { return std::string(KILN_TEST_MODELS_DIR) + "/" + name; }

inline std::string ReadAll(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::string();
}

inline std::map<std::string, Tensor> RandomInputs(const Graph& g) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::map<std::string, Tensor> inputs;
  for (const Value* v : g.inputs()) {
    Tensor t(v->type().dtype, v->type().StaticDims());
    if (t.dtype() == DType::kFloat32) {
      for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = normal(rng);
    } else if (t.dtype() == DType::kInt64) {
      for (int64_t i = 0; i < t.num_elements(); ++i) t.data<int64_t>()[i] = static_cast<int64_t>(rng() % 100);
    }
    inputs.emplace(v->name(), std::move(t));
  }
  return inputs;
}

}  // namespace kiln
