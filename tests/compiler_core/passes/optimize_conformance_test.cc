// OptimizeGraph over ONNX's node-test models (libonnx-testdata), including the
// *_expanded function bodies (softmax, layer norm, gelu, ... written out): the
// pipeline must succeed, leave a valid graph and keep the interpreter's numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler_core/frontend/onnx_importer.h"
#include "compiler_core/passes/optimize.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

constexpr char kNodeTests[] = "/usr/share/libonnx-testdata/data/node";

bool AllInputsStaticF32(const Graph& g) {
  for (const Value* v : g.inputs()) {
    if (!v->type().IsStatic() || v->type().dtype != DType::kFloat32) return false;
  }
  return !g.inputs().empty();
}

TEST(OptimizeConformanceTest, NodeTestModelsKeepTheirNumbers) {
  if (!std::filesystem::exists(kNodeTests)) GTEST_SKIP() << "no " << kNodeTests;
  int compared = 0, changed_models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kNodeTests)) {
    const std::string model = entry.path().string() + "/model.onnx";
    std::ifstream f(model, std::ios::binary);
    if (!f) continue;
    std::stringstream ss;
    ss << f.rdbuf();
    auto imported = ImportOnnxModel(ss.str(), {});
    if (!imported.ok() || !AllInputsStaticF32(**imported)) continue;
    Graph& g = **imported;
    auto original = g.Clone();
    std::map<std::string, Tensor> in = testing::RandomInputs(g, 5, 2);
    auto before = Evaluate(*original, in);
    if (!before.ok()) continue;
    auto records = OptimizeGraph(g, {});
    ASSERT_TRUE(records.ok()) << model << ": " << records.status();
    bool changed = false;
    for (const PassRecord& r : *records) changed = changed || r.changed;
    changed_models += changed;
    auto after = Evaluate(g, in);
    ASSERT_TRUE(after.ok()) << model << ": " << after.status() << "\n" << g.ToText();
    for (const auto& [name, t] : *before) {
      const Tensor& u = after->at(name);
      ASSERT_EQ(t.dims(), u.dims()) << model << " " << name;
      ASSERT_EQ(t.dtype(), u.dtype()) << model << " " << name;
      if (t.dtype() != DType::kFloat32) {
        EXPECT_EQ(t.bytes(), u.bytes()) << model << " " << name;
        continue;
      }
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        const double x = t.data<float>()[i], y = u.data<float>()[i];
        if (std::isnan(x) && std::isnan(y)) continue;
        if (std::isinf(x) && x == y) continue;
        ASSERT_LE(std::abs(x - y), 1e-4 * std::max(1.0, std::abs(x)))
            << model << " " << name << "[" << i << "]\n" << original->ToText() << g.ToText();
      }
    }
    ++compared;
  }
  EXPECT_GT(compared, 100);
  std::cout << "compared " << compared << " models, " << changed_models << " changed by the pipeline\n";
}

}  // namespace
}  // namespace kiln
