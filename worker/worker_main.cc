// kiln-worker: the device worker daemon. Flags in, Worker::Run until SIGINT or
// SIGTERM; all logic lives in kiln_worker_lib.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include <atomic>

#include "base/log.h"
#include "worker/worker.h"

#include "CLI/CLI.hpp"

namespace {

std::atomic<bool> g_stop{false};

extern "C" void HandleStopSignal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  kiln::worker::Worker::Options options;
  bool verbose = false;
  CLI::App app{"kiln-worker: leases measurement tasks from a Kiln server, measures them on "
               "this device and reports the results"};
  bool no_isolate = false;
  app.add_option("--server", options.server, "HOST:PORT of the Kiln server")->required();
  app.add_option("--device", options.device, "device to measure on: cpu or cuda:N")
      ->capture_default_str();
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
  app.add_flag("--no-isolate", no_isolate,
               "measure in the worker process (a crashing kernel takes the worker down)");
  app.add_flag("--verbose", verbose, "debug logging");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  options.isolate = !no_isolate;
  if (verbose) kiln::SetMinLogLevel(kiln::LogLevel::kDebug);

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
    kiln::Log(kiln::LogLevel::kError, "kiln-worker exiting",
                      {{"error", std::string(status.message())}});
    std::fprintf(stderr, "kiln-worker: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
