// kiln-server: the gRPC compile server of a Kiln tuning farm.
#include <signal.h>

#include <cstdio>
#include <thread>

#include <CLI/CLI.hpp>

#include "base/log.h"
#include "server/kiln_server.h"

int main(int argc, char** argv) {
  kiln::server::ServerOptions options;
  int heartbeat_ms = 1000, worker_timeout_ms = 10000, worker_wait_ms = 30000;
  CLI::App app{"kiln-server: Kiln's compile server and tuning-farm coordinator"};
  app.add_option("--listen", options.listen, "HOST:PORT to serve on; port 0 picks a free port")
      ->capture_default_str();
  app.add_option("--db", options.db_path, "tuning database file (created if missing)")->required();
  app.add_option("--port-file", options.port_file, "write the chosen port to this file");
  app.add_option("--metrics", options.metrics_address, "serve Prometheus /metrics on HOST:PORT");
  app.add_option("--heartbeat-ms", heartbeat_ms, "heartbeat interval asked of workers")->capture_default_str();
  app.add_option("--worker-timeout-ms", worker_timeout_ms,
                 "a worker silent this long loses its leases")->capture_default_str();
  app.add_option("--worker-wait-ms", worker_wait_ms,
                 "how long a tuning job waits for a worker of its target")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
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
    std::fprintf(stderr, "kiln-server: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    kiln::LogInfo("shutting down", {{"signal", std::to_string(sig)}});
    (*server)->Shutdown();
  });
  (*server)->Wait();
  stopper.detach();
  return 0;
}
