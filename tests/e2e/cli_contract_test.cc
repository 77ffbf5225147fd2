// The CLI's contract with scripts, with real processes: a server it cannot
// reach fails within the connect deadline with exit code 5; a second
// kiln-server on a port in use refuses to start; every binary has --version;
// --json has every field and int64 as numbers; bad flag values are usage
// errors (exit 2); -q leaves stdout to the result and stderr empty; and the
// documented exit codes (docs/cli.md) for a miss, a bad model, differing outputs.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tests/e2e/cli_process.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using e2e::kBin;
using e2e::RunCommand;
using e2e::RunCommandSplit;

using google::protobuf::Value;

// A field of a parsed JSON object; fails the test when it is absent.
const Value& Field(const google::protobuf::Struct& object, const std::string& name) {
  static const Value kMissing;
  auto it = object.fields().find(name);
  if (it == object.fields().end()) {
    ADD_FAILURE() << "no field '" << name << "'";
    return kMissing;
  }
  return it->second;
}

class CliContractTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / ("kiln_contract_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    server_ = e2e::Spawn({kBin + "/server/kiln-server", "--listen", "127.0.0.1:0", "--db",
                          (dir_ / "tuning.db").string(), "--port-file", (dir_ / "port").string()},
                         dir_ / "server.log");
    port_ = e2e::WaitForPortFile(dir_ / "port");
    ASSERT_GT(port_, 0) << "kiln-server did not write its port";
    address_ = "127.0.0.1:" + std::to_string(port_);
    worker_ = e2e::Spawn({kBin + "/worker/kiln-worker", "--server", address_, "--device", "cpu"}, dir_ / "worker.log");
    ASSERT_EQ(RunCommand(Kiln("example mlp -o " + (dir_ / "mlp").string()), dir_ / "example.log").exit_code, 0);
  }
  static void TearDownTestSuite() {
    e2e::StopProcess(worker_);
    e2e::StopProcess(server_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  static std::string Kiln(const std::string& args) { return kBin + "/client/kiln " + args; }
  static std::string Model() { return (dir_ / "mlp" / "mlp.onnx").string(); }

  static inline fs::path dir_;
  static inline std::string address_;
  static inline int port_ = 0;
  static inline pid_t server_ = -1;
  static inline pid_t worker_ = -1;
};

TEST_F(CliContractTest, AServerThatCannotBeReachedFailsWithinTheConnectDeadline) {
  // Port 1 refuses connections; the client waits the deadline and gives up.
  for (const std::string& command : {"lookup " + Model() + " --shape x=8,64 -o " + (dir_ / "never.kpkg").string(),
                                     "compile " + Model() + " --shape x=8,64 -o " + (dir_ / "never.kpkg").string(),
                                     "report " + Model() + " --shape x=8,64"}) {
    const auto start = std::chrono::steady_clock::now();
    auto r = RunCommand(Kiln(command + " --server 127.0.0.1:1 --connect-timeout 2"), dir_ / "unreachable.log");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.exit_code, 5) << command << "\n" << r.output;
    EXPECT_NE(r.output.find("UNAVAILABLE: cannot reach kiln-server at 127.0.0.1:1 within 2s"), std::string::npos)
        << command << "\n"
        << r.output;
    EXPECT_LT(seconds, 30) << command;  // a generous bound: the deadline is 2 s
  }
  EXPECT_FALSE(fs::exists(dir_ / "never.kpkg"));
}

TEST_F(CliContractTest, ASecondServerOnAPortInUseRefusesToStart) {
  auto r = RunCommand(
      "timeout 60 " + kBin + "/server/kiln-server --listen " + address_ + " --db " + (dir_ / "second.db").string(),
      dir_ / "second_server.log");
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_NE(r.output.find("cannot listen on " + address_), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("server listening"), std::string::npos) << r.output;

  // The metrics port likewise: here the gRPC port, which is taken.
  auto metrics = RunCommand("timeout 60 " + kBin + "/server/kiln-server --listen 127.0.0.1:0 --metrics " + address_ +
                                " --db " + (dir_ / "third.db").string(),
                            dir_ / "third_server.log");
  EXPECT_EQ(metrics.exit_code, 5) << metrics.output;
  EXPECT_NE(metrics.output.find("cannot serve metrics on " + address_), std::string::npos) << metrics.output;

  // The first server still serves.
  auto lookup = RunCommand(
      Kiln("lookup " + Model() + " --shape x=3,64 --server " + address_ + " -o " + (dir_ / "miss.kpkg").string()),
      dir_ / "still_serving.log");
  EXPECT_EQ(lookup.exit_code, 3) << lookup.output;
}

TEST_F(CliContractTest, EveryBinaryPrintsItsVersion) {
  for (const std::string& binary : {"client/kiln", "server/kiln-server", "worker/kiln-worker"}) {
    auto r = RunCommandSplit(kBin + "/" + binary + " --version", dir_ / "version");
    EXPECT_EQ(r.exit_code, 0) << binary << "\n" << r.err;
    const std::string name = fs::path(binary).filename().string();
    EXPECT_EQ(r.out.rfind(name + " 0.", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("\ngit commit "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\nLLVM 19."), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\nschedule space version "), std::string::npos) << r.out;
  }
}

TEST_F(CliContractTest, JsonHasEveryFieldAndNumbersAsNumbers) {
  const std::string pkg = (dir_ / "json.kpkg").string();
  auto compile = RunCommandSplit(
      Kiln("compile " + Model() + " --shape x=2,64 --trials 1 --json -q --server " + address_ + " -o " + pkg),
      dir_ / "json_compile");
  ASSERT_EQ(compile.exit_code, 0) << compile.err;
  auto result = e2e::ParseJson(compile.out);
  ASSERT_TRUE(result.ok()) << result.status() << "\n" << compile.out;
  EXPECT_EQ(Field(*result, "package_size").kind_case(), Value::kNumberValue);  // int64
  EXPECT_GT(Field(*result, "package_size").number_value(), 0);
  EXPECT_EQ(Field(*result, "trials_measured").kind_case(), Value::kNumberValue);
  // Zero values are present: a compile in the foreground, no tuning stop reason.
  EXPECT_EQ(Field(*result, "tuning_in_background").kind_case(), Value::kBoolValue);
  EXPECT_FALSE(Field(*result, "tuning_in_background").bool_value());
  EXPECT_EQ(Field(*result, "tuning_stop").kind_case(), Value::kStringValue);
  const Value& groups = Field(*result, "groups");
  ASSERT_EQ(groups.kind_case(), Value::kListValue);
  ASSERT_GT(groups.list_value().values_size(), 0);
  const auto& group = groups.list_value().values(0).struct_value();
  EXPECT_EQ(Field(group, "index").kind_case(), Value::kNumberValue);
  EXPECT_EQ(Field(group, "index").number_value(), 0);
  EXPECT_EQ(Field(group, "from_database").kind_case(), Value::kBoolValue);

  auto lookup = RunCommandSplit(Kiln("lookup " + Model() + " --shape x=2,64 --json --server " + address_ + " -o " +
                                     (dir_ / "looked_up.kpkg").string() + " --cache-dir " + (dir_ / "cache").string()),
                                dir_ / "json_lookup");
  ASSERT_EQ(lookup.exit_code, 0) << lookup.err;
  auto found = e2e::ParseJson(lookup.out);
  ASSERT_TRUE(found.ok()) << found.status() << "\n" << lookup.out;
  const auto& answer = Field(*found, "lookup").struct_value();
  EXPECT_TRUE(Field(answer, "found").bool_value());
  EXPECT_EQ(Field(answer, "package_size").kind_case(), Value::kNumberValue);
  EXPECT_EQ(Field(answer, "package_size").number_value(), Field(*result, "package_size").number_value());
  EXPECT_EQ(Field(answer, "reason").kind_case(), Value::kStringValue);  // "" and present
  EXPECT_EQ(Field(answer, "tuning_in_progress").kind_case(), Value::kBoolValue);
  EXPECT_EQ(Field(*found, "source").string_value(), "server");

  // A miss: exit 3, and the JSON says why.
  auto miss = RunCommandSplit(Kiln("lookup " + Model() + " --shape x=5,64 --json --server " + address_ + " -o " +
                                   (dir_ / "missing.kpkg").string()),
                              dir_ / "json_miss");
  EXPECT_EQ(miss.exit_code, 3) << miss.err;
  auto missing = e2e::ParseJson(miss.out);
  ASSERT_TRUE(missing.ok()) << missing.status() << "\n" << miss.out;
  EXPECT_FALSE(Field(Field(*missing, "lookup").struct_value(), "found").bool_value());
  EXPECT_EQ(Field(*missing, "output").kind_case(), Value::kNullValue);
  EXPECT_FALSE(fs::exists(dir_ / "missing.kpkg"));
}

// `kiln inspect PKG`: the manifest, and the records behind every group's
// schedule, the same the compile result named.
TEST_F(CliContractTest, InspectShowsAPackagesManifestAndTheRecordsBehindIt) {
  const std::string pkg = (dir_ / "inspect.kpkg").string();
  auto compile = RunCommandSplit(
      Kiln("compile " + Model() + " --shape x=3,64 --trials 2 --json -q --server " + address_ + " -o " + pkg),
      dir_ / "inspect_compile");
  ASSERT_EQ(compile.exit_code, 0) << compile.err;
  auto result = e2e::ParseJson(compile.out);
  ASSERT_TRUE(result.ok()) << result.status() << "\n" << compile.out;
  const auto& group0 = Field(*result, "groups").list_value().values(0).struct_value();
  const auto& keys = Field(Field(group0, "provenance").struct_value(), "record_keys").list_value();
  ASSERT_GT(keys.values_size(), 0) << compile.out;

  auto text = RunCommandSplit(Kiln("inspect " + pkg), dir_ / "inspect_text");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("checksum ok"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(Field(*result, "package_digest").string_value()), std::string::npos) << text.out;
  for (const Value& key : keys.values()) {
    EXPECT_NE(text.out.find("    record    " + key.string_value()), std::string::npos) << text.out;
  }

  auto json = RunCommandSplit(Kiln("inspect --json " + pkg), dir_ / "inspect_json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto parsed = e2e::ParseJson(json.out);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << json.out;
  EXPECT_EQ(Field(*parsed, "digest").string_value(), Field(*result, "package_digest").string_value());
  EXPECT_EQ(Field(*parsed, "size").kind_case(), Value::kNumberValue);
  const auto& manifest = Field(*parsed, "manifest").struct_value();
  const auto& pgroup0 = Field(manifest, "groups").list_value().values(0).struct_value();
  const auto& pkeys = Field(Field(pgroup0, "provenance").struct_value(), "record_keys").list_value();
  ASSERT_EQ(pkeys.values_size(), keys.values_size());
  for (int i = 0; i < keys.values_size(); ++i) {
    EXPECT_EQ(pkeys.values(i).string_value(), keys.values(i).string_value());
  }
  EXPECT_EQ(Field(Field(pgroup0, "provenance").struct_value(), "source").string_value(), "RECORDS");

  // A flag for models only is a usage error; a corrupt package names the problem.
  EXPECT_EQ(RunCommandSplit(Kiln("inspect --shape x=1,64 " + pkg), dir_ / "inspect_shape").exit_code, 2);
  std::string bytes = e2e::ReadWholeFile(pkg);
  bytes[bytes.size() / 2] ^= 1;
  {
    std::ofstream f(dir_ / "corrupt.kpkg", std::ios::binary);
    f << bytes;
  }
  auto corrupt = RunCommandSplit(Kiln("inspect " + (dir_ / "corrupt.kpkg").string()), dir_ / "inspect_corrupt");
  EXPECT_EQ(corrupt.exit_code, 1);
  EXPECT_NE(corrupt.err.find("checksum mismatch"), std::string::npos) << corrupt.err;
}

// `kiln inspect MODEL --group N`: the group's workload, its schedule and the
// loop IR it lowers to (--schedule another point, --llvm-ir the optimized
// LLVM IR, --asm the assembly and its inner loops' counts); a group or
// schedule that does not exist is named.
TEST_F(CliContractTest, InspectGroupPrintsItsLoopIr) {
  const std::string model = Model() + " --shape x=3,64";
  auto text = RunCommandSplit(Kiln("inspect " + model + " --group 0"), dir_ / "inspect_group");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const char* part : {"group 0 ", "workload graph:", "(default) of ", "loop IR:", "kernel "}) {
    EXPECT_NE(text.out.find(part), std::string::npos) << part << "\n" << text.out;
  }
  const size_t at = text.out.find("schedule: ");
  ASSERT_NE(at, std::string::npos) << text.out;
  const std::string schedule = text.out.substr(at + 10, text.out.find(' ', at + 10) - at - 10);
  auto same = RunCommandSplit(Kiln("inspect " + model + " --group 0 --llvm-ir --schedule " + schedule),
                              dir_ / "inspect_group_llvm");
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_EQ(same.out.find("(default)"), std::string::npos) << same.out;
  EXPECT_NE(same.out.find("optimized LLVM IR"), std::string::npos) << same.out;
  EXPECT_NE(same.out.find("define "), std::string::npos) << same.out;
  auto assembly = RunCommandSplit(Kiln("inspect " + model + " --group 0 --asm"), dir_ / "inspect_group_asm");
  ASSERT_EQ(assembly.exit_code, 0) << assembly.err;
  EXPECT_NE(assembly.out.find(" innermost loops with "), std::string::npos) << assembly.out;
  EXPECT_NE(assembly.out.find("group_0:"), std::string::npos) << assembly.out;

  auto none = RunCommandSplit(Kiln("inspect " + model + " --group 999"), dir_ / "inspect_group_none");
  EXPECT_EQ(none.exit_code, 4) << none.err;
  EXPECT_NE(none.err.find("--group 999: the model has "), std::string::npos) << none.err;
  auto bad =
      RunCommandSplit(Kiln("inspect " + model + " --group 0 --schedule nosuchknob=3"), dir_ / "inspect_group_bad");
  EXPECT_EQ(bad.exit_code, 4) << bad.err;
  EXPECT_NE(bad.err.find("group 0 at schedule"), std::string::npos) << bad.err;
  EXPECT_EQ(RunCommandSplit(Kiln("inspect " + model + " --schedule vw=1"), dir_ / "inspect_sched_alone").exit_code, 2);
}

TEST_F(CliContractTest, BadFlagValuesAreUsageErrors) {
  const std::string out = " -o " + (dir_ / "bad.kpkg").string();
  struct Case {
    std::string args, must_mention;
  };
  const Case cases[] = {
      {"compile " + Model() + " --shape x=8,64 --shape x=4,64" + out, "'x' is given twice"},
      {"lookup " + Model() + " --shape x=8,64 --shape x=8,64 --server " + address_ + out, "'x' is given twice"},
      {"eval " + Model() + " --input x=a.npy --input x=b.npy", "'x' is given twice"},
      {"run p.kpkg --input x=a.npy --input x=b.npy", "'x' is given twice"},
      {"compile " + Model() + " --shape x=8,-1" + out, "--shape"},
      {"compile " + Model() + " --budget 10q" + out, "--budget"},
      {"compile " + Model() + " --trials -1" + out, "--trials"},
      {"run p.kpkg --threads -1", "--threads"},
      {"run p.kpkg --repeat -5", "--repeat"},
      {"compare a b --atol -1", "--atol"},
      {"compile " + Model() + " --connect-timeout 0 --server " + address_ + out, "--connect-timeout"},
      {"--log-level loud compile " + Model() + out, "--log-level"},
  };
  for (const Case& c : cases) {
    auto r = RunCommand(Kiln(c.args), dir_ / "bad_flag.log");
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.must_mention), std::string::npos) << c.args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(dir_ / "bad.kpkg"));
  // --threads 0 is every hardware thread: accepted.
  auto help = RunCommand(Kiln("run --help"), dir_ / "run_help.log");
  EXPECT_NE(help.output.find("0: every hardware thread"), std::string::npos) << help.output;
}

TEST_F(CliContractTest, QuietEmbeddedFarmPrintsTheResultAlone) {
  const fs::path work = dir_ / "quiet";
  fs::create_directories(work);
  const std::string db = " --db " + (work / "own.db").string();
  auto quiet = RunCommandSplit(
      Kiln("compile " + Model() + " --shape x=8,64 --trials 2 -q" + db + " -o " + (work / "a.kpkg").string()),
      work / "quiet");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "") << "-q printed on stderr";
  EXPECT_EQ(quiet.out.rfind("package " + (work / "a.kpkg").string() + "\ndigest sha256:", 0), 0u) << quiet.out;

  auto json = RunCommandSplit(
      Kiln("compile " + Model() + " --shape x=8,64 --trials 2 -q --json" + db + " -o " + (work / "b.kpkg").string()),
      work / "quiet_json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.err, "");
  EXPECT_TRUE(e2e::ParseJson(json.out).ok()) << json.out;

  // Without -q, the embedded farm's info logs stay out of the output (default
  // --log-level warning); with --log-level info they are on stderr, never stdout.
  auto logged = RunCommandSplit(Kiln("--log-level info compile " + Model() + " --shape x=8,64 --trials 2 --json" + db +
                                     " -o " + (work / "c.kpkg").string()),
                                work / "logged");
  ASSERT_EQ(logged.exit_code, 0) << logged.err;
  EXPECT_NE(logged.err.find("level=info msg=\"server listening\""), std::string::npos) << logged.err;
  EXPECT_TRUE(e2e::ParseJson(logged.out).ok()) << logged.out;
  auto plain = RunCommandSplit(
      Kiln("compile " + Model() + " --shape x=8,64 --trials 2" + db + " -o " + (work / "d.kpkg").string()),
      work / "plain");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err.find("level=info"), std::string::npos) << plain.err;
}

TEST_F(CliContractTest, ExitCodesSayWhatWentWrong) {
  const fs::path work = dir_ / "codes";
  fs::create_directories(work);
  // A malformed model: INVALID_ARGUMENT, 4.
  std::ofstream(work / "bad.onnx") << "this is not an onnx model";
  auto bad = RunCommand(
      Kiln("compile " + (work / "bad.onnx").string() + " --server " + address_ + " -o " + (work / "bad.kpkg").string()),
      work / "bad.log");
  EXPECT_EQ(bad.exit_code, 4) << bad.output;
  // No such model file: NOT_FOUND, 3.
  auto none = RunCommand(Kiln("eval " + (work / "none.onnx").string()), work / "none.log");
  EXPECT_EQ(none.exit_code, 3) << none.output;
  // Outputs that differ: 6; the same outputs: 0.
  const std::string x = " --input x=" + (dir_ / "mlp" / "x.npy").string();
  ASSERT_EQ(
      RunCommand(Kiln("eval " + Model() + x + " --output-dir " + (work / "ref").string()), work / "e.log").exit_code,
      0);
  auto same =
      RunCommandSplit(Kiln("compare --json " + (work / "ref").string() + " " + (work / "ref").string()), work / "same");
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  auto verdict = e2e::ParseJson(same.out);
  ASSERT_TRUE(verdict.ok()) << same.out;
  EXPECT_TRUE(Field(*verdict, "match").bool_value());
  EXPECT_EQ(Field(*verdict, "worst_max_abs_error").number_value(), 0);
  auto eval_json = RunCommandSplit(Kiln("eval " + Model() + " --json --input x=" + (dir_ / "mlp" / "x.npy").string() +
                                        " --output-dir " + (work / "other").string()),
                                   work / "eval_json");
  ASSERT_EQ(eval_json.exit_code, 0) << eval_json.err;
  auto outputs = e2e::ParseJson(eval_json.out);
  ASSERT_TRUE(outputs.ok()) << eval_json.out;
  ASSERT_GT(Field(*outputs, "outputs").list_value().values_size(), 0) << eval_json.out;
  const auto& first = Field(*outputs, "outputs").list_value().values(0).struct_value();
  EXPECT_EQ(Field(first, "dtype").string_value(), "f32");
  EXPECT_EQ(Field(first, "dims").list_value().values(0).number_value(), 8);
  // Perturb one output file: compare must say they differ.
  const std::string file = Field(first, "file").string_value();
  std::string bytes = e2e::ReadWholeFile(file);
  ASSERT_GT(bytes.size(), 4u);
  bytes[bytes.size() - 1] ^= 0x40;  // the exponent of the last float (little-endian)
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  auto differ =
      RunCommand(Kiln("compare " + (work / "ref").string() + " " + (work / "other").string()), work / "differ.log");
  EXPECT_EQ(differ.exit_code, 6) << differ.output;
}

TEST_F(CliContractTest, AWorkerRetriesAServerItCannotReachAndSaysSo) {
  const fs::path log = dir_ / "lonely_worker.log";
  pid_t worker = e2e::Spawn({kBin + "/worker/kiln-worker", "--server", "127.0.0.1:1", "--device", "cpu"}, log);
  std::string text;
  for (int i = 0; i < 200 && text.find("register failed") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    text = e2e::ReadWholeFile(log);
  }
  EXPECT_EQ(kill(worker, 0), 0) << "the worker gave up:\n" << text;
  const int status = e2e::StopProcess(worker);
  text = e2e::ReadWholeFile(log);
  EXPECT_NE(text.find("level=warn msg=\"register failed\" server=127.0.0.1:1"), std::string::npos) << text;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace kiln
