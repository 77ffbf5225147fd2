// End to end with real processes: kiln-server and kiln-worker on 127.0.0.1,
// the `kiln` CLI compiling through them, the package run by `kiln run`, and
// every output compared with the reference interpreter. Bad input: the CLI
// exits non-zero naming the node, and the server keeps serving.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "client/example_models.h"
#include "client/tensor_io.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "tests/e2e/cli_process.h"
#include "tests/compiler_core/frontend/onnx_model_builder.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using e2e::kBin;
using e2e::RunCommand;
using e2e::Spawn;

class CliEndToEndTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / ("kiln_e2e_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    server_ = Spawn({kBin + "/server/kiln-server", "--listen", "127.0.0.1:0", "--db",
                     (dir_ / "tuning.db").string(), "--port-file", (dir_ / "port").string()},
                    dir_ / "server.log");
    const int port = e2e::WaitForPortFile(dir_ / "port");
    ASSERT_GT(port, 0) << "kiln-server did not write its port";
    address_ = "127.0.0.1:" + std::to_string(port);
    worker_ = Spawn({kBin + "/worker/kiln-worker", "--server", address_, "--device", "cpu"},
                    dir_ / "worker.log");
  }
  static void TearDownTestSuite() {
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

  static std::string Kiln(const std::string& args) { return kBin + "/client/kiln " + args; }

  static inline fs::path dir_;
  static inline std::string address_;
  static inline pid_t server_ = -1;
  static inline pid_t worker_ = -1;
};

TEST_F(CliEndToEndTest, CompileRunAndCompareWithTheInterpreter) {
  fs::path work = dir_ / "mlp";
  auto ex = RunCommand(Kiln("example mlp -o " + work.string()), dir_ / "example.log");
  ASSERT_EQ(ex.exit_code, 0) << ex.output;
  fs::path pkg = work / "mlp.kpkg";
  auto compile = RunCommand(Kiln("compile " + (work / "mlp.onnx").string() +
                                 " --shape x=8,64 --target cpu --trials 3 --server " + address_ +
                                 " -o " + pkg.string()),
                            dir_ / "compile.log");
  ASSERT_EQ(compile.exit_code, 0) << compile.output;
  EXPECT_NE(compile.output.find("digest sha256:"), std::string::npos) << compile.output;

  auto run = RunCommand(Kiln("run " + pkg.string() + " --input x=" + (work / "x.npy").string() +
                             " --output-dir " + (work / "out").string() + " --threads 2"),
                        dir_ / "run.log");
  ASSERT_EQ(run.exit_code, 0) << run.output;

  // Every output against the reference interpreter, in this process.
  ASSERT_NO_FATAL_FAILURE(
      e2e::ExpectRunOutputsMatchInterpreter("mlp", {{"x", work / "x.npy"}}, work / "out", 1e-5, 0));

  // Latency as JSON.
  auto timed = RunCommand(Kiln("run " + pkg.string() + " --input x=" + (work / "x.npy").string() +
                               " --repeat 5 --json"),
                          dir_ / "timed.log");
  ASSERT_EQ(timed.exit_code, 0) << timed.output;
  EXPECT_NE(timed.output.find("\"median_ms\":"), std::string::npos) << timed.output;
  EXPECT_NE(timed.output.find("\"p90_ms\":"), std::string::npos) << timed.output;

  // A second compile measures nothing and reproduces the digest.
  auto again = e2e::RunCommandSplit(Kiln("compile " + (work / "mlp.onnx").string() +
                                         " --shape x=8,64 --trials 3 --json --server " + address_ + " -o " +
                                         (work / "again.kpkg").string()),
                                    dir_ / "again");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  std::string digest_line = compile.output.substr(compile.output.find("digest sha256:") + 7, 71);
  EXPECT_NE(again.out.find(digest_line), std::string::npos) << digest_line << "\n" << again.out;
  auto result = e2e::ParseJson(again.out);
  ASSERT_TRUE(result.ok()) << result.status() << "\n" << again.out;
  EXPECT_EQ(result->fields().at("trials_measured").number_value(), 0)
      << "the second compile measured trials:\n" << again.out;
}

TEST_F(CliEndToEndTest, EachErrorClassExitsNonZeroNamingTheProblem) {
  fs::path work = dir_ / "bad";
  fs::create_directories(work);
  struct Case {
    std::string name, bytes, must_mention;
  };
  std::vector<Case> cases;
  cases.push_back({"malformed", "this is not an onnx model", "malformed"});
  {
    testing::OnnxModelBuilder b;
    b.Input("x", {"4"});
    b.Node("FancyOp", "fancy0", {"x"}, {"y"});
    b.graph()->add_output()->set_name("y");
    cases.push_back({"unsupported", b.model().SerializeAsString(), "fancy0"});
  }
  {
    testing::OnnxModelBuilder b;
    b.Input("x", {"4"});
    b.Node("Add", "add0", {"x", "nowhere"}, {"y"});
    b.graph()->add_output()->set_name("y");
    cases.push_back({"dangling", b.model().SerializeAsString(), "add0"});
  }
  {
    testing::OnnxModelBuilder b;
    b.Input("x", {"2", "3"});
    b.Initializer("w", {4}, {1, 2, 3, 4});
    b.Node("Add", "add_mismatch", {"x", "w"}, {"y"});
    b.graph()->add_output()->set_name("y");
    cases.push_back({"shape", b.model().SerializeAsString(), "add_mismatch"});
  }
  for (const Case& c : cases) {
    fs::path model = work / (c.name + ".onnx");
    std::ofstream(model, std::ios::binary) << c.bytes;
    auto r = RunCommand(Kiln("compile " + model.string() + " --server " + address_ + " -o " +
                             (work / (c.name + ".kpkg")).string()),
                        work / (c.name + ".log"));
    EXPECT_NE(r.exit_code, 0) << c.name;
    EXPECT_NE(r.output.find("INVALID_ARGUMENT"), std::string::npos) << c.name << ": " << r.output;
    EXPECT_NE(r.output.find(c.must_mention), std::string::npos) << c.name << ": " << r.output;
    EXPECT_FALSE(fs::exists(work / (c.name + ".kpkg"))) << c.name;
  }
  // The server is still serving.
  EXPECT_EQ(kill(server_, 0), 0);
  auto ex = RunCommand(Kiln("example mlp -o " + work.string()), work / "example.log");
  ASSERT_EQ(ex.exit_code, 0);
  auto ok = RunCommand(Kiln("compile " + (work / "mlp.onnx").string() + " --shape x=8,64 --trials 0 --server " +
                            address_ + " -o " + (work / "ok.kpkg").string()),
                       work / "ok.log");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

TEST_F(CliEndToEndTest, EmbeddedFarmCompilesWithoutAServer) {
  fs::path work = dir_ / "embedded";
  ASSERT_EQ(RunCommand(Kiln("example mlp -o " + work.string()), dir_ / "ex2.log").exit_code, 0);
  auto r = RunCommand(Kiln("compile " + (work / "mlp.onnx").string() + " --shape x=8,64 --trials 2 --db " +
                           (work / "own.db").string() + " -o " + (work / "mlp.kpkg").string()),
                      dir_ / "embedded.log");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(work / "own.db"));
  auto run = RunCommand(Kiln("run " + (work / "mlp.kpkg").string() + " --input x=" + (work / "x.npy").string() +
                             " --output-dir " + (work / "out").string()),
                        dir_ / "embedded_run.log");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto eval = RunCommand(Kiln("eval " + (work / "mlp.onnx").string() + " --input x=" + (work / "x.npy").string() +
                              " --output-dir " + (work / "ref").string()),
                         dir_ / "embedded_eval.log");
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  auto cmp = RunCommand(Kiln("compare " + (work / "ref").string() + " " + (work / "out").string()),
                        dir_ / "embedded_cmp.log");
  EXPECT_EQ(cmp.exit_code, 0) << cmp.output;
  EXPECT_NE(cmp.output.find("outputs match the reference"), std::string::npos) << cmp.output;
}

TEST_F(CliEndToEndTest, TuneSpendsABudgetAndReportWritesWhatTheDatabaseHolds) {
  fs::path work = dir_ / "tune";
  ASSERT_EQ(RunCommand(Kiln("example mlp -o " + work.string()), dir_ / "ex3.log").exit_code, 0);
  const std::string model = (work / "mlp.onnx").string();
  // Through the server: a budget of 8 trials, the package and an HTML report.
  auto tuned = RunCommand(Kiln("tune " + model + " --shape x=4,64 --budget 8 --server " + address_ + " -o " +
                               (work / "mlp.kpkg").string() + " --report " + (work / "mlp.html").string() + " -q"),
                          dir_ / "tune.log");
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  EXPECT_NE(tuned.output.find("tuning stopped: the budget is spent"), std::string::npos) << tuned.output;
  EXPECT_NE(tuned.output.find("2 workloads (2 groups), 8 trials"), std::string::npos) << tuned.output;
  EXPECT_TRUE(fs::exists(work / "mlp.kpkg"));
  std::ifstream html_file(work / "mlp.html");
  std::stringstream html;
  html << html_file.rdbuf();
  EXPECT_EQ(html.str().rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.str().find("<svg"), std::string::npos);

  // Tuning again continues from the records: 8 more trials.
  auto again = RunCommand(Kiln("tune " + model + " --shape x=4,64 --budget 8 --server " + address_ + " -q --report " +
                               (work / "again.html").string()),
                          dir_ / "tune2.log");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("2 workloads (2 groups), 16 trials"), std::string::npos) << again.output;

  // The report alone, as JSON: every trial with its job.
  auto json = RunCommand(Kiln("report " + model + " --shape x=4,64 --server " + address_ + " --json"),
                         dir_ / "report.log");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  EXPECT_NE(json.output.find("\"workloads\""), std::string::npos) << json.output;
  // A job id is an int64: a JSON number. The first trial with a job names one.
  std::string job;
  for (size_t at = json.output.find("\"job_id\":"); at != std::string::npos && job.empty();
       at = json.output.find("\"job_id\":", at + 1)) {
    const size_t digits = at + 9;
    job = json.output.substr(digits, json.output.find_first_not_of("0123456789", digits) - digits);
    if (job == "0") job.clear();
  }
  ASSERT_FALSE(job.empty()) << json.output;
  auto by_job = RunCommand(Kiln("report " + job + " --server " + address_ + " -o " + (work / "job.html").string()),
                           dir_ / "report_job.log");
  ASSERT_EQ(by_job.exit_code, 0) << by_job.output;
  EXPECT_NE(by_job.output.find("tuning job " + job + " on "), std::string::npos) << by_job.output;
  EXPECT_TRUE(fs::exists(work / "job.html"));
  auto missing = RunCommand(Kiln("report 99999999 --server " + address_), dir_ / "report_missing.log");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("NOT_FOUND: no tuning job 99999999"), std::string::npos) << missing.output;
}

}  // namespace
}  // namespace kiln
