// Embedded farm: server + one CPU worker in this process.
#include "client/embedded_farm.h"

#include "worker/worker.h"

namespace kiln::client {

absl::StatusOr<std::unique_ptr<EmbeddedFarm>> EmbeddedFarm::Start(const std::string& db_path) {
  server::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = db_path;
  auto server = server::KilnServer::Start(options);
  if (!server.ok()) return server.status();
  std::unique_ptr<EmbeddedFarm> farm(new EmbeddedFarm());
  farm->server_ = std::move(*server);
  worker::Worker::Options wopts;
  wopts.server = farm->server_->address();
  wopts.device = "cpu";
  wopts.name = "embedded";
  farm->worker_ = std::thread([farm = farm.get(), wopts] {
    worker::Worker w(wopts);
    (void)w.Run(&farm->stop_);
  });
  return farm;
}

EmbeddedFarm::~EmbeddedFarm() {
  stop_ = true;
  if (worker_.joinable()) worker_.join();
  server_->Shutdown();
}

}  // namespace kiln::client
