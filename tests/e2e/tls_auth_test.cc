// Identity and roles with real processes and real certificates, made by
// OpenSSL at test time: kiln-server serving TLS with an auth file, a worker
// that authenticates with its client certificate (mutual TLS), clients with
// bearer tokens. No credential is UNAUTHENTICATED (exit 7), the wrong role
// PERMISSION_DENIED, plaintext to the TLS port does not connect, a worker
// cannot act under another's id or report a task it does not hold, and a
// token removed from the auth file stops working without a restart.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "base/digest.h"
#include "client/channel_credentials.h"
#include "kiln/v1/worker.grpc.pb.h"
#include "tests/e2e/cli_process.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using e2e::kBin;
using e2e::RunCommandSplit;

void WriteText(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp);
    f << text;
  }
  fs::rename(tmp, path);  // atomic, as an operator should replace it
}

std::string TokenLine(const std::string& roles, const std::string& identity, const std::string& token) {
  return roles + " " + identity + " sha256:" + Sha256Hex(token) + "\n";
}

class TlsAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / ("kiln_tls_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A CA, a server certificate for 127.0.0.1, and a worker's client certificate.
    const std::string d = dir_.string();
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
    WriteText(dir_ / "san.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
    const std::string script =
        "cd " + d + " && openssl req -x509" + ec + "-keyout ca.key -out ca.pem -days 2 -subj /CN=kiln-test-ca" +
        " && openssl req" + ec + "-keyout server.key -out server.csr -subj /CN=kiln-server" +
        " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2"
        " -extfile san.ext" +
        " && openssl req" + ec + "-keyout worker.key -out worker.csr -subj /CN=worker-1" +
        " && openssl x509 -req -in worker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out worker.pem -days 2"
        " && openssl req -x509" + ec + "-keyout other-ca.key -out other-ca.pem -days 2 -subj /CN=another-ca";
    ASSERT_EQ(e2e::RunCommand(script, dir_ / "openssl.log").exit_code, 0) << e2e::ReadWholeFile(dir_ / "openssl.log");
    WriteText(dir_ / "client.token", "client-secret-1\n");
    WriteText(dir_ / "worker.token", "worker-secret-1");
    WriteText(dir_ / "admin.token", "admin-secret-1");
    WriteText(dir_ / "auth.txt", "# roles identity credential\n" + TokenLine("client", "ci", "client-secret-1") +
                                     TokenLine("worker", "token-worker", "worker-secret-1") +
                                     TokenLine("admin", "ops", "admin-secret-1") +
                                     "worker gpu-1 cert:worker-1\n");
    server_ = e2e::Spawn({kBin + "/server/kiln-server", "--listen", "127.0.0.1:0", "--db", d + "/tuning.db",
                          "--port-file", d + "/port", "--tls-cert", d + "/server.pem", "--tls-key", d + "/server.key",
                          "--tls-client-ca", d + "/ca.pem", "--auth-file", d + "/auth.txt"},
                         dir_ / "server.log");
    const int port = e2e::WaitForPortFile(dir_ / "port");
    ASSERT_GT(port, 0) << e2e::ReadWholeFile(dir_ / "server.log");
    address_ = "127.0.0.1:" + std::to_string(port);
    worker_ = e2e::Spawn({kBin + "/worker/kiln-worker", "--server", address_, "--tls-ca", d + "/ca.pem", "--tls-cert",
                          d + "/worker.pem", "--tls-key", d + "/worker.key"},
                         dir_ / "worker.log");
    ASSERT_EQ(e2e::RunCommand(Kiln("example mlp -o " + d + "/mlp"), dir_ / "example.log").exit_code, 0);
  }
  static void TearDownTestSuite() {
    e2e::StopProcess(worker_);
    e2e::StopProcess(server_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  static std::string Kiln(const std::string& args) { return kBin + "/client/kiln " + args; }
  // `kiln lookup` of the example model with these connection flags.
  static e2e::SplitResult Lookup(const std::string& flags, const std::string& name) {
    return RunCommandSplit(Kiln("lookup " + (dir_ / "mlp" / "mlp.onnx").string() + " --shape x=8,64 --server " +
                                address_ + " --connect-timeout 3 -o " + (dir_ / (name + ".kpkg")).string() + " " +
                                flags),
                           dir_ / name);
  }
  static std::string Ca() { return " --tls-ca " + (dir_ / "ca.pem").string(); }
  // `kiln admin ARGS` with the CA and this token.
  static e2e::SplitResult Admin(const std::string& args, const std::string& token_file, const std::string& name) {
    return RunCommandSplit(Kiln("admin " + args + " --server " + address_ + " --connect-timeout 3" + Ca() +
                                Token(token_file)),
                           dir_ / name);
  }
  static std::string Token(const std::string& file) { return " --token-file " + (dir_ / file).string(); }

  // A WorkerService stub over TLS with a worker token.
  static std::unique_ptr<kiln::v1::WorkerService::Stub> WorkerStub(const std::string& token_file) {
    client::ChannelSecurity security;
    security.tls_ca = (dir_ / "ca.pem").string();
    security.token_file = (dir_ / token_file).string();
    auto credentials = client::MakeChannelCredentials(security);
    EXPECT_TRUE(credentials.ok()) << credentials.status();
    return kiln::v1::WorkerService::NewStub(grpc::CreateChannel(address_, *credentials));
  }

  static fs::path dir_;
  static std::string address_;
  static pid_t server_, worker_;
};
fs::path TlsAuthTest::dir_;
std::string TlsAuthTest::address_;
pid_t TlsAuthTest::server_ = 0, TlsAuthTest::worker_ = 0;

TEST_F(TlsAuthTest, ClientsNeedACredentialWithTheirRole) {
  auto none = Lookup(Ca(), "no_credential");
  EXPECT_EQ(none.exit_code, 7) << none.err;
  EXPECT_NE(none.err.find("UNAUTHENTICATED"), std::string::npos) << none.err;

  WriteText(dir_ / "bad.token", "not-a-token");
  auto bad = Lookup(Ca() + Token("bad.token"), "bad_token");
  EXPECT_EQ(bad.exit_code, 7) << bad.err;
  EXPECT_NE(bad.err.find("UNAUTHENTICATED: unknown token"), std::string::npos) << bad.err;

  auto worker = Lookup(Ca() + Token("worker.token"), "wrong_role");
  EXPECT_EQ(worker.exit_code, 7) << worker.err;
  EXPECT_NE(worker.err.find("PERMISSION_DENIED: 'token-worker' has the roles worker; this call needs client"),
            std::string::npos)
      << worker.err;

  // The right role gets an answer: a miss (nothing compiled for these shapes yet), not a refusal.
  auto client = Lookup(Ca() + Token("client.token"), "right_role");
  EXPECT_EQ(client.exit_code, 3) << client.err;
}

TEST_F(TlsAuthTest, PlaintextOrAnUntrustedCertificateDoesNotConnect) {
  auto plain = Lookup("", "plaintext");
  EXPECT_EQ(plain.exit_code, 5) << plain.err;
  EXPECT_NE(plain.err.find("cannot reach kiln-server"), std::string::npos) << plain.err;
  // A client that does not trust the server's CA.
  auto untrusted = Lookup(" --tls-ca " + (dir_ / "other-ca.pem").string() + Token("client.token"), "untrusted");
  EXPECT_EQ(untrusted.exit_code, 5) << untrusted.err;
  // A token is never sent over plaintext.
  auto leak = Lookup(Token("client.token"), "token_without_tls");
  EXPECT_EQ(leak.exit_code, 4) << leak.err;
  EXPECT_NE(leak.err.find("need --tls-ca"), std::string::npos) << leak.err;
}

TEST_F(TlsAuthTest, ACertificateWorkerTunesAndATokenClientCompiles) {
  const std::string pkg = (dir_ / "tuned.kpkg").string();
  auto compile = RunCommandSplit(Kiln("compile " + (dir_ / "mlp" / "mlp.onnx").string() +
                                      " --shape x=4,64 --trials 2 -q --server " + address_ + Ca() +
                                      Token("client.token") + " -o " + pkg),
                                 dir_ / "compile");
  ASSERT_EQ(compile.exit_code, 0) << compile.err << e2e::ReadWholeFile(dir_ / "worker.log");
  EXPECT_NE(compile.out.find(", 4 trials measured"), std::string::npos) << compile.out;
  EXPECT_TRUE(fs::exists(pkg));
}

TEST_F(TlsAuthTest, AWorkerActsOnlyAsItselfAndReportsOnlyTasksItHolds) {
  auto stub = WorkerStub("worker.token");
  kiln::v1::RegisterRequest reg;
  reg.set_hostname("test");
  reg.mutable_device()->set_kind("cpu");
  reg.mutable_device()->set_arch("x86_64");
  reg.mutable_device()->set_cpu_name("znver4");
  kiln::v1::RegisterResponse registered;
  {
    grpc::ClientContext context;
    grpc::Status s = stub->Register(&context, reg, &registered);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  // A result for a task it never leased: refused, not recorded.
  kiln::v1::ReportResultsRequest report;
  report.set_worker_id(registered.worker_id());
  auto* result = report.add_results();
  result->set_task_id("t-not-leased");
  result->set_median_ms(0.001);
  result->set_repeats(10);
  kiln::v1::ReportResultsResponse answer;
  {
    grpc::ClientContext context;
    grpc::Status s = stub->ReportResults(&context, report, &answer);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(answer.accepted(), 0);
  EXPECT_EQ(answer.rejected(), 1);

  // Another identity cannot use this worker's id.
  WriteText(dir_ / "worker2.token", "worker-secret-2");
  std::string auth = e2e::ReadWholeFile(dir_ / "auth.txt");
  WriteText(dir_ / "auth.txt", auth + TokenLine("worker", "intruder", "worker-secret-2"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // the server re-reads it at most once a second
  auto intruder = WorkerStub("worker2.token");
  kiln::v1::LeaseTasksRequest lease;
  lease.set_worker_id(registered.worker_id());
  lease.set_max_tasks(1);
  kiln::v1::LeaseTasksResponse leased;
  grpc::ClientContext context;
  grpc::Status s = intruder->LeaseTasks(&context, lease, &leased);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find("registered by 'token-worker', not by 'intruder'"), std::string::npos)
      << s.error_message();
  WriteText(dir_ / "auth.txt", auth);
}

TEST_F(TlsAuthTest, ATokenRemovedFromTheAuthFileStopsWorkingWithoutARestart) {
  const std::string before = e2e::ReadWholeFile(dir_ / "auth.txt");
  ASSERT_EQ(Lookup(Ca() + Token("client.token"), "before_rotation").exit_code, 3);
  // Rotate: the old client token goes, a new one comes.
  WriteText(dir_ / "client2.token", "client-secret-2");
  std::string rotated = before;
  const std::string old_line = TokenLine("client", "ci", "client-secret-1");
  rotated.replace(rotated.find(old_line), old_line.size(), TokenLine("client", "ci", "client-secret-2"));
  WriteText(dir_ / "auth.txt", rotated);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  auto old_token = Lookup(Ca() + Token("client.token"), "old_token");
  EXPECT_EQ(old_token.exit_code, 7) << old_token.err;
  EXPECT_NE(old_token.err.find("unknown token"), std::string::npos) << old_token.err;
  EXPECT_EQ(Lookup(Ca() + Token("client2.token"), "new_token").exit_code, 3);
  // A broken file keeps the one before it.
  WriteText(dir_ / "auth.txt", "client ci not-a-credential\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(Lookup(Ca() + Token("client2.token"), "after_bad_file").exit_code, 3);
  WriteText(dir_ / "auth.txt", before);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
}

TEST_F(TlsAuthTest, AdminCallsNeedTheAdminRoleAndListTheWorkers) {
  auto as_client = Admin("workers", "client.token", "admin_as_client");
  EXPECT_EQ(as_client.exit_code, 7) << as_client.err;
  EXPECT_NE(as_client.err.find("PERMISSION_DENIED: 'ci' has the roles client; this call needs admin"),
            std::string::npos)
      << as_client.err;
  // The certificate worker of the fixture, as the identity the auth file gives its certificate.
  auto listed = Admin("workers", "admin.token", "admin_workers");
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("as gpu-1"), std::string::npos) << listed.out;
  // gc: what it leaves, a second gc leaves too and frees nothing.
  auto first = Admin("gc --max-bytes 0 --json", "admin.token", "admin_gc1");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto second = Admin("gc --max-bytes 0 --json", "admin.token", "admin_gc2");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  auto a = e2e::ParseJson(first.out), b = e2e::ParseJson(second.out);
  ASSERT_TRUE(a.ok() && b.ok()) << first.out << second.out;
  EXPECT_EQ(b->fields().at("bytes_freed").number_value(), 0);
  EXPECT_EQ(b->fields().at("artifact_bytes_left").number_value(), a->fields().at("artifact_bytes_left").number_value());
  auto unknown = Admin("drain w-nobody", "admin.token", "admin_drain_unknown");
  EXPECT_EQ(unknown.exit_code, 3) << unknown.err;
  EXPECT_NE(unknown.err.find("no worker 'w-nobody'"), std::string::npos) << unknown.err;
}

TEST_F(TlsAuthTest, AnAdminCancelsRunningTuningJobsAndTheirCompileFails) {
  // A compile with more trials than the test waits for.
  const fs::path log = dir_ / "long_compile.log";
  pid_t compile = e2e::Spawn({kBin + "/client/kiln", "compile", (dir_ / "mlp" / "mlp.onnx").string(), "--shape",
                              "x=24,64", "--trials", "400", "-q", "--server", address_, "--tls-ca",
                              (dir_ / "ca.pem").string(), "--token-file", (dir_ / "client.token").string(), "-o",
                              (dir_ / "never.kpkg").string()},
                             log);
  std::vector<double> running;
  for (int i = 0; i < 600 && running.empty(); ++i) {
    auto jobs = Admin("jobs --state running --json", "admin.token", "admin_jobs_running");
    ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
    auto parsed = e2e::ParseJson(jobs.out);
    ASSERT_TRUE(parsed.ok()) << jobs.out;
    for (const auto& job : parsed->fields().at("jobs").list_value().values()) {
      running.push_back(job.struct_value().fields().at("job_id").number_value());
    }
    if (running.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(running.empty()) << e2e::ReadWholeFile(log);
  for (double id : running) {
    const std::string job = std::to_string(static_cast<int64_t>(id));
    auto cancelled = Admin("cancel " + job + " --reason 'test' --json", "admin.token", "admin_cancel_" + job);
    // A job may end on its own in between: then it is no longer running.
    EXPECT_TRUE(cancelled.exit_code == 0 || cancelled.err.find("has ended already") != std::string::npos)
        << cancelled.err;
  }
  int status = 0;
  ASSERT_EQ(waitpid(compile, &status, 0), compile);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0) << e2e::ReadWholeFile(log);
  EXPECT_NE(e2e::ReadWholeFile(log).find("cancelled by admin 'ops': test"), std::string::npos)
      << e2e::ReadWholeFile(log);
  auto listed = Admin("jobs --state cancelled --json", "admin.token", "admin_jobs_cancelled");
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("cancelled by admin 'ops': test"), std::string::npos) << listed.out;
  auto again = Admin("cancel " + std::to_string(static_cast<int64_t>(running[0])), "admin.token", "admin_cancel_again");
  EXPECT_EQ(again.exit_code, 1) << again.err;
  EXPECT_NE(again.err.find("has ended already (cancelled)"), std::string::npos) << again.err;
}

TEST_F(TlsAuthTest, ADrainedWorkerReportsWhatItHoldsAndStops) {
  const fs::path log = dir_ / "drained_worker.log";
  pid_t worker = e2e::Spawn({kBin + "/worker/kiln-worker", "--server", address_, "--tls-ca",
                             (dir_ / "ca.pem").string(), "--token-file", (dir_ / "worker.token").string(),
                             "--name", "drain-me"},
                            log);
  std::string id;
  for (int i = 0; i < 300 && id.empty(); ++i) {
    auto listed = Admin("workers --json", "admin.token", "admin_workers_json");
    ASSERT_EQ(listed.exit_code, 0) << listed.err;
    auto parsed = e2e::ParseJson(listed.out);
    ASSERT_TRUE(parsed.ok()) << listed.out;
    for (const auto& w : parsed->fields().at("workers").list_value().values()) {
      const auto& f = w.struct_value().fields();
      if (f.at("hostname").string_value() == "drain-me") id = f.at("worker_id").string_value();
    }
    if (id.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(id.empty()) << e2e::ReadWholeFile(log);
  auto drained = Admin("drain " + id, "admin.token", "admin_drain");
  ASSERT_EQ(drained.exit_code, 0) << drained.err;
  EXPECT_NE(drained.out.find("draining " + id), std::string::npos) << drained.out;
  // It stops by itself, with a clean exit, and the server forgets it.
  int status = -1;
  for (int i = 0; i < 600; ++i) {
    if (waitpid(worker, &status, WNOHANG) == worker) break;
    status = -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (status == -1) e2e::StopProcess(worker);
  ASSERT_NE(status, -1) << "the drained worker did not stop\n" << e2e::ReadWholeFile(log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << e2e::ReadWholeFile(log);
  EXPECT_NE(e2e::ReadWholeFile(log).find("drained by the server; stopping"), std::string::npos);
  auto after = Admin("workers", "admin.token", "admin_workers_after");
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(after.out.find(id + " "), std::string::npos) << after.out;
  EXPECT_NE(after.out.find("as gpu-1"), std::string::npos) << after.out;  // the other one serves on
}

TEST(TlsAuthStartTest, AnAuthFileWithoutTlsOrABadOneIsRefusedAtStart) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("kiln_tls_start_" + std::to_string(getpid()));
  fs::create_directories(dir);
  WriteText(dir / "auth.txt", "client ci sha256:" + Sha256Hex("x") + "\n");
  auto plain = RunCommandSplit(kBin + "/server/kiln-server --listen 127.0.0.1:0 --db " + (dir / "db").string() +
                                   " --auth-file " + (dir / "auth.txt").string(),
                               dir / "plain");
  EXPECT_EQ(plain.exit_code, 4) << plain.err;
  EXPECT_NE(plain.err.find("--auth-file needs TLS"), std::string::npos) << plain.err;
  WriteText(dir / "bad.txt", "client ci sha256:" + Sha256Hex("x") + "\nsuperuser bob cert:bob\n");
  auto bad = RunCommandSplit(kBin + "/server/kiln-server --listen 127.0.0.1:0 --db " + (dir / "db").string() +
                                 " --tls-cert /dev/null --tls-key /dev/null --auth-file " + (dir / "bad.txt").string(),
                             dir / "bad");
  EXPECT_EQ(bad.exit_code, 4) << bad.err;
  EXPECT_NE(bad.err.find("line 2: unknown role 'superuser'"), std::string::npos) << bad.err;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace kiln
