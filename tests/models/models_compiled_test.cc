// Real models through the whole compiled path without the farm: import,
// optimise, fuse what the code generator takes, default schedules, write the
// package, run it with the runtime, and compare every output with the
// reference interpreter on the original graph.
#include <gtest/gtest.h>

#include <cmath>

#include "client/runtime/package_reader.h"
#include "client/runtime/session.h"
#include "client/runtime/thread_pool.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "tests/models/model_testing.h"

namespace kiln {
namespace {

void CheckCompiledModel(const std::string& file) {
  std::string bytes = ReadAll(ModelPath(file));
  ASSERT_FALSE(bytes.empty()) << "missing " << ModelPath(file) << " (the kiln_models_export fixture writes it)";
  auto original = ImportOnnxModel(bytes, {});
  ASSERT_TRUE(original.ok()) << original.status();
  auto inputs = RandomInputs(**original);
  auto want = Evaluate(**original, inputs);
  ASSERT_TRUE(want.ok()) << want.status();

  auto graph = ImportOnnxModel(bytes, {});
  ASSERT_TRUE(graph.ok());
  PackageOptions options;
  options.target = CpuTarget::Host();
  auto pkg_bytes = CompileWithDefaultSchedules(std::move(*graph), options);
  ASSERT_TRUE(pkg_bytes.ok()) << pkg_bytes.status();
  auto pkg = runtime::Package::FromBytes(pkg_bytes->bytes);
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  std::shared_ptr<const runtime::Package> shared(std::move(*pkg));
  for (int threads : {1, 2}) {
    runtime::ThreadPool pool(threads);
    auto session = runtime::Session::Create(shared, &pool);
    ASSERT_TRUE(session.ok()) << session.status();
    for (const auto& [name, t] : inputs) ASSERT_TRUE((*session)->SetInput(name, t.raw(), t.size_bytes()).ok());
    ASSERT_TRUE((*session)->Run().ok());
    for (int i = 0; i < (*session)->num_outputs(); ++i) {
      const std::string& name = (*session)->output_info(i).name;
      const Tensor& ref = want->at(name);
      ASSERT_EQ((*session)->OutputBytes(i), static_cast<size_t>(ref.size_bytes())) << name;
      const float* got = static_cast<const float*>((*session)->OutputData(i));
      double worst = 0;
      for (int64_t j = 0; j < ref.num_elements(); ++j) {
        double r = ref.data<float>()[j];
        double err = std::fabs(got[j] - r);
        EXPECT_LE(err, 1e-4 + 1e-3 * std::fabs(r)) << file << " " << name << "[" << j << "]";
        if (err > 1e-4 + 1e-3 * std::fabs(r)) break;
        worst = std::max(worst, err);
      }
      std::printf("%s threads=%d output %s: max abs error %.3g (%zu bytes package)\n", file.c_str(), threads,
                  name.c_str(), worst, pkg_bytes->bytes.size());
    }
  }
}

TEST(ModelsCompiledTest, ResNet18) { CheckCompiledModel("resnet18.onnx"); }
TEST(ModelsCompiledTest, MobileNetV3Small) { CheckCompiledModel("mobilenet_v3_small.onnx"); }

// The encoder: embedding lookup (Gather over int64 ids), attention (batched
// MatMul, Softmax), LayerNorm, GELU: every group compiles.
TEST(ModelsCompiledTest, BertEncoder) { CheckCompiledModel("bert_encoder.onnx"); }

}  // namespace
}  // namespace kiln
