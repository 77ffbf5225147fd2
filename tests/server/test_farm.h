// Test fixture: an EmbeddedFarm (real KilnServer on 127.0.0.1, free port, real
// gRPC) over a database in a fresh temporary folder, with one in-process CPU
// worker that measures without forking (the isolation path has its own tests
// in tests/worker).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "server/embedded_farm.h"

namespace kiln::testing {

class TestFarm {
 public:
  explicit TestFarm(bool with_worker = true) {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("kiln_farm_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    server::EmbeddedFarm::Options options;
    options.server.db_path = db_path();
    options.server.worker_wait = std::chrono::milliseconds(20000);
    options.workers = with_worker ? 1 : 0;
    options.isolate = false;
    options.worker_name = "test-worker";
    auto farm = server::EmbeddedFarm::Start(options);
    EXPECT_TRUE(farm.ok()) << farm.status();
    if (farm.ok()) farm_ = std::move(*farm);
  }
  ~TestFarm() {
    farm_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void StartWorker() { farm_->StartWorker(); }
  std::string address() const { return farm_->address(); }
  std::string db_path() const { return (dir_ / "tuning.db").string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::unique_ptr<server::EmbeddedFarm> farm_;
};

}  // namespace kiln::testing
