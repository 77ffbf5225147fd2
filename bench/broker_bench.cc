// Tuning-farm broker benchmark: where one server tops out. A real WorkerService
// (TaskBroker, ServerMetrics, gRPC on 127.0.0.1) serves N simulated workers, each
// a thread on a gRPC connection of its own that registers, heartbeats, leases
// one task at a time (long-polling as worker/worker.cc does) and reports a
// made-up successful result at once, while a producer keeps max(256, 4*N) tasks
// in flight. Per worker count, after a warm-up: tasks/s completed, lease-to-report
// and submit-to-outcome latency, and what grows with N (RSS, threads, file
// descriptors, process CPU per 1,000 tasks, simulated workers included).
// Usage: kiln_bench_broker [--workers 10,100,1000] [--seconds 20] [--warmup 2]
//                          [--lease-wait-ms 1000] [--in-flight N]
//   e.g. build/bench/kiln_bench_broker --workers 10,100,1000 --seconds 20
#include <dirent.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <future>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "base/log.h"
#include "compiler_core/codegen/schedule_space.h"
#include "grpcpp/grpcpp.h"
#include "kiln/v1/worker.grpc.pb.h"
#include "server/metrics.h"
#include "server/task_broker.h"
#include "server/farm_target.h"
#include "server/worker_service.h"

namespace {

using Clock = std::chrono::steady_clock;
using kiln::server::TaskBroker;
using kiln::server::TaskOutcome;

constexpr char kWorkloadPrefix[] = "bench-matmul/";

struct Flags {
  std::vector<int> workers = {10, 100, 1000};
  double seconds = 20;
  double warmup_seconds = 2;
  int lease_wait_ms = 1000;  // worker/worker.h's default long-poll
  // Tasks kept in flight; 0: max(256, 4 x workers), a queue that never runs
  // dry. Fewer than the workers leaves some long-polling.
  int in_flight = 0;
};

// What every simulated worker registers as: a CPU worker as DescribeCpu
// describes one, of a made-up machine so that the target key does not depend
// on the host.
kiln::v1::DeviceInfo BenchDevice() {
  kiln::v1::DeviceInfo d;
  d.set_kind("cpu");
  d.set_arch("x86_64");
  d.set_cpu_name("znver4");
  for (const char* f : {"avx", "avx2", "fma", "sse4.2"}) d.add_features(f);
  d.set_device_model("kiln bench simulated worker");
  d.set_cores(1);
  d.set_space_version(kiln::kScheduleSpaceVersion);
  d.set_measure_threads(1);
  return d;
}

// A task as the tuner queues one (server/tuner.cc TaskTemplate): a one-node
// matmul fusion group. The workload key carries the task's sequence number,
// so that no two tasks are merged and a worker can find its submit time.
kiln::v1::MeasureTask BenchTask(int64_t seq) {
  kiln::v1::MeasureTask t;
  t.set_workload_key(absl::StrCat(kWorkloadPrefix, seq));
  t.set_schedule_config("mc=64,nc=256,kc=256,mr=6,nr=16");
  t.set_space_version(kiln::kScheduleSpaceVersion);
  kiln::v1::Graph* g = t.mutable_workload();
  g->set_name("matmul");
  g->set_opset_version(17);
  auto add_value = [](google::protobuf::RepeatedPtrField<kiln::v1::ValueInfo>* list, const char* name,
                      std::initializer_list<int64_t> dims) {
    kiln::v1::ValueInfo* v = list->Add();
    v->set_name(name);
    v->mutable_type()->set_dtype(kiln::v1::FLOAT32);
    for (int64_t d : dims) v->mutable_type()->add_dims()->set_value(d);
  };
  add_value(g->mutable_inputs(), "a", {256, 512});
  add_value(g->mutable_inputs(), "b", {512, 256});
  add_value(g->mutable_outputs(), "y", {256, 256});
  kiln::v1::Node* n = g->add_nodes();
  n->set_name("mm0");
  n->set_op_type("MatMul");
  n->add_inputs("a");
  n->add_inputs("b");
  n->add_outputs("y");
  kiln::v1::MeasureOptions* o = t.mutable_options();
  o->set_warmup_runs(2);
  o->set_min_repeats(5);
  o->set_min_time_ms(10);
  o->set_rtol(1e-4);
  o->set_atol(1e-5);
  return t;
}

int64_t Nanos(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

enum class Phase { kWarmup, kMeasure, kDone };

// One worker count's run: what the producer, the workers and main share.
struct Round {
  Round(int window, int lease_wait_ms)
      : window(window), lease_wait_ms(lease_wait_ms), ring(4 * static_cast<size_t>(window)) {
    submitted_ns = std::make_unique<std::atomic<int64_t>[]>(ring);
  }
  const int window;  // tasks in flight
  const int lease_wait_ms;
  // Submit time of task `seq` at [seq % ring]: a slot is reused only long
  // after its task finished (ring > window).
  const size_t ring;
  std::unique_ptr<std::atomic<int64_t>[]> submitted_ns;

  std::atomic<Phase> phase{Phase::kWarmup};
  std::atomic<bool> stop_producing{false};
  std::atomic<bool> stop_workers{false};
  std::atomic<int> started{0};        // workers registered (or failed to)
  std::atomic<int64_t> completed{0};  // futures fulfilled with a worker's result
  std::atomic<int64_t> given_up{0};   // futures fulfilled by the broker giving up
};

// What one simulated worker saw while Phase::kMeasure; merged after the round.
struct WorkerTally {
  std::vector<double> lease_to_report_ms;
  std::vector<double> submit_to_outcome_ms;
  int64_t rejected = 0;
  int64_t rpc_errors = 0;
};

void SetDeadline(grpc::ClientContext* ctx, int ms) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

// The worker/worker.cc loop without measuring: Register, then LeaseTasks
// (max_tasks 1, long-poll) and ReportResults at once, heartbeating every
// interval the server asks for (inline, not on a thread of its own: the same
// RPCs without doubling the threads).
void RunWorker(int index, const std::string& address, Round* round, WorkerTally* tally) {
  pthread_setname_np(pthread_self(), "bench-worker");
  grpc::ChannelArguments args;
  // A distinct argument: a subchannel, and so a TCP connection, of its own.
  args.SetInt("kiln.bench_worker", index);
  auto stub =
      kiln::v1::WorkerService::NewStub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  constexpr int kRpcTimeoutMs = 30'000;

  kiln::v1::RegisterRequest reg;
  reg.set_hostname(absl::StrCat("bench-worker-", index));
  reg.set_pid(static_cast<int32_t>(getpid()));
  *reg.mutable_device() = BenchDevice();
  kiln::v1::RegisterResponse registered;
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kRpcTimeoutMs);
    grpc::Status s = stub->Register(&ctx, reg, &registered);
    if (!s.ok()) {
      std::fprintf(stderr, "worker %d: register failed: %s\n", index, s.error_message().c_str());
      ++tally->rpc_errors;
      round->started.fetch_add(1);
      return;
    }
  }
  round->started.fetch_add(1);
  const auto heartbeat_interval = std::chrono::milliseconds(std::max(1, registered.heartbeat_interval_ms()));
  auto next_heartbeat = Clock::now() + heartbeat_interval;

  while (!round->stop_workers.load()) {
    if (Clock::now() >= next_heartbeat) {
      kiln::v1::HeartbeatRequest req;
      req.set_worker_id(registered.worker_id());
      kiln::v1::HeartbeatResponse resp;
      grpc::ClientContext ctx;
      SetDeadline(&ctx, kRpcTimeoutMs);
      if (!stub->Heartbeat(&ctx, req, &resp).ok() || !resp.known()) ++tally->rpc_errors;
      next_heartbeat = Clock::now() + heartbeat_interval;
    }
    kiln::v1::LeaseTasksRequest req;
    req.set_worker_id(registered.worker_id());
    req.set_max_tasks(1);
    req.set_wait_ms(round->lease_wait_ms);
    kiln::v1::LeaseTasksResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx, req.wait_ms() + kRpcTimeoutMs);
    grpc::Status s = stub->LeaseTasks(&ctx, req, &resp);
    const Clock::time_point leased = Clock::now();
    if (!s.ok()) {
      ++tally->rpc_errors;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    for (const kiln::v1::MeasureTask& task : resp.tasks()) {
      int64_t submitted_ns = 0;
      int64_t seq = 0;
      const std::string& key = task.workload_key();
      if (absl::SimpleAtoi(absl::string_view(key).substr(sizeof(kWorkloadPrefix) - 1), &seq)) {
        submitted_ns = round->submitted_ns[static_cast<size_t>(seq) % round->ring].load(std::memory_order_relaxed);
      }
      kiln::v1::ReportResultsRequest report;
      report.set_worker_id(registered.worker_id());
      kiln::v1::MeasureResult* r = report.add_results();
      r->set_task_id(task.task_id());
      r->set_error(kiln::v1::MEASURE_OK);
      r->set_median_ms(0.01);
      r->set_p10_ms(0.009);
      r->set_p90_ms(0.012);
      r->set_repeats(1000);
      kiln::v1::ReportResultsResponse reported;
      grpc::ClientContext report_ctx;
      SetDeadline(&report_ctx, kRpcTimeoutMs);
      if (!stub->ReportResults(&report_ctx, report, &reported).ok()) {
        ++tally->rpc_errors;
        continue;
      }
      const Clock::time_point done = Clock::now();
      if (round->phase.load() != Phase::kMeasure) continue;
      tally->rejected += reported.rejected();
      tally->lease_to_report_ms.push_back(std::chrono::duration<double, std::milli>(done - leased).count());
      if (submitted_ns > 0) {
        tally->submit_to_outcome_ms.push_back(static_cast<double>(Nanos(done) - submitted_ns) / 1e6);
      }
    }
  }
}

// Keeps round->window tasks in flight and counts the outcomes, oldest first
// (the latencies are taken by the workers, so a task that finishes behind a
// slower older one is counted late but timed right).
void RunProducer(TaskBroker* broker, const std::string& target_key, Round* round) {
  pthread_setname_np(pthread_self(), "bench-producer");
  std::deque<std::shared_future<TaskOutcome>> in_flight;
  auto count = [round](const TaskOutcome& o) { (o.worker_id.empty() ? round->given_up : round->completed)++; };
  int64_t seq = 1;
  while (!round->stop_producing.load()) {
    while (static_cast<int>(in_flight.size()) < round->window) {
      round->submitted_ns[static_cast<size_t>(seq) % round->ring].store(Nanos(Clock::now()), std::memory_order_relaxed);
      in_flight.push_back(broker->Submit(target_key, BenchTask(seq)));
      ++seq;
    }
    if (in_flight.front().wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) continue;
    while (!in_flight.empty() && in_flight.front().wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      count(in_flight.front().get());
      in_flight.pop_front();
    }
  }
  // The workers still run: what is in flight finishes (or the broker's
  // destructor fails it, past the deadline).
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  for (const auto& f : in_flight) {
    if (f.wait_until(deadline) != std::future_status::ready) break;
    count(f.get());
  }
}

struct ProcessStats {
  int64_t rss_kib = 0;
  int threads = 0;
  int fds = 0;
  double cpu_seconds = 0;  // user + system, every thread
};

ProcessStats ReadProcessStats() {
  ProcessStats stats;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    long value = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %ld", &value) == 1) stats.rss_kib = value;
    if (std::sscanf(line.c_str(), "Threads: %ld", &value) == 1) stats.threads = static_cast<int>(value);
  }
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') ++stats.fds;
    }
    closedir(dir);
    --stats.fds;  // the directory's own
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  stats.cpu_seconds = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  return stats;
}

// The sum of a counter family's series in the server's registry.
double CounterTotal(const kiln::server::ServerMetrics& metrics, const std::string& name) {
  double total = 0;
  for (const prometheus::MetricFamily& family : metrics.registry()->Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& m : family.metric) total += m.counter.value;
  }
  return total;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

struct Row {
  int workers = 0, window = 0;
  double tasks_per_second = 0;
  double lease_to_report_p50 = 0, lease_to_report_p99 = 0;
  double submit_to_outcome_p50 = 0, submit_to_outcome_p99 = 0;
  ProcessStats process;  // at the end of the measured window
  double cpu_seconds_per_1k = 0;
  int64_t rejected = 0, leases_lost = 0, given_up = 0, rpc_errors = 0;
};

// A fresh farm for `workers` simulated workers: warm-up, the measured window,
// then everything stopped (so each row starts from the same empty broker).
bool RunRound(int workers, const Flags& flags, Row* row) {
  kiln::server::ServerMetrics metrics;
  TaskBroker broker(TaskBroker::Options{}, &metrics);
  kiln::server::WorkerServiceImpl service(&broker, &metrics, nullptr);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "cannot start the gRPC server on 127.0.0.1\n");
    return false;
  }
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const std::string target_key = kiln::server::FarmTargetKeyOf(BenchDevice());

  Round round(flags.in_flight > 0 ? flags.in_flight : std::max(256, 4 * workers), flags.lease_wait_ms);
  std::vector<WorkerTally> tallies(static_cast<size_t>(workers));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(workers));
  for (int i = 0; i < workers; ++i) threads.emplace_back(RunWorker, i, address, &round, &tallies[i]);
  while (round.started.load() < workers) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::thread producer(RunProducer, &broker, target_key, &round);

  std::this_thread::sleep_for(std::chrono::duration<double>(flags.warmup_seconds));
  const ProcessStats before = ReadProcessStats();
  const int64_t completed_before = round.completed.load();
  const Clock::time_point start = Clock::now();
  round.phase = Phase::kMeasure;
  std::this_thread::sleep_for(std::chrono::duration<double>(flags.seconds));
  round.phase = Phase::kDone;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const int64_t completed = round.completed.load() - completed_before;
  const ProcessStats after = ReadProcessStats();

  round.stop_producing = true;
  producer.join();
  round.stop_workers = true;
  for (std::thread& t : threads) t.join();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();

  std::vector<double> lease_to_report, submit_to_outcome;
  row->workers = workers;
  row->window = round.window;
  for (WorkerTally& t : tallies) {
    lease_to_report.insert(lease_to_report.end(), t.lease_to_report_ms.begin(), t.lease_to_report_ms.end());
    submit_to_outcome.insert(submit_to_outcome.end(), t.submit_to_outcome_ms.begin(), t.submit_to_outcome_ms.end());
    row->rejected += t.rejected;
    row->rpc_errors += t.rpc_errors;
  }
  row->tasks_per_second = static_cast<double>(completed) / elapsed;
  row->lease_to_report_p50 = Percentile(lease_to_report, 0.50);
  row->lease_to_report_p99 = Percentile(lease_to_report, 0.99);
  row->submit_to_outcome_p50 = Percentile(submit_to_outcome, 0.50);
  row->submit_to_outcome_p99 = Percentile(submit_to_outcome, 0.99);
  row->process = after;
  row->cpu_seconds_per_1k =
      completed > 0 ? (after.cpu_seconds - before.cpu_seconds) * 1000 / static_cast<double>(completed) : 0;
  row->leases_lost = static_cast<int64_t>(CounterTotal(metrics, "kiln_leases_lost_total"));
  row->given_up = round.given_up.load();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as kiln-server runs
  Flags flags;
  CLI::App app{"kiln_bench_broker: N simulated workers leasing and reporting against one WorkerService"};
  app.add_option("--workers", flags.workers, "worker counts to run, one after the other (10,100,1000)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1000000));
  app.add_option("--seconds", flags.seconds, "measured seconds per worker count")->check(CLI::Range(0.1, 1e6));
  app.add_option("--warmup", flags.warmup_seconds, "seconds before measuring")->check(CLI::Range(0.0, 1e6));
  app.add_option("--lease-wait-ms", flags.lease_wait_ms, "a worker's long-poll")->check(CLI::Range(1, 1000000));
  app.add_option("--in-flight", flags.in_flight, "tasks kept in flight; 0: max(256, 4 x workers)")
      ->check(CLI::Range(0, 1000000));
  CLI11_PARSE(app, argc, argv);
  // Each worker is a TCP connection: two descriptors in this process.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  const int most_workers = *std::max_element(flags.workers.begin(), flags.workers.end());
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < static_cast<rlim_t>(2 * most_workers + 256)) {
    std::fprintf(stderr, "warning: %llu open files allowed; %d workers need about %d\n",
                 static_cast<unsigned long long>(files.rlim_cur), most_workers, 2 * most_workers + 256);
  }
  kiln::SetMinLogLevel(kiln::LogLevel::kWarning);  // not one line per registering worker

  std::printf(
      "kiln_bench_broker: %.0f s per row after %.0f s of warm-up; LeaseTasks max_tasks 1, wait %d ms; "
      "in flight %s; target %s\n",
      flags.seconds, flags.warmup_seconds, flags.lease_wait_ms,
      flags.in_flight > 0 ? absl::StrCat(flags.in_flight).c_str() : "max(256, 4 x workers)",
      kiln::server::FarmTargetKeyOf(BenchDevice()).c_str());
  std::printf("lease->report: LeaseTasks returned to ReportResults returned, per task, at the worker (ms)\n");
  std::printf(
      "submit->outcome: Submit to the outcome, taken when its ReportResults returns (ms); with the queue never dry it "
      "is mostly queueing (in flight / tasks/s)\n");
  std::printf("RSS, threads, fds: the process at the end of the window; CPU: process user+sys per 1,000 tasks\n");
  std::printf(
      "(server and simulated workers together); lost: leases the broker took back; gave up: TIMEOUT "
      "outcomes\n\n");
  std::printf("%7s %8s %9s %9s %9s %9s %9s %8s %7s %6s %9s %8s %5s %7s %6s\n", "workers", "inflight", "tasks/s",
              "l->r p50", "l->r p99", "s->o p50", "s->o p99", "RSS MiB", "threads", "fds", "CPU s/1k", "rejected",
              "lost", "gave up", "errors");
  std::fflush(stdout);
  for (int workers : flags.workers) {
    Row row;
    if (!RunRound(workers, flags, &row)) return 1;
    std::printf("%7d %8d %9.0f %9.3f %9.3f %9.3f %9.3f %8.1f %7d %6d %9.3f %8lld %5lld %7lld %6lld\n", row.workers,
                row.window, row.tasks_per_second, row.lease_to_report_p50, row.lease_to_report_p99,
                row.submit_to_outcome_p50, row.submit_to_outcome_p99, static_cast<double>(row.process.rss_kib) / 1024,
                row.process.threads, row.process.fds, row.cpu_seconds_per_1k, static_cast<long long>(row.rejected),
                static_cast<long long>(row.leases_lost), static_cast<long long>(row.given_up),
                static_cast<long long>(row.rpc_errors));
    std::fflush(stdout);
  }
  return 0;
}
