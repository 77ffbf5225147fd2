// kiln-worker: the device worker daemon. Flags in, Worker::Run until SIGINT or
// SIGTERM; all logic lives in kiln_worker_lib.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include <atomic>

#include "absl/strings/numbers.h"
#include "base/log.h"
#include "worker/worker.h"

#ifdef KILN_HAVE_CLI11
#include "CLI/CLI.hpp"
#endif

namespace {

std::atomic<bool> g_stop{false};

extern "C" void HandleStopSignal(int) { g_stop.store(true); }

constexpr const char* kUsage =
    "usage: kiln-worker --server HOST:PORT [--device cpu|cuda:N] [--name NAME]\n"
    "                   [--metrics-port PORT] [--task-timeout-ms MS] [--heartbeat-ms MS]\n"
    "                   [--no-isolate] [--verbose]\n";

#ifndef KILN_HAVE_CLI11
// Minimal flag parser for builds without CLI11: --flag VALUE or --flag=VALUE.
bool ParseFlags(int argc, char** argv, kiln::worker::Worker::Options* o, bool* verbose) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    auto take = [&](std::string* out) {
      if (has_value) {
        *out = value;
        return true;
      }
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    auto take_int = [&](int* out) {
      std::string v;
      return take(&v) && absl::SimpleAtoi(v, out) && *out >= 0;
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--server") {
      if (!take(&o->server)) return false;
    } else if (arg == "--device") {
      if (!take(&o->device)) return false;
    } else if (arg == "--name") {
      if (!take(&o->name)) return false;
    } else if (arg == "--metrics-port") {
      if (!take_int(&o->metrics_port)) return false;
    } else if (arg == "--task-timeout-ms") {
      if (!take_int(&o->task_timeout_ms)) return false;
    } else if (arg == "--heartbeat-ms") {
      if (!take_int(&o->heartbeat_ms)) return false;
    } else if (arg == "--no-isolate" && !has_value) {
      o->isolate = false;
    } else if (arg == "--verbose" && !has_value) {
      *verbose = true;
    } else {
      std::fprintf(stderr, "kiln-worker: unknown flag %s\n", argv[i]);
      return false;
    }
  }
  return !o->server.empty() && o->task_timeout_ms > 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  kiln::worker::Worker::Options options;
  bool verbose = false;
#ifdef KILN_HAVE_CLI11
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
#else
  if (!ParseFlags(argc, argv, &options, &verbose)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
#endif
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
