// A whole Kiln farm in one process: the compile server (listening on
// 127.0.0.1, a free port by default) and CPU workers on threads (and a GPU
// worker, whose measurements run in its device process), talking real gRPC
// to it. `kiln compile` without --server runs one; the service tests run
// theirs through the same class.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "server/kiln_server.h"

namespace kiln::server {

class EmbeddedFarm {
 public:
  struct Options {
    ServerOptions server;        // db_path is required; listen defaults to 127.0.0.1:0
    int workers = 1;             // CPU workers started with the farm (more with StartWorker)
    int worker_threads = 1;      // threads each worker may measure on (kiln-worker --threads)
    std::string worker_target;   // a named target the workers measure for (kiln-worker --target); empty: the host
    bool isolate = true;         // workers measure in a forked child
    std::string worker_name = "embedded";
    // A GPU worker for this device ("cuda:0"; empty: none), measuring through
    // `worker_executable` (a kiln-worker: the device process it starts).
    // Without a usable GPU it logs why and stops; the farm runs on.
    std::string gpu_device;
    std::string worker_executable;
  };

  static absl::StatusOr<std::unique_ptr<EmbeddedFarm>> Start(const Options& options);
  // Convenience: one CPU worker, the server's defaults, database at `db_path`.
  static absl::StatusOr<std::unique_ptr<EmbeddedFarm>> Start(const std::string& db_path);
  // Stops the workers, then the server.
  ~EmbeddedFarm();

  std::string address() const { return server_->address(); }
  KilnServer& server() { return *server_; }

  // Another CPU worker thread registering with this farm's server.
  void StartWorker();
  // Stops and joins every worker thread; the server keeps running.
  void StopWorkers();

 private:
  explicit EmbeddedFarm(Options options) : options_(std::move(options)) {}
  Options options_;
  std::unique_ptr<KilnServer> server_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
};

}  // namespace kiln::server
