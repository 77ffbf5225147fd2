// Embedded farm: a KilnServer and CPU Worker threads in this process.
#include "server/embedded_farm.h"

#include "base/log.h"
#include "worker/worker.h"

namespace kiln::server {

absl::StatusOr<std::unique_ptr<EmbeddedFarm>> EmbeddedFarm::Start(const Options& options) {
  std::unique_ptr<EmbeddedFarm> farm(new EmbeddedFarm(options));
  auto server = KilnServer::Start(options.server);
  if (!server.ok()) return server.status();
  farm->server_ = std::move(*server);
  for (int i = 0; i < options.workers; ++i) farm->StartWorker();
  if (!options.gpu_device.empty()) {
    worker::Worker::Options w;
    w.server = farm->server_->address();
    w.device = options.gpu_device;
    w.executable = options.worker_executable;
    w.ptxas = options.server.ptxas;
    w.name = options.worker_name + "-gpu";
    farm->workers_.emplace_back([farm = farm.get(), w] {
      worker::Worker worker(w);
      absl::Status s = worker.Run(&farm->stop_);
      if (!s.ok()) {
        LogWarn("no GPU worker in the embedded farm", {{"device", w.device}, {"error", std::string(s.message())}});
      }
    });
  }
  return farm;
}

absl::StatusOr<std::unique_ptr<EmbeddedFarm>> EmbeddedFarm::Start(const std::string& db_path) {
  Options options;
  options.server.db_path = db_path;
  return Start(options);
}

void EmbeddedFarm::StartWorker() {
  worker::Worker::Options w;
  w.server = server_->address();
  w.device = "cpu";
  w.isolate = options_.isolate;
  w.threads = options_.worker_threads;
  w.target = options_.worker_target;
  w.name = options_.worker_name;
  stop_ = false;
  workers_.emplace_back([this, w] {
    worker::Worker worker(w);
    (void)worker.Run(&stop_);
  });
}

void EmbeddedFarm::StopWorkers() {
  stop_ = true;
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

EmbeddedFarm::~EmbeddedFarm() {
  StopWorkers();
  if (server_) server_->Shutdown();
}

}  // namespace kiln::server
