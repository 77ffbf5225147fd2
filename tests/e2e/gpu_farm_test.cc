// The farm on a GPU, end to end with real processes: kiln-server, a
// kiln-worker on cuda:0 (measuring in its device process), `kiln compile
// --target cuda` tuning through them, `kiln run` of the CUDA package, every
// output compared with the reference interpreter, and a second compile that
// measures nothing and gives the same digest. Without a GPU and its driver
// the worker exits at once saying why, and the test skips with that reason.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "client/example_models.h"
#include "client/tensor_io.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "tests/e2e/cli_process.h"
#include "tests/e2e/farm_process.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using e2e::kBin;
using e2e::RunCommand;
using e2e::Spawn;

std::string ReadLog(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class GpuFarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("kiln_gpu_e2e_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    server_ = Spawn({kBin + "/server/kiln-server", "--listen", "127.0.0.1:0", "--db", (dir_ / "tuning.db").string(),
                     "--port-file", (dir_ / "port").string()},
                    dir_ / "server.log");
    const int port = e2e::WaitForPortFile(dir_ / "port");
    ASSERT_GT(port, 0) << "kiln-server did not write its port";
    address_ = "127.0.0.1:" + std::to_string(port);
    worker_ = Spawn({kBin + "/worker/kiln-worker", "--server", address_, "--device", "cuda:0"}, dir_ / "worker.log");
    // A worker without a usable GPU exits at once (UNAVAILABLE: no CUDA driver, or no device).
    const int code = e2e::WaitExit(worker_, std::chrono::seconds(3));
    if (code >= 0) {
      worker_ = -1;
      skip_ = "no GPU worker could start here (exit " + std::to_string(code) + "): " + ReadLog(dir_ / "worker.log");
    }
  }
  void TearDown() override {
    for (pid_t p : {worker_, server_}) {
      if (p > 0) {
        kill(p, SIGTERM);
        int status;
        waitpid(p, &status, 0);
      }
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string Kiln(const std::string& args) const { return kBin + "/client/kiln " + args; }

  fs::path dir_;
  std::string address_;
  std::string skip_;
  pid_t server_ = -1, worker_ = -1;
};

TEST_F(GpuFarmTest, TunesOnTheGpuRunsThePackageAndMatchesTheInterpreter) {
  if (!skip_.empty()) GTEST_SKIP() << skip_;
  const fs::path work = dir_ / "mlp";
  auto ex = RunCommand(Kiln("example mlp -o " + work.string()), dir_ / "example.log");
  ASSERT_EQ(ex.exit_code, 0) << ex.output;
  const fs::path pkg = work / "mlp.kpkg";
  auto compile = e2e::RunCommandSplit(Kiln("compile " + (work / "mlp.onnx").string() +
                                           " --shape x=8,64 --target cuda --trials 4 --json --server " + address_ +
                                           " -o " + pkg.string()),
                                      dir_ / "compile");
  ASSERT_EQ(compile.exit_code, 0) << compile.err;
  auto result = e2e::ParseJson(compile.out);
  ASSERT_TRUE(result.ok()) << result.status() << "\n" << compile.out;
  EXPECT_GT(result->fields().at("trials_measured").number_value(), 0) << compile.out << "\n" << ReadLog(dir_ / "worker.log");
  EXPECT_EQ(result->fields().at("target").string_value().rfind("cuda/sm_", 0), 0u) << compile.out;

  auto inspect = RunCommand(Kiln("inspect " + pkg.string()), dir_ / "inspect.log");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("device    CUDA sm_"), std::string::npos) << inspect.output;

  auto run = RunCommand(Kiln("run " + pkg.string() + " --input x=" + (work / "x.npy").string() + " --output-dir " +
                             (work / "out").string()),
                        dir_ / "run.log");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto model = client::MakeExampleModel("mlp");
  ImportOptions io;
  io.input_shapes = model->shapes;
  auto graph = ImportOnnxModel(model->onnx_bytes, io);
  ASSERT_TRUE(graph.ok());
  auto x = ReadTensorFile((work / "x.npy").string());
  ASSERT_TRUE(x.ok()) << x.status();
  auto ref = Evaluate(**graph, {{"x", *x}});
  ASSERT_TRUE(ref.ok()) << ref.status();
  for (const auto& [name, want] : *ref) {
    auto got = ReadTensorFile((work / "out" / (name + ".npy")).string());
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->dims(), want.dims());
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      ASSERT_NEAR(got->data<float>()[i], want.data<float>()[i], 1e-4 + 1e-3 * std::fabs(want.data<float>()[i]))
          << name << "[" << i << "]";
    }
  }

  auto again = e2e::RunCommandSplit(Kiln("compile " + (work / "mlp.onnx").string() +
                                         " --shape x=8,64 --target cuda --trials 4 --json --server " + address_ +
                                         " -o " + (work / "again.kpkg").string()),
                                    dir_ / "again");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto second = e2e::ParseJson(again.out);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->fields().at("trials_measured").number_value(), 0) << again.out;
  EXPECT_EQ(second->fields().at("package_digest").string_value(), result->fields().at("package_digest").string_value());
}

}  // namespace
}  // namespace kiln
