// The device worker daemon's main loop: register with a server, heartbeat the
// leases it holds, long-poll for measurement tasks, measure each one (isolated
// in a child process by default) and report the results. Network trouble is
// retried with backoff; it never ends the loop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "client/channel_credentials.h"
#include "absl/status/status.h"
#include "client/kiln_client.h"
#include "compiler_core/codegen/target.h"
#include "kiln/v1/worker.grpc.pb.h"
#include "worker/device_process.h"

namespace prometheus {
class Registry;
class Exposer;
template <typename T> class Family;
class Counter;
class Gauge;
}  // namespace prometheus

namespace kiln::worker {

class Worker {
 public:
  struct Options {
    std::string server;            // host:port of the Kiln server (required)
    std::string device = "cpu";    // "cpu" or "cuda:N"
    int heartbeat_ms = 0;          // 0: the interval the server asks for
    bool isolate = true;           // measure in a forked child (crash/hang isolation)
    std::string name;              // sent as RegisterRequest.hostname; default gethostname()
    int task_timeout_ms = 60'000;  // per task, unless the task's deadline is sooner
    int metrics_port = 0;          // Prometheus /metrics on this port; 0 = none
    int lease_wait_ms = 1000;      // LeaseTasks long-poll
    int rpc_timeout_ms = 10'000;   // every RPC, on top of the long-poll wait
    int max_backoff_ms = 5'000;    // cap of the exponential retry backoff
    // Threads one measurement may use (DeviceInfo.measure_threads): tasks of
    // compiles for packages run on up to this many threads are leased too.
    int threads = 1;
    // A named CPU target this worker measures for instead of its own CPU
    // (CpuTarget::Named: "x86-64-v3", "skylake-avx512"): candidates are
    // compiled for it and timed here, standing for the fleet that runs it. The
    // host must run every one of its features. Empty: the host's own target.
    std::string target;
    // How the server is reached when it serves TLS and checks credentials
    // (a worker needs the worker role).
    client::ChannelSecurity security;
    // A GPU worker (device cuda:N) measures in a device process
    // (device_process.h), started from this executable, and assembles its
    // candidates with this ptxas (PtxAssembler::Find; none: the driver JIT).
    std::string executable = "/proc/self/exe";
    std::string ptxas;
  };
  static constexpr int kMaxThreads = 1024;

  explicit Worker(Options options);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Describes the device, then registers (retrying until the server answers),
  // and leases, measures and reports until *stop becomes true or an admin
  // drains it (it reports what it holds first). Returns OK on a clean stop;
  // an error only for what retrying cannot fix: a bad or absent
  // device (INVALID_ARGUMENT, UNAVAILABLE "no CUDA driver: ..."), an unusable
  // metrics port.
  absl::Status Run(std::atomic<bool>* stop);

  // Counters, also exported as Prometheus metrics.
  int64_t tasks_measured() const { return tasks_measured_.load(); }
  int64_t results_with(kiln::v1::MeasureError error) const;
  int64_t registrations() const { return registrations_.load(); }
  int64_t rpc_errors() const { return rpc_errors_.load(); }
  std::string worker_id() const;

 private:
  // Run's GPU branch: the device process, then Serve.
  absl::Status RunGpu(std::atomic<bool>* stop);
  // The metrics endpoint, the channel, and the lease loop until *stop.
  absl::Status Serve(std::atomic<bool>* stop);
  bool RegisterUntilDone(std::atomic<bool>* stop);
  void HeartbeatLoop();
  void HandleTask(const kiln::v1::MeasureTask& task, std::atomic<bool>* stop);
  void Report(const kiln::v1::MeasureResult& result, std::atomic<bool>* stop);
  void CountResult(const kiln::v1::MeasureResult& result);
  void CountRpcError(const std::string& rpc);

  const Options options_;
  CpuTarget target_;
  std::unique_ptr<DeviceProcess> device_process_;  // GPU workers: where tasks are measured
  kiln::v1::DeviceInfo device_;
  std::unique_ptr<kiln::v1::WorkerService::Stub> stub_;
  std::unique_ptr<client::KilnClient> artifacts_;  // fetches the packages of whole-model checks

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string worker_id_;
  int heartbeat_interval_ms_ = 1000;
  std::set<std::string> held_task_ids_;
  bool shutting_down_ = false;
  std::atomic<bool> reregister_{false};
  std::thread heartbeat_thread_;

  std::atomic<int64_t> tasks_measured_{0};
  std::atomic<int64_t> results_by_error_[5] = {};
  std::atomic<int64_t> registrations_{0};
  std::atomic<int64_t> rpc_errors_{0};

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Counter>* results_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* rpc_errors_family_ = nullptr;
  prometheus::Counter* measure_seconds_ = nullptr;
  prometheus::Gauge* registered_gauge_ = nullptr;
};

}  // namespace kiln::worker
