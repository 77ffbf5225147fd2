// kiln-worker: the device worker daemon. Flags in, Worker::Run until SIGINT or
// SIGTERM; all logic lives in kiln_worker_lib.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include <atomic>

#include "absl/synchronization/mutex.h"
#include "base/exit_codes.h"
#include "base/log.h"
#include "compiler_core/driver/version.h"
#include "worker/device_info.h"
#include "worker/device_process.h"
#include "worker/gpu_measurer.h"
#include "worker/measurer.h"
#include "worker/package_timing.h"
#include "worker/worker.h"

#include "CLI/CLI.hpp"

namespace {

std::atomic<bool> g_stop{false};

extern "C" void HandleStopSignal(int) { g_stop.store(true); }

// The device process (worker/device_process.h): measures the tasks its
// worker sends on stdin, answers on stdout.
int ServeDeviceMain(const std::string& spec, const std::string& ptxas) {
  using kiln::v1::MeasureResult;
  using kiln::v1::MeasureTask;
  if (spec == "cpu") {
    return kiln::worker::ServeDevice(
        0, 1, [] { return absl::StatusOr<kiln::v1::DeviceInfo>(kiln::worker::DescribeCpu()); },
        [](const MeasureTask& task) {
          if (task.package_bytes_size() == 0) return kiln::worker::MeasureAsResult(task, kiln::CpuTarget::Host());
          std::vector<std::string> packages(task.package_bytes().begin(), task.package_bytes().end());
          return kiln::worker::TimePackagesAsResult(task, packages);
        });
  }
  std::unique_ptr<kiln::worker::GpuMeasurer> gpu;
  int ordinal = 0;
  return kiln::worker::ServeDevice(
      0, 1,
      [&]() -> absl::StatusOr<kiln::v1::DeviceInfo> {
        absl::StatusOr<int> parsed = kiln::worker::CudaOrdinalOf(spec);
        if (!parsed.ok()) return parsed.status();
        ordinal = *parsed;
        absl::StatusOr<std::unique_ptr<kiln::worker::GpuMeasurer>> m = kiln::worker::GpuMeasurer::Open(ordinal, ptxas);
        if (!m.ok()) return m.status();
        gpu = *std::move(m);
        return gpu->device();
      },
      [&](const MeasureTask& task) {
        if (task.package_bytes_size() == 0) return gpu->Measure(task);
        std::vector<std::string> packages(task.package_bytes().begin(), task.package_bytes().end());
        return kiln::worker::TimePackagesAsResult(task, packages, ordinal);
      },
      [&] { return gpu->usable(); });
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex (gRPC's
  // locks included) keeps a lock-order graph for deadlock detection: ~9% of
  // the server's CPU per RPC under load (bench/broker_bench.cc). Off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  kiln::worker::Worker::Options options;
  bool verbose = false;
  std::string log_level = "info";
  CLI::App app{"kiln-worker: leases measurement tasks from a Kiln server, measures them on "
               "this device and reports the results"};
  app.set_version_flag("--version", kiln::VersionText("kiln-worker"));
  bool no_isolate = false;
  CLI::Option* server_opt = app.add_option(
      "--server", options.server,
      "HOST:PORT of the Kiln server; while it cannot be reached the worker retries (a warning per try, "
      "backing off to 5 s)");
  app.add_option("--tls-ca", options.security.tls_ca, "the server serves TLS: its certificate's CA (PEM) [env KILN_TLS_CA]");
  app.add_option("--tls-cert", options.security.tls_cert,
                 "this worker's certificate for mutual TLS (PEM; the server's auth file names it) [env KILN_TLS_CERT]");
  app.add_option("--tls-key", options.security.tls_key, "the certificate's private key (PEM) [env KILN_TLS_KEY]");
  app.add_option("--token-file", options.security.token_file,
                 "a file holding a bearer token with the worker role (needs --tls-ca) [env KILN_TOKEN_FILE]");
  app.add_option("--device", options.device, "device to measure on: cpu or cuda:N")
      ->capture_default_str();
  app.add_option("--target", options.target,
                 "measure for this named CPU target instead of the host's own: an x86-64 level (x86-64-v3) or "
                 "an LLVM CPU name (skylake-avx512); the host must run its code");
  app.add_option("--name", options.name, "name reported to the server (default: hostname)");
  app.add_option("--metrics-port", options.metrics_port,
                 "serve Prometheus /metrics on this port (0: none)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--task-timeout-ms", options.task_timeout_ms,
                 "kill a measurement after this long unless the task's deadline is sooner")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()))
      ->capture_default_str();
  app.add_option("--heartbeat-ms", options.heartbeat_ms,
                 "heartbeat interval (0: the server's)")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));
  app.add_option("--threads", options.threads,
                 "threads one measurement may use: the worker also measures tasks of compiles for packages "
                 "run on up to this many threads (give it that many cores of its own)")
      ->check(CLI::Range(1, kiln::worker::Worker::kMaxThreads))
      ->capture_default_str();
  app.add_option("--ptxas", options.ptxas,
                 "GPU workers: the CUDA toolkit's ptxas to assemble candidates with (default: PATH, then "
                 "/usr/local/cuda/bin; none: the driver JIT-compiles the PTX)");
  // Internal: the worker starts itself with it as its device process.
  std::string serve_device;
  app.add_option("--serve-device", serve_device, "")->group("");
  app.add_flag("--no-isolate", no_isolate,
               "measure in the worker process (a crashing kernel takes the worker down)");
  app.add_option("--log-level", log_level, "logs on stderr at this level and above: debug, info, warning, error")
      ->capture_default_str()
      ->check(CLI::IsMember({"debug", "info", "warn", "warning", "error"}));
  app.add_flag("--verbose", verbose, "debug logging (--log-level debug)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kiln::kExitOk : kiln::kExitUsage;
  }
  if (!serve_device.empty()) return ServeDeviceMain(serve_device, options.ptxas);
  if (server_opt->count() == 0) {
    std::fprintf(stderr, "%s", app.help().c_str());
    std::fprintf(stderr, "kiln-worker: --server is required\n");
    return kiln::kExitUsage;
  }
  options.security = kiln::client::WithEnvironment(options.security);
  options.isolate = !no_isolate;
  kiln::SetMinLogLevel(verbose ? kiln::LogLevel::kDebug : *kiln::ParseLogLevel(log_level));

  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = HandleStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  kiln::worker::Worker worker(options);
  absl::Status status = worker.Run(&g_stop);
  if (!status.ok()) {
    std::fprintf(stderr, "kiln-worker: %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
                 std::string(status.message()).c_str());
    return kiln::ExitCodeFor(status.code());
  }
  return kiln::kExitOk;
}
