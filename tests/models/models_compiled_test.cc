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
  absl::StatusOr<ModelReference> ref = EvaluateModel(file);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto graph = ImportOnnxModel(ref->bytes, {});
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
    for (const OutputError& out : RunAndCompare(**session, *ref, file)) {
      std::printf("%s threads=%d output %s: max abs error %.3g (%zu bytes package)\n", file.c_str(), threads,
                  out.name.c_str(), out.worst, pkg_bytes->bytes.size());
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
