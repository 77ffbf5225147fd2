// The compile server as a library: the gRPC services, the farm's broker, the
// tuning database and metrics, started on one address. kiln-server's main()
// and the CLI's embedded mode both use it.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kiln::server {

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  // port 0 picks a free port
  std::string db_path;                  // the tuning database file
  std::string port_file;                // if set, the chosen port is written here
  std::string metrics_address;          // e.g. "127.0.0.1:9464"; empty: no exposer
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds worker_timeout{10000};
  std::chrono::milliseconds worker_wait{30000};
};

class KilnServer {
 public:
  static absl::StatusOr<std::unique_ptr<KilnServer>> Start(const ServerOptions& options);
  ~KilnServer();

  int port() const;
  std::string address() const;  // "127.0.0.1:PORT"
  // Tuning jobs running in this server now (new or resumed at start-up).
  int active_tuning_jobs() const;
  // Blocks until Shutdown() is called from another thread.
  void Wait();
  void Shutdown();

 private:
  struct State;
  explicit KilnServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kiln::server
