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

#include "client/example_models.h"
#include "kiln/v1/compile.pb.h"
#include "server/embedded_farm.h"

namespace kiln::testing {

class TestFarm {
 public:
  // worker_threads: the threads each worker may measure on (kiln-worker --threads).
  // worker_target: a named target the worker measures for (kiln-worker --target).
  explicit TestFarm(bool with_worker = true, int worker_threads = 1, const std::string& worker_target = "") {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("kiln_farm_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    server::EmbeddedFarm::Options options;
    options.server.db_path = db_path();
    options.server.worker_wait = std::chrono::milliseconds(20000);
    options.workers = with_worker ? 1 : 0;
    options.worker_threads = worker_threads;
    options.worker_target = worker_target;
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

// A compile request for the example MLP (x bound to [8, 64]) with `trials` per group.
inline kiln::v1::CompileRequest MlpRequest(int trials) {
  auto model = client::MakeExampleModel("mlp");
  EXPECT_TRUE(model.ok());
  kiln::v1::CompileRequest r;
  r.set_onnx_model(model->onnx_bytes);
  r.set_target("cpu");
  r.set_trials_per_group(trials);
  r.set_model_name("mlp");
  auto* b = r.add_shapes();
  b->set_input("x");
  b->add_dims(8);
  b->add_dims(64);
  return r;
}

}  // namespace kiln::testing
