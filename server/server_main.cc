// kiln-server: the gRPC compile server of a Kiln tuning farm.
#include <signal.h>

#include <cstdio>
#include <limits>
#include <thread>

#include <CLI/CLI.hpp>

#include "base/exit_codes.h"
#include "base/log.h"
#include "compiler_core/driver/version.h"
#include "server/kiln_server.h"

int main(int argc, char** argv) {
  kiln::server::ServerOptions options;
  int heartbeat_ms = 1000, worker_timeout_ms = 10000, worker_wait_ms = 30000;
  std::string log_level = "info";
  const CLI::Range positive_ms(1, std::numeric_limits<int>::max());
  CLI::App app{"kiln-server: Kiln's compile server and tuning-farm coordinator"};
  app.set_version_flag("--version", kiln::VersionText("kiln-server"));
  app.add_option("--listen", options.listen,
                 "HOST:PORT to serve on; port 0 picks a free port; a port in use is an error (exit 5)")
      ->capture_default_str();
  app.add_option("--db", options.db_path, "tuning database file (created if missing)")->required();
  app.add_option("--port-file", options.port_file, "write the chosen port to this file");
  app.add_option("--metrics", options.metrics_address, "serve Prometheus /metrics on HOST:PORT");
  app.add_option("--heartbeat-ms", heartbeat_ms, "heartbeat interval asked of workers")
      ->capture_default_str()
      ->check(positive_ms);
  app.add_option("--worker-timeout-ms", worker_timeout_ms, "a worker silent this long loses its leases")
      ->capture_default_str()
      ->check(positive_ms);
  app.add_option("--worker-wait-ms", worker_wait_ms, "how long a tuning job waits for a worker of its target")
      ->capture_default_str()
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));
  app.add_option("--log-level", log_level, "logs on stderr at this level and above: debug, info, warning, error")
      ->capture_default_str()
      ->check(CLI::IsMember({"debug", "info", "warn", "warning", "error"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kiln::kExitOk : kiln::kExitUsage;
  }
  kiln::SetMinLogLevel(*kiln::ParseLogLevel(log_level));
  options.heartbeat_interval = std::chrono::milliseconds(heartbeat_ms);
  options.worker_timeout = std::chrono::milliseconds(worker_timeout_ms);
  options.worker_wait = std::chrono::milliseconds(worker_wait_ms);

  // Block the stop signals in every thread; one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto server = kiln::server::KilnServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "kiln-server: %s: %s\n", absl::StatusCodeToString(server.status().code()).c_str(),
                 std::string(server.status().message()).c_str());
    return kiln::ExitCodeFor(server.status().code());
  }
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    kiln::LogInfo("shutting down", {{"signal", std::to_string(sig)}});
    (*server)->Shutdown();
  });
  (*server)->Wait();
  stopper.detach();
  return kiln::kExitOk;
}
