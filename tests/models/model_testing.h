// Shared by the model tests: where the exported models are, inputs for them,
// what the reference interpreter computes from those, and a compiled
// package's session run and compared with it.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/file.h"
#include "client/runtime/absl_interop.h"
#include "client/runtime/session.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"
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

// An exported model's bytes, random inputs for its graph (RandomInputs), and
// the reference interpreter's outputs from them on the graph as imported.
struct ModelReference {
  std::string bytes;
  std::map<std::string, Tensor> inputs;
  std::map<std::string, Tensor> outputs;
};

// The reference run of `file` (under ModelPath); FAILED_PRECONDITION naming
// the path when the kiln_models_export fixture has not written it.
inline absl::StatusOr<ModelReference> EvaluateModel(const std::string& file) {
  ModelReference ref;
  absl::StatusOr<std::string> bytes = ReadFile(ModelPath(file));
  if (!bytes.ok() || bytes->empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("missing ", ModelPath(file), " (the kiln_models_export fixture writes it)"));
  }
  ref.bytes = std::move(*bytes);
  absl::StatusOr<std::unique_ptr<Graph>> graph = ImportOnnxModel(ref.bytes, {});
  if (!graph.ok()) return graph.status();
  ref.inputs = RandomInputs(**graph);
  absl::StatusOr<std::map<std::string, Tensor>> outputs = Evaluate(**graph, ref.inputs);
  if (!outputs.ok()) return outputs.status();
  ref.outputs = std::move(*outputs);
  return ref;
}

// An output of a session run and its largest absolute error.
struct OutputError {
  std::string name;
  double worst = 0;
};

// Sets the reference's inputs on `session`, runs it, and compares every
// output with the reference's: |got - want| <= 1e-4 + 1e-3 |want| (the first
// element past it reported, naming `file`). The outputs compared, each with
// its largest error; none when the session could not take the inputs or run.
inline std::vector<OutputError> RunAndCompare(runtime::Session& session, const ModelReference& ref,
                                              const std::string& file) {
  std::vector<OutputError> compared;
  for (const auto& [name, t] : ref.inputs) {
    absl::Status set = runtime::ToAbsl(session.SetInput(name, t.raw(), t.size_bytes()));
    EXPECT_TRUE(set.ok()) << name << ": " << set;
    if (!set.ok()) return compared;
  }
  absl::Status ran = runtime::ToAbsl(session.Run());
  EXPECT_TRUE(ran.ok()) << ran;
  if (!ran.ok()) return compared;
  for (int i = 0; i < session.num_outputs(); ++i) {
    const std::string& name = session.output_info(i).name;
    const Tensor& want = ref.outputs.at(name);
    EXPECT_EQ(session.OutputBytes(i), static_cast<size_t>(want.size_bytes())) << name;
    if (session.OutputBytes(i) != static_cast<size_t>(want.size_bytes())) continue;
    const float* got = static_cast<const float*>(session.OutputData(i));
    double worst = 0;
    for (int64_t j = 0; j < want.num_elements(); ++j) {
      const double r = want.data<float>()[j];
      const double err = std::fabs(got[j] - r);
      EXPECT_LE(err, 1e-4 + 1e-3 * std::fabs(r)) << file << " " << name << "[" << j << "]";
      if (err > 1e-4 + 1e-3 * std::fabs(r)) break;
      worst = std::max(worst, err);
    }
    compared.push_back({name, worst});
  }
  return compared;
}

}  // namespace kiln
