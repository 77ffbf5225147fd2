// The compile server as a library: the gRPC services, the farm's broker, the
// tuning database and metrics, started on one address. kiln-server's main()
// and the CLI's embedded mode both use it.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/admission.h"
#include "server/auth.h"

namespace kiln::server {

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  // port 0 picks a free port
  std::string db_path;                  // the tuning database file
  std::string port_file;                // if set, the chosen port is written here
  std::string metrics_address;          // e.g. "127.0.0.1:9464"; empty: no exposer
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds worker_timeout{10000};
  std::chrono::milliseconds worker_wait{30000};
  // TLS on the listener (empty cert: plaintext) and the auth file naming each
  // credential's roles (empty: no credentials checked; needs TLS). See auth.h.
  TlsFiles tls;
  std::string auth_file;
  // Limits (docs/operations.md, "Limits"): the largest request message gRPC
  // accepts (larger: RESOURCE_EXHAUSTED before it is parsed), caps on the
  // parsed model, and what each client may run at a time and measure.
  int64_t max_request_bytes = int64_t{256} << 20;
  ModelLimits model_limits;
  AdmissionControl::Options admission;
  // The ptxas GPU packages are assembled with (empty: the PATH, then
  // /usr/local/cuda/bin; none: packages carry PTX only, which the driver JITs).
  std::string ptxas;
};

class KilnServer {
 public:
  static absl::StatusOr<std::unique_ptr<KilnServer>> Start(const ServerOptions& options);
  ~KilnServer();

  int port() const;
  std::string address() const;  // "127.0.0.1:PORT"
  // The port /metrics is served on (the one bound when metrics_address asked
  // for port 0); 0 without metrics_address.
  int metrics_port() const;
  // Tuning jobs running in this server now (new or resumed at start-up).
  int active_tuning_jobs() const;
  // The per-client limits and what each client holds now.
  AdmissionControl& admission();
  // Blocks until Shutdown() is called from another thread.
  void Wait();
  void Shutdown();

 private:
  struct State;
  explicit KilnServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kiln::server
