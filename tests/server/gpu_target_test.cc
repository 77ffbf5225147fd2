// How the farm names and resolves GPU targets: a GPU worker's records key
// (model and toolchain versions in it), "cuda" as the farm's GPU workers,
// "cuda:sm_XY" with and without such workers, and the refusals.
#include <filesystem>

#include "gtest/gtest.h"
#include "server/compile_pipeline.h"
#include "server/farm_target.h"
#include "server/task_broker.h"
#include "server/tuner.h"
#include "tuning_db/tuning_db.h"

namespace kiln::server {
namespace {

kiln::v1::DeviceInfo Gpu(const std::string& model, const std::string& arch, const std::string& driver = "13.0") {
  kiln::v1::DeviceInfo d;
  d.set_kind("cuda");
  d.set_arch(arch);
  d.set_device_model(model);
  d.set_driver_version(driver);
  d.set_toolkit_version("Cuda compilation tools, release 12.9, V12.9.86");
  return d;
}

TEST(GpuFarmTargetTest, AGpuWorkersKeyNamesItsSmModelAndToolchain) {
  const std::string h100 = FarmTargetKeyOf(Gpu("NVIDIA H100 80GB HBM3", "sm_90"));
  EXPECT_EQ(h100.rfind("cuda/sm_90/nvidia-h100-80gb-hbm3/", 0), 0u) << h100;
  EXPECT_EQ(h100.size(), std::string("cuda/sm_90/nvidia-h100-80gb-hbm3/").size() + 8) << h100;
  // Another model, another driver: other records.
  EXPECT_NE(FarmTargetKeyOf(Gpu("NVIDIA H200", "sm_90")), h100);
  EXPECT_NE(FarmTargetKeyOf(Gpu("NVIDIA H100 80GB HBM3", "sm_90", "13.1")), h100);
  EXPECT_EQ(FarmTargetKeyOf(Gpu("NVIDIA H100 80GB HBM3", "sm_90")), h100);
  ASSERT_TRUE(GpuTargetOfKey(h100).has_value());
  EXPECT_EQ(GpuTargetOfKey(h100)->sm, 90);
  EXPECT_EQ(GpuTargetOfKey("cuda/sm_80")->sm, 80);
  EXPECT_FALSE(GpuTargetOfKey("cpu/x86_64/znver4/1a2b3c4d").has_value());
  EXPECT_FALSE(GpuTargetOfKey("cuda/sm_12").has_value());
}

class GpuResolveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("kiln_gpu_resolve_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    auto db = tuningdb::TuningDb::Open((dir_ / "t.db").string());
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    broker_ = std::make_unique<TaskBroker>(TaskBroker::Options{});
    tuner_ = std::make_unique<Tuner>(db_.get(), broker_.get(), Tuner::Options{});
    pipeline_ = std::make_unique<CompilePipeline>(db_.get(), tuner_.get(), nullptr);
  }
  void TearDown() override {
    pipeline_.reset();
    tuner_.reset();
    broker_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
  std::unique_ptr<tuningdb::TuningDb> db_;
  std::unique_ptr<TaskBroker> broker_;
  std::unique_ptr<Tuner> tuner_;
  std::unique_ptr<CompilePipeline> pipeline_;
};

TEST_F(GpuResolveTest, CudaMeansTheFarmsGpuWorkers) {
  // No GPU worker: "cuda" cannot be resolved, a named SM compiles untuned.
  absl::StatusOr<std::pair<std::string, Target>> none = pipeline_->ResolveTarget("cuda", 0);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("kiln-worker --device cuda:N"), std::string::npos) << none.status();
  auto bare = pipeline_->ResolveTarget("cuda:sm_90", 0);
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->first, "cuda/sm_90");
  ASSERT_TRUE(bare->second.is_gpu());
  EXPECT_EQ(bare->second.gpu().sm, 90);

  // Two H100 workers and one A100: "cuda" is the H100s' key, "cuda:sm_80" the A100's.
  const std::string h100 = FarmTargetKeyOf(Gpu("NVIDIA H100 80GB HBM3", "sm_90"));
  const std::string a100 = FarmTargetKeyOf(Gpu("NVIDIA A100-SXM4-80GB", "sm_80"));
  broker_->RegisterWorker(h100, "gpu-a", Gpu("NVIDIA H100 80GB HBM3", "sm_90"));
  broker_->RegisterWorker(h100, "gpu-b", Gpu("NVIDIA H100 80GB HBM3", "sm_90"));
  broker_->RegisterWorker(a100, "gpu-c", Gpu("NVIDIA A100-SXM4-80GB", "sm_80"));
  auto any = pipeline_->ResolveTarget("cuda", 0);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->first, h100);
  EXPECT_EQ(any->second.gpu().sm, 90);
  auto sm80 = pipeline_->ResolveTarget("cuda:sm_80", 1);
  ASSERT_TRUE(sm80.ok()) << sm80.status();
  EXPECT_EQ(sm80->first, a100);
  EXPECT_EQ(sm80->second.gpu().sm, 80);
  // A full key names its records whoever is registered.
  auto full = pipeline_->ResolveTarget(a100, 0);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->first, a100);
}

TEST_F(GpuResolveTest, RefusesThreadsAndUnknownSms) {
  auto threads = pipeline_->ResolveTarget("cuda:sm_90", 4);
  EXPECT_EQ(threads.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(threads.status().message().find("applies to CPU targets"), std::string::npos) << threads.status();
  auto old = pipeline_->ResolveTarget("cuda:sm_52", 0);
  EXPECT_EQ(old.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(old.status().message().find("sm_90"), std::string::npos) << old.status();
}

}  // namespace
}  // namespace kiln::server
