// The worker's half of the whole-model check: real packages (the example MLP
// compiled with default schedules at two batch sizes) timed against each
// other through the runtime; bad packages are RUNTIME_ERROR results naming
// the digest. No timing value is asserted.
#include "worker/package_timing.h"

#include <gtest/gtest.h>

#include "client/example_models.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/frontend/onnx_importer.h"

namespace kiln::worker {
namespace {

std::string MlpPackage(int64_t batch) {
  auto model = client::MakeExampleModel("mlp");
  EXPECT_TRUE(model.ok()) << model.status();
  ImportOptions io;
  io.input_shapes = {{"x", {batch, 64}}};
  auto graph = ImportOnnxModel(model->onnx_bytes, io);
  EXPECT_TRUE(graph.ok()) << graph.status();
  PackageOptions options;
  options.model_name = "mlp";
  options.target = CpuTarget::Host();
  auto pkg = CompileWithDefaultSchedules(std::move(*graph), options);
  EXPECT_TRUE(pkg.ok()) << pkg.status();
  return pkg.ok() ? pkg->bytes : std::string();
}

kiln::v1::MeasureTask CheckTask(int threads) {
  kiln::v1::MeasureTask task;
  task.set_task_id("check-1");
  task.add_packages("sha256:small");
  task.add_packages("sha256:large");
  task.set_threads(threads);
  task.mutable_options()->set_warmup_runs(1);
  task.mutable_options()->set_min_repeats(7);
  task.mutable_options()->set_min_time_ms(1);
  return task;
}

TEST(PackageTimingTest, TimesEveryPackageInTurnOnTheTasksThreads) {
  const std::vector<std::string> packages = {MlpPackage(8), MlpPackage(256)};
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    auto r = TimePackages(CheckTask(threads), packages);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->error(), kiln::v1::MEASURE_OK) << r->error_message();
    ASSERT_EQ(r->package_timings_size(), 2);
    EXPECT_EQ(r->package_timings(0).digest(), "sha256:small");
    EXPECT_EQ(r->package_timings(1).digest(), "sha256:large");
    for (const auto& t : r->package_timings()) {
      EXPECT_GE(t.repeats(), 7);
      EXPECT_GT(t.median_ms(), 0);
      EXPECT_LE(t.p10_ms(), t.median_ms());
      EXPECT_LE(t.median_ms(), t.p90_ms());
    }
    // Rounds run every package once: the same number of runs each.
    EXPECT_EQ(r->package_timings(0).repeats(), r->package_timings(1).repeats());
    EXPECT_EQ(r->median_ms(), r->package_timings(0).median_ms());
  }
}

TEST(PackageTimingTest, APackageThatDoesNotLoadIsARuntimeErrorNamingIt) {
  std::string corrupt = MlpPackage(8);
  corrupt[corrupt.size() / 2] ^= 0x5a;
  kiln::v1::MeasureResult r = TimePackagesAsResult(CheckTask(1), {MlpPackage(8), corrupt});
  EXPECT_EQ(r.error(), kiln::v1::RUNTIME_ERROR);
  EXPECT_NE(r.error_message().find("sha256:large"), std::string::npos) << r.error_message();
  EXPECT_EQ(r.package_timings_size(), 0);

  kiln::v1::MeasureResult short_list = TimePackagesAsResult(CheckTask(1), {MlpPackage(8)});
  EXPECT_EQ(short_list.error(), kiln::v1::RUNTIME_ERROR);
  EXPECT_NE(short_list.error_message().find("2 package digests and 1 packages"), std::string::npos)
      << short_list.error_message();
}

}  // namespace
}  // namespace kiln::worker
