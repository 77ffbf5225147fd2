// Persistent tuning jobs through a restart: a job a stopped server left
// unfinished (one candidate measured) is resumed by the next server on the same
// database file and finishes once a worker attaches, with no client; two
// compiles of the same model share one job per workload; a registering
// worker's target is remembered with its device details.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <thread>

#include "client/example_models.h"
#include "client/kiln_client.h"
#include "compiler_core/driver/version.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "compiler_core/fusion/partitioner.h"
#include "server/embedded_farm.h"
#include "server/farm_target.h"
#include "server/tuner.h"
#include "tests/server/test_farm.h"
#include "tuning_db/tuning_db.h"

namespace kiln {
namespace {

class ResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("kiln_resume_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    farm_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string db_path() const { return (dir_ / "tuning.db").string(); }

  // A farm on this test's database, without a worker until StartWorker().
  server::EmbeddedFarm* StartFarm() {
    server::EmbeddedFarm::Options options;
    options.server.db_path = db_path();
    options.server.worker_wait = std::chrono::milliseconds(20000);
    options.workers = 0;
    options.isolate = false;
    options.worker_name = "resume-test-worker";
    auto farm = server::EmbeddedFarm::Start(options);
    EXPECT_TRUE(farm.ok()) << farm.status();
    farm_ = farm.ok() ? std::move(*farm) : nullptr;
    return farm_.get();
  }

  std::filesystem::path dir_;
  std::unique_ptr<server::EmbeddedFarm> farm_;
};

// The first workload of the example MLP.
absl::StatusOr<Workload> FirstWorkload(std::unique_ptr<Graph>* graph) {
  auto model = client::MakeExampleModel("mlp");
  if (!model.ok()) return model.status();
  ImportOptions options;
  options.input_shapes["x"] = {8, 64};
  auto g = ImportOnnxModel(model->onnx_bytes, options);
  if (!g.ok()) return g.status();
  *graph = std::move(*g);
  FusionOptions unfused;
  unfused.fuse = false;
  auto partition = PartitionGraph(**graph, unfused);
  if (!partition.ok()) return partition.status();
  return ExtractWorkload(**graph, partition->groups.at(0));
}

TEST_F(ResumeTest, RestartedServerFinishesTheJobWithoutAClient) {
  std::unique_ptr<Graph> graph;
  auto workload = FirstWorkload(&graph);
  ASSERT_TRUE(workload.ok()) << workload.status();
  CpuTarget target = server::HostFarmTarget();
  std::string target_key = target.Key();
  int64_t job_id = 0;
  size_t candidates = 0;
  {
    // The "previous server": a job begins, its tasks are queued for a worker
    // that registered but never leases, one result gets recorded, the compile
    // gives up, and the server stops.
    auto db = tuningdb::TuningDb::Open(db_path());
    ASSERT_TRUE(db.ok()) << db.status();
    server::TaskBroker broker(server::TaskBroker::Options{});
    broker.RegisterWorker(target_key, "silent", kiln::v1::DeviceInfo());
    server::Tuner tuner(db->get(), &broker, server::Tuner::Options{std::chrono::milliseconds(5000)});
    int polls = 0;
    auto outcome = tuner.Tune(*workload, target_key, target, 4, "", [](const server::TuneProgress&) {},
                              [&] { return ++polls > 3; });
    EXPECT_EQ(outcome.status().code(), absl::StatusCode::kCancelled) << outcome.status();
    EXPECT_EQ(tuner.active_jobs(), 1);  // a cancelled compile leaves its job running
    auto running = (*db)->ListJobs(tuningdb::JobState::kRunning);
    ASSERT_TRUE(running.ok()) << running.status();
    ASSERT_EQ(running->size(), 1u);
    job_id = (*running)[0].id;
    candidates = (*running)[0].candidates.size();
    ASSERT_GE(candidates, 2u);
    tuningdb::Record first;
    first.workload_key = workload->key;
    first.target_key = target_key;
    first.space_version = kScheduleSpaceVersion;
    first.compiler_version = kCompilerVersion;
    first.config = (*running)[0].candidates[0].config;
    first.median_ms = 1e6;  // slow: the resumed measurements must win
    first.repeats = 5;
    first.worker_id = "before-restart";
    ASSERT_TRUE((*db)->AddJobRecord(job_id, 0, first).ok());
  }

  server::EmbeddedFarm* farm = StartFarm();
  ASSERT_NE(farm, nullptr);
  EXPECT_EQ(farm->server().active_tuning_jobs(), 1);
  auto db = tuningdb::TuningDb::Open(db_path());
  ASSERT_TRUE(db.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ((*db)->GetJob(job_id)->value().state, tuningdb::JobState::kRunning);  // no worker yet

  farm->StartWorker();
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  tuningdb::TuningJob job;
  while (std::chrono::steady_clock::now() < give_up) {
    auto j = (*db)->GetJob(job_id);
    ASSERT_TRUE(j.ok() && j->has_value());
    job = **j;
    if (job.state != tuningdb::JobState::kRunning) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(job.state, tuningdb::JobState::kDone) << job.message;
  for (const auto& c : job.candidates) EXPECT_TRUE(c.measured()) << c.config;
  // Each candidate measured (the one from before the restart was not redone);
  // the only records beyond one per candidate are the winner's confirmations.
  EXPECT_EQ((*db)->MeasuredConfigs(workload->key, target_key, kScheduleSpaceVersion)->size(), candidates);
  const int64_t records = (*db)->CountRecords(workload->key, target_key, kScheduleSpaceVersion);
  EXPECT_GE(records, static_cast<int64_t>(candidates) + 1);  // the leader measured twice
  EXPECT_LE(records, static_cast<int64_t>(candidates) + 2 * server::Tuner::kConfirmPasses);
  auto top = (*db)->TopK(workload->key, target_key, kScheduleSpaceVersion, 100);
  ASSERT_TRUE(top.ok());
  ASSERT_FALSE(top->empty());
  EXPECT_NE(top->front().worker_id, "before-restart");
  for (const auto& r : *top) {
    if (r.config == job.candidates[0].config) EXPECT_EQ(r.worker_id, "before-restart");
  }
  for (int i = 0; i < 50 && farm->server().active_tuning_jobs() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(farm->server().active_tuning_jobs(), 0);
  // The worker's target was remembered at registration.
  auto stored = (*db)->GetTarget(target_key);
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->kind, "cpu");
  EXPECT_FALSE((*stored)->arch.empty());
}

TEST_F(ResumeTest, ConcurrentCompilesShareOneJobPerWorkload) {
  server::EmbeddedFarm* farm = StartFarm();
  ASSERT_NE(farm, nullptr);
  farm->StartWorker();
  constexpr int kTrials = 3;
  std::vector<absl::StatusOr<kiln::v1::CompileResult>> results(2, absl::UnknownError("not run"));
  std::vector<std::thread> compiles;
  for (int i = 0; i < 2; ++i) {
    compiles.emplace_back([&, i] {
      client::KilnClient c(farm->address());
      results[i] = c.Compile(testing::MlpRequest(kTrials), [](const kiln::v1::Progress&) {});
    });
  }
  for (auto& t : compiles) t.join();
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(results[0]->package_digest(), results[1]->package_digest());

  auto db = tuningdb::TuningDb::Open(db_path());
  ASSERT_TRUE(db.ok());
  auto jobs = (*db)->ListJobs(std::nullopt);
  ASSERT_TRUE(jobs.ok());
  std::set<std::string> workloads;
  int64_t candidates = 0;
  for (const auto& job : *jobs) {
    EXPECT_EQ(job.state, tuningdb::JobState::kDone) << job.message;
    EXPECT_TRUE(workloads.insert(job.workload_key).second) << "two jobs for " << job.workload_key;
    candidates += static_cast<int64_t>(job.candidates.size());
  }
  EXPECT_FALSE(workloads.empty());
  // Every candidate measured and recorded once (plus each winner's confirmations).
  int64_t configs = 0;
  for (const std::string& w : workloads) {
    configs += static_cast<int64_t>((*db)->MeasuredConfigs(w, server::HostFarmTarget().Key(), kScheduleSpaceVersion)->size());
  }
  EXPECT_EQ(configs, candidates);
  EXPECT_LE((*db)->GetStats()->records,
            candidates + static_cast<int64_t>(workloads.size()) * 2 * server::Tuner::kConfirmPasses);
}

}  // namespace
}  // namespace kiln
