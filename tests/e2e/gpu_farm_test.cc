// The farm on a GPU, end to end with real processes: kiln-server, a
// kiln-worker on cuda:0 (measuring in its device process), `kiln compile
// --target cuda` tuning through them, `kiln run` of the CUDA package, every
// output compared with the reference interpreter, and a second compile that
// measures nothing and gives the same digest. Without a GPU and its driver
// the worker exits at once saying why, and the test skips with that reason.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "tests/e2e/cli_process.h"
#include "tests/e2e/farm_process.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using e2e::kBin;
using e2e::RunCommand;

// One kiln-server and a kiln-worker on cuda:0 (named gpu) in a farm of this
// test's own; skip_ says why when the worker could not start.
class GpuFarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("kiln_gpu_e2e_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    farm_ = std::make_unique<e2e::ProcessFarm>(dir_);
    ASSERT_GT(farm_->StartServer(dir_ / "tuning.db", {}), 0) << "kiln-server did not write its port";
    worker_ = farm_->StartWorker("gpu", {"--device", "cuda:0"});
    // A worker without a usable GPU exits at once (UNAVAILABLE: no CUDA driver, or no device).
    const int code = farm_->Wait(worker_, std::chrono::seconds(3));
    if (code >= 0) {
      worker_ = -1;
      skip_ = "no GPU worker could start here (exit " + std::to_string(code) + "): " +
              e2e::ReadWholeFile(farm_->Log("gpu"));
    }
  }
  void TearDown() override {
    // SIGTERM, as a deployment stops them (the farm SIGKILLs what is left).
    if (farm_ != nullptr) {
      if (worker_ > 0) farm_->Stop(worker_);
      farm_->Stop(farm_->server());
      farm_.reset();
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string Kiln(const std::string& args) const { return kBin + "/client/kiln " + args; }

  fs::path dir_;
  std::unique_ptr<e2e::ProcessFarm> farm_;
  pid_t worker_ = -1;
  std::string skip_;
};

TEST_F(GpuFarmTest, TunesOnTheGpuRunsThePackageAndMatchesTheInterpreter) {
  if (!skip_.empty()) GTEST_SKIP() << skip_;
  const fs::path work = dir_ / "mlp";
  auto ex = RunCommand(Kiln("example mlp -o " + work.string()), dir_ / "example.log");
  ASSERT_EQ(ex.exit_code, 0) << ex.output;
  const fs::path pkg = work / "mlp.kpkg";
  auto compile = e2e::RunCommandSplit(Kiln("compile " + (work / "mlp.onnx").string() +
                                           " --shape x=8,64 --target cuda --trials 4 --json --server " +
                                           farm_->address() + " -o " + pkg.string()),
                                      dir_ / "compile");
  ASSERT_EQ(compile.exit_code, 0) << compile.err;
  auto result = e2e::ParseJson(compile.out);
  ASSERT_TRUE(result.ok()) << result.status() << "\n" << compile.out;
  EXPECT_GT(result->fields().at("trials_measured").number_value(), 0)
      << compile.out << "\n" << e2e::ReadWholeFile(farm_->Log("gpu"));
  EXPECT_EQ(result->fields().at("target").string_value().rfind("cuda/sm_", 0), 0u) << compile.out;

  auto inspect = RunCommand(Kiln("inspect " + pkg.string()), dir_ / "inspect.log");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("device    CUDA sm_"), std::string::npos) << inspect.output;

  auto run = RunCommand(Kiln("run " + pkg.string() + " --input x=" + (work / "x.npy").string() + " --output-dir " +
                             (work / "out").string()),
                        dir_ / "run.log");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_NO_FATAL_FAILURE(
      e2e::ExpectRunOutputsMatchInterpreter("mlp", {{"x", work / "x.npy"}}, work / "out", 1e-4, 1e-3));

  auto again = e2e::RunCommandSplit(Kiln("compile " + (work / "mlp.onnx").string() +
                                         " --shape x=8,64 --target cuda --trials 4 --json --server " +
                                         farm_->address() + " -o " + (work / "again.kpkg").string()),
                                    dir_ / "again");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto second = e2e::ParseJson(again.out);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->fields().at("trials_measured").number_value(), 0) << again.out;
  EXPECT_EQ(second->fields().at("package_digest").string_value(), result->fields().at("package_digest").string_value());
}

}  // namespace
}  // namespace kiln
