// kiln-server: the gRPC compile server of a Kiln tuning farm.
#include <signal.h>

#include <cstdio>
#include <limits>
#include <thread>

#include <CLI/CLI.hpp>

#include "absl/synchronization/mutex.h"
#include "base/exit_codes.h"
#include "base/log.h"
#include "compiler_core/driver/version.h"
#include "server/kiln_server.h"

int main(int argc, char** argv) {
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex (gRPC's
  // locks included) keeps a lock-order graph for deadlock detection: ~9% of
  // the server's CPU per RPC under load (bench/broker_bench.cc). Off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
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
  int tls_refresh_s = 10;
  app.add_option("--tls-cert", options.tls.cert, "serve TLS with this certificate chain (PEM; re-read while serving)");
  app.add_option("--tls-key", options.tls.key, "the certificate's private key (PEM)");
  app.add_option("--tls-client-ca", options.tls.client_ca,
                 "mutual TLS: verify client certificates signed by this CA (PEM); auth-file 'cert:NAME' lines name them");
  app.add_option("--tls-refresh-s", tls_refresh_s, "how often the TLS files are checked for renewal")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  app.add_option("--auth-file", options.auth_file,
                 "credentials and roles (client, worker, admin), re-read when it changes; needs TLS (docs/operations.md)");
  // Limits (docs/operations.md, "Limits"): going over one is RESOURCE_EXHAUSTED naming its flag.
  int64_t max_request_mb = options.max_request_bytes >> 20;
  int64_t max_initializer_mb = options.model_limits.max_initializer_bytes >> 20;
  int64_t tuning_window_s = options.admission.tuning_window.count();
  const CLI::Range non_negative(0, std::numeric_limits<int>::max());
  app.add_option("--max-request-mb", max_request_mb,
                 "largest request message accepted, in MiB (a model travels in one); larger is refused unread")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{2047}));
  app.add_option("--max-model-nodes", options.model_limits.max_nodes, "most nodes a model may have (0: unlimited)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  app.add_option("--max-initializer-mb", max_initializer_mb,
                 "most MiB a model's initializers (constant tensors) may hold, summed (0: unlimited)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_option("--max-compiles-per-client", options.admission.max_compiles_per_client,
                 "compiles one client may run at a time, background tuning included (0: unlimited)")
      ->capture_default_str()
      ->check(non_negative);
  app.add_option("--max-queued-per-client", options.admission.max_queued_per_client,
                 "compiles of one client that may wait for a slot; more are refused (0: none wait)")
      ->capture_default_str()
      ->check(non_negative);
  app.add_option("--max-compiles", options.admission.max_compiles,
                 "compiles the server runs at a time, all clients together (0: unlimited)")
      ->capture_default_str()
      ->check(non_negative);
  app.add_option("--tuning-trials-per-client", options.admission.tuning_trials_per_client,
                 "tuning trials one client may have measured within --tuning-window-s; beyond, compiles that "
                 "would measure are refused (0: unlimited)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  app.add_option("--tuning-window-s", tuning_window_s, "the rolling window of --tuning-trials-per-client, in seconds")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{366} * 86400));
  app.add_option("--ptxas", options.ptxas,
                 "the CUDA toolkit's ptxas GPU packages are assembled with (default: PATH, then /usr/local/cuda/bin; "
                 "none: packages carry PTX only)");
  app.add_option("--log-level", log_level, "logs on stderr at this level and above: debug, info, warning, error")
      ->capture_default_str()
      ->check(CLI::IsMember({"debug", "info", "warn", "warning", "error"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kiln::kExitOk : kiln::kExitUsage;
  }
  kiln::SetMinLogLevel(*kiln::ParseLogLevel(log_level));
  options.tls.refresh = std::chrono::seconds(tls_refresh_s);
  options.max_request_bytes = max_request_mb << 20;
  options.model_limits.max_initializer_bytes = max_initializer_mb << 20;
  options.admission.tuning_window = std::chrono::seconds(tuning_window_s);
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
