// End-to-end tests of the worker loop against a real gRPC WorkerService served
// on 127.0.0.1 by this test: register, heartbeat, lease, measure, report,
// re-register, retry while the server is away, and the kiln-worker binary.
#include "worker/worker.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/worker/workload_protos.h"

extern char** environ;

namespace kiln::worker {
namespace {

using testing::AddGraph;
using testing::MakeTask;
using testing::MatMulGraph;

class FakeWorkerService final : public kiln::v1::WorkerService::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const kiln::v1::RegisterRequest* req,
                        kiln::v1::RegisterResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    ++registrations;
    last_register = *req;
    resp->set_worker_id("w" + std::to_string(registrations));
    resp->set_target_key("cpu/test");
    resp->set_heartbeat_interval_ms(50);
    resp->set_lease_timeout_ms(5000);
    cv.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*, const kiln::v1::HeartbeatRequest* req,
                         kiln::v1::HeartbeatResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    ++heartbeats;
    for (const std::string& id : req->held_task_ids()) held_seen.insert(id);
    resp->set_known(!forget_worker);
    forget_worker = false;
    cv.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status LeaseTasks(grpc::ServerContext*, const kiln::v1::LeaseTasksRequest* req,
                          kiln::v1::LeaseTasksResponse* resp) override {
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_EQ(req->max_tasks(), 1);
    cv.wait_for(lock, std::chrono::milliseconds(std::min(req->wait_ms(), 200)),
                [this] { return !queue.empty(); });
    if (!queue.empty()) {
      *resp->add_tasks() = queue.front();
      queue.pop_front();
    }
    return grpc::Status::OK;
  }

  grpc::Status ReportResults(grpc::ServerContext*, const kiln::v1::ReportResultsRequest* req,
                             kiln::v1::ReportResultsResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    for (const kiln::v1::MeasureResult& r : req->results()) {
      results.push_back(r);
      reporters.push_back(req->worker_id());
    }
    resp->set_accepted(req->results_size());
    cv.notify_all();
    return grpc::Status::OK;
  }

  void Enqueue(kiln::v1::MeasureTask task) {
    std::lock_guard<std::mutex> lock(mu);
    queue.push_back(std::move(task));
    cv.notify_all();
  }

  // Waits until `pred` holds (under the lock) or 60 s pass.
  template <typename Pred>
  bool WaitFor(Pred pred) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), pred);
  }

  std::mutex mu;
  std::condition_variable cv;
  std::deque<kiln::v1::MeasureTask> queue;
  std::vector<kiln::v1::MeasureResult> results;
  std::vector<std::string> reporters;
  std::set<std::string> held_seen;
  kiln::v1::RegisterRequest last_register;
  int registrations = 0;
  int heartbeats = 0;
  bool forget_worker = false;
};

struct TestServer {
  explicit TestServer(FakeWorkerService* service, int port = 0) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port),
                             grpc::InsecureServerCredentials(), &bound_port);
    builder.RegisterService(service);
    server = builder.BuildAndStart();
  }
  ~TestServer() {
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(bound_port); }
  int bound_port = 0;
  std::unique_ptr<grpc::Server> server;
};

// Runs a Worker on a thread until the test stops it.
struct RunningWorker {
  explicit RunningWorker(Worker::Options options) : worker(std::move(options)) {
    thread = std::thread([this] { status = worker.Run(&stop); });
  }
  ~RunningWorker() { Stop(); }
  void Stop() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
  Worker worker;
  std::atomic<bool> stop{false};
  absl::Status status = absl::UnknownError("not finished");
  std::thread thread;
};

Worker::Options OptionsFor(const std::string& address, bool isolate) {
  Worker::Options o;
  o.server = address;
  o.isolate = isolate;
  o.name = "test-worker";
  o.lease_wait_ms = 100;
  o.max_backoff_ms = 200;
  return o;
}

class WorkerTest : public ::testing::TestWithParam<bool> {};

TEST_P(WorkerTest, MeasuresLeasedTasksAndReports) {
  FakeWorkerService service;
  TestServer server(&service);
  ASSERT_NE(server.bound_port, 0);
  kiln::v1::MeasureTask slow = MakeTask("t-mm", MatMulGraph(192, 192, 192), "");
  slow.mutable_options()->set_min_time_ms(300);  // long enough to be heartbeated
  service.Enqueue(slow);
  service.Enqueue(MakeTask("t-bad", AddGraph(4, 4), "not a config"));

  RunningWorker w(OptionsFor(server.address(), /*isolate=*/GetParam()));
  ASSERT_TRUE(service.WaitFor([&] { return service.results.size() >= 2; }));
  w.Stop();
  EXPECT_TRUE(w.status.ok()) << w.status;

  std::lock_guard<std::mutex> lock(service.mu);
  EXPECT_EQ(service.last_register.hostname(), "test-worker");
  EXPECT_EQ(service.last_register.pid(), getpid());
  EXPECT_EQ(service.last_register.device().kind(), "cpu");
  EXPECT_FALSE(service.last_register.device().cpu_name().empty());
  ASSERT_EQ(service.results.size(), 2u);
  EXPECT_EQ(service.results[0].task_id(), "t-mm");
  EXPECT_EQ(service.results[0].error(), kiln::v1::MEASURE_OK)
      << service.results[0].error_message();
  EXPECT_GT(service.results[0].median_ms(), 0.0);
  EXPECT_GE(service.results[0].repeats(), 3);
  EXPECT_EQ(service.results[1].task_id(), "t-bad");
  EXPECT_EQ(service.results[1].error(), kiln::v1::BUILD_ERROR);
  EXPECT_EQ(service.reporters[0], "w1");
  EXPECT_GT(service.heartbeats, 0);
  EXPECT_TRUE(service.held_seen.count("t-mm")) << "the held task was never heartbeated";
  EXPECT_EQ(w.worker.tasks_measured(), 2);
  EXPECT_EQ(w.worker.results_with(kiln::v1::MEASURE_OK), 1);
  EXPECT_EQ(w.worker.results_with(kiln::v1::BUILD_ERROR), 1);
}

INSTANTIATE_TEST_SUITE_P(IsolatedAndInProcess, WorkerTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Isolated" : "InProcess";
                         });

TEST(WorkerLoopTest, RegistersAgainWhenTheServerForgetsIt) {
  FakeWorkerService service;
  TestServer server(&service);
  RunningWorker w(OptionsFor(server.address(), true));
  ASSERT_TRUE(service.WaitFor([&] { return service.registrations >= 1 && service.heartbeats >= 1; }));
  {
    std::lock_guard<std::mutex> lock(service.mu);
    service.forget_worker = true;
  }
  ASSERT_TRUE(service.WaitFor([&] { return service.registrations >= 2; }));
  // It keeps working under its new id.
  service.Enqueue(MakeTask("after", AddGraph(2, 2), ""));
  ASSERT_TRUE(service.WaitFor([&] { return !service.results.empty(); }));
  w.Stop();
  EXPECT_TRUE(w.status.ok()) << w.status;
  std::lock_guard<std::mutex> lock(service.mu);
  EXPECT_EQ(service.reporters.back(), "w2");
  EXPECT_EQ(service.results.back().error(), kiln::v1::MEASURE_OK);
}

TEST(WorkerLoopTest, WaitsForAServerThatStartsLater) {
  int port = 0;
  {
    FakeWorkerService probe;
    TestServer free_port(&probe);
    port = free_port.bound_port;
  }
  ASSERT_NE(port, 0);
  RunningWorker w(OptionsFor("127.0.0.1:" + std::to_string(port), true));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_GT(w.worker.rpc_errors(), 0);
  EXPECT_EQ(w.worker.registrations(), 0);

  FakeWorkerService service;
  TestServer server(&service, port);
  ASSERT_EQ(server.bound_port, port);
  service.Enqueue(MakeTask("late", AddGraph(3, 3), ""));
  ASSERT_TRUE(service.WaitFor([&] { return !service.results.empty(); }));
  w.Stop();
  EXPECT_TRUE(w.status.ok()) << w.status;
}

TEST(WorkerLoopTest, StopsCleanlyWhileTheServerIsUnreachable) {
  RunningWorker w(OptionsFor("127.0.0.1:1", true));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  w.Stop();
  EXPECT_TRUE(w.status.ok()) << w.status;
  EXPECT_GT(w.worker.rpc_errors(), 0);
  EXPECT_EQ(w.worker.tasks_measured(), 0);
}

TEST(WorkerLoopTest, BadDeviceIsAnError) {
  Worker::Options o = OptionsFor("127.0.0.1:1", true);
  o.device = "tpu:0";
  Worker w(o);
  std::atomic<bool> stop{false};
  EXPECT_EQ(w.Run(&stop).code(), absl::StatusCode::kInvalidArgument);

  o.device = "cuda:0";
  Worker cuda(o);
  absl::Status s = cuda.Run(&stop);
  // No driver: UNAVAILABLE "no CUDA driver"; a driver: GPU measurement is not built yet.
  EXPECT_TRUE(s.code() == absl::StatusCode::kUnavailable ||
              s.code() == absl::StatusCode::kUnimplemented)
      << s;
}

// A port that was free a moment ago (bind to 0, read it back, close).
int FreeTcpPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// GET http://127.0.0.1:port/metrics, the whole response; "" on failure.
std::string HttpGetMetrics(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return out;
}

TEST(WorkerLoopTest, ExportsPrometheusMetrics) {
  FakeWorkerService service;
  TestServer server(&service);
  service.Enqueue(MakeTask("m1", AddGraph(2, 3), ""));
  service.Enqueue(MakeTask("m2", AddGraph(2, 3), "vw=="));
  Worker::Options o = OptionsFor(server.address(), true);
  o.metrics_port = FreeTcpPort();
  ASSERT_NE(o.metrics_port, 0);
  RunningWorker w(o);
  ASSERT_TRUE(service.WaitFor([&] { return service.results.size() >= 2; }));
  const std::string metrics = HttpGetMetrics(o.metrics_port);
  w.Stop();
  EXPECT_TRUE(w.status.ok()) << w.status;
  EXPECT_NE(metrics.find("kiln_worker_tasks_total{result=\"ok\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("kiln_worker_tasks_total{result=\"build_error\"} 1"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("kiln_worker_registered 1"), std::string::npos) << metrics;
}

// --- the kiln-worker binary --------------------------------------------------

std::string WorkerBinary() { return std::string(KILN_BINARY_DIR) + "/worker/kiln-worker"; }

pid_t Spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  return pid;
}

int WaitExit(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(WorkerBinaryTest, BadFlagsExitWithUsage) {
  if (!std::filesystem::exists(WorkerBinary())) GTEST_SKIP() << "kiln-worker not built";
  EXPECT_EQ(WaitExit(Spawn({WorkerBinary()})), 2);  // --server is required
  EXPECT_EQ(WaitExit(Spawn({WorkerBinary(), "--server", "x:1", "--bogus"})), 2);
  EXPECT_EQ(WaitExit(Spawn({WorkerBinary(), "--server", "x:1", "--task-timeout-ms", "abc"})), 2);
  // A device the worker cannot parse: INVALID_ARGUMENT, exit 4 (base/exit_codes.h).
  EXPECT_EQ(WaitExit(Spawn({WorkerBinary(), "--server", "x:1", "--device", "tpu"})), 4);
}

TEST(WorkerBinaryTest, ServesThenExitsCleanlyOnSigterm) {
  if (!std::filesystem::exists(WorkerBinary())) GTEST_SKIP() << "kiln-worker not built";
  FakeWorkerService service;
  TestServer server(&service);
  service.Enqueue(MakeTask("bin", AddGraph(5, 5), ""));
  pid_t pid = Spawn({WorkerBinary(), "--server", server.address(), "--name", "bin-worker"});
  ASSERT_GT(pid, 0);
  bool got = service.WaitFor([&] { return !service.results.empty(); });
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid), 0);
  ASSERT_TRUE(got);
  std::lock_guard<std::mutex> lock(service.mu);
  EXPECT_EQ(service.last_register.hostname(), "bin-worker");
  EXPECT_EQ(service.results[0].error(), kiln::v1::MEASURE_OK) << service.results[0].error_message();
}

}  // namespace
}  // namespace kiln::worker
