// Test fixture: a real KilnServer on 127.0.0.1 (free port, temp database) with
// one in-process CPU worker, talking real gRPC.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "server/kiln_server.h"
#include "worker/worker.h"

namespace kiln::testing {

class TestFarm {
 public:
  explicit TestFarm(bool with_worker = true) {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("kiln_farm_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    server::ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.db_path = (dir_ / "tuning.db").string();
    options.worker_wait = std::chrono::milliseconds(20000);
    auto s = server::KilnServer::Start(options);
    EXPECT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    if (with_worker) StartWorker();
  }
  ~TestFarm() {
    stop_ = true;
    if (worker_.joinable()) worker_.join();
    server_->Shutdown();
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void StartWorker() {
    worker::Worker::Options w;
    w.server = server_->address();
    w.isolate = false;  // the isolation path has its own tests in tests/worker
    w.name = "test-worker";
    worker_ = std::thread([this, w] {
      worker::Worker worker(w);
      (void)worker.Run(&stop_);
    });
  }
  std::string address() const { return server_->address(); }
  std::string db_path() const { return (dir_ / "tuning.db").string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::unique_ptr<server::KilnServer> server_;
  std::atomic<bool> stop_{false};
  std::thread worker_;
};

}  // namespace kiln::testing
