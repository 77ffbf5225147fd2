// An in-process Kiln farm for `kiln compile` without --server: the same server
// code listening on 127.0.0.1 with a free port, and one CPU worker thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/kiln_server.h"

namespace kiln::client {

class EmbeddedFarm {
 public:
  static absl::StatusOr<std::unique_ptr<EmbeddedFarm>> Start(const std::string& db_path);
  ~EmbeddedFarm();
  std::string address() const { return server_->address(); }

 private:
  EmbeddedFarm() = default;
  std::unique_ptr<server::KilnServer> server_;
  std::atomic<bool> stop_{false};
  std::thread worker_;
};

}  // namespace kiln::client
