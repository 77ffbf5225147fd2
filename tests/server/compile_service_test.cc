// CompileService, LookupService and WorkerService through real gRPC with a
// real worker: compile, fetch, run; the database makes the second compile
// measure nothing; bad input is INVALID_ARGUMENT naming the node, and the
// server keeps serving.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "base/cpu_features.h"
#include "client/example_models.h"
#include "client/kiln_client.h"
#include "client/runtime/package_reader.h"
#include "client/runtime/session.h"
#include "client/runtime/thread_pool.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "tests/compiler_core/frontend/onnx_model_builder.h"
#include "tests/server/test_farm.h"
#include "tuning_db/tuning_db.h"

namespace kiln {
namespace {

using client::KilnClient;
using ::testing::HasSubstr;

absl::StatusOr<kiln::v1::CompileResult> Compile(KilnClient& c, const kiln::v1::CompileRequest& r,
                                                int* progress_events = nullptr) {
  return c.Compile(r, [&](const kiln::v1::Progress&) {
    if (progress_events) ++*progress_events;
  });
}

class CompileServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { farm_ = new testing::TestFarm(); }
  static void TearDownTestSuite() {
    delete farm_;
    farm_ = nullptr;
  }
  static testing::TestFarm* farm_;
};
testing::TestFarm* CompileServiceTest::farm_ = nullptr;

TEST_F(CompileServiceTest, CompilesRunsAndRemembers) {
  KilnClient client(farm_->address());
  int events = 0;
  auto first = Compile(client, testing::MlpRequest(3), &events);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_GT(events, 3);
  // MatMul+Add+Relu and Gemm+Sigmoid+Sub+Mul+Mul (Div by a constant became Mul).
  ASSERT_EQ(first->groups_size(), 2);
  EXPECT_EQ(first->groups(0).ops_size(), 3);
  EXPECT_EQ(first->groups(1).ops_size(), 5);
  EXPECT_GT(first->trials_measured(), 0);
  EXPECT_EQ(first->package_digest().rfind("sha256:", 0), 0u);

  auto bytes = client.FetchArtifact(first->package_digest());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(static_cast<int64_t>(bytes->size()), first->package_size());

  // Run the package and compare with the reference interpreter.
  auto model = client::MakeExampleModel("mlp");
  ImportOptions io;
  io.input_shapes = model->shapes;
  auto graph = ImportOnnxModel(model->onnx_bytes, io);
  ASSERT_TRUE(graph.ok());
  const Tensor& x = model->inputs.at("x");
  auto ref = Evaluate(**graph, {{"x", x}});
  ASSERT_TRUE(ref.ok());
  auto pkg = runtime::Package::FromBytes(*bytes);
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  runtime::ThreadPool pool(2);
  auto session = runtime::Session::Create(std::shared_ptr<const runtime::Package>(std::move(*pkg)), &pool);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->SetInput("x", x.raw(), x.size_bytes()).ok());
  ASSERT_TRUE((*session)->Run().ok());
  const float* got = static_cast<const float*>((*session)->OutputData(0));
  const Tensor& want = ref->at("y");
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    ASSERT_NEAR(got[i], want.data<float>()[i], 1e-5) << i;
  }

  // Second compile: every group from the database, nothing measured, same bytes.
  auto second = Compile(client, testing::MlpRequest(3));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->trials_measured(), 0);
  EXPECT_EQ(second->package_digest(), first->package_digest());
  for (const auto& g : second->groups()) EXPECT_TRUE(g.from_database()) << g.index();

  // Lookup finds it; other shapes do not, and say why.
  kiln::v1::LookupRequest lookup;
  lookup.set_onnx_model(model->onnx_bytes);
  lookup.set_target("cpu");
  *lookup.mutable_shapes() = testing::MlpRequest(0).shapes();
  auto found = client.Lookup(lookup);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE(found->found());
  EXPECT_EQ(found->package_digest(), first->package_digest());
  lookup.mutable_shapes(0)->set_dims(0, 9);
  auto missing = client.Lookup(lookup);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->found());
  EXPECT_NE(missing->reason().find("no compile"), std::string::npos);
}

TEST_F(CompileServiceTest, AnUnchangedCompileIsAnsweredFromTheCacheUntilARecordOfItsWorkloadsArrives) {
  KilnClient client(farm_->address());
  kiln::v1::CompileRequest r = testing::MlpRequest(2);
  r.mutable_shapes(0)->set_dims(0, 5);  // a key of its own in the suite's farm
  auto compile = [&](int trials, std::vector<std::string>* stages) {
    r.set_trials_per_group(trials);
    return client.Compile(r, [&](const kiln::v1::Progress& p) {
      if (stages->empty() || stages->back() != p.stage()) stages->push_back(p.stage());
    });
  };
  // Tuning adds records while it runs: its answer is not cached...
  std::vector<std::string> tuned_stages, full_stages, cached_stages;
  auto tuned = compile(2, &tuned_stages);
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_GT(tuned->trials_measured(), 0);
  EXPECT_THAT(tuned_stages, ::testing::Not(::testing::Contains("cache")));
  // ...the next compile, which adds none, compiles and is cached...
  auto full = compile(2, &full_stages);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_THAT(full_stages, ::testing::Contains("codegen"));
  // ...and answers every later one with nothing else done.
  auto cached = compile(2, &cached_stages);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached_stages, std::vector<std::string>{"cache"});
  EXPECT_EQ(cached->package_digest(), full->package_digest());
  EXPECT_EQ(cached->package_size(), full->package_size());
  EXPECT_EQ(cached->target(), full->target());
  EXPECT_EQ(cached->trials_measured(), 0);
  ASSERT_EQ(cached->groups_size(), full->groups_size());
  for (int i = 0; i < full->groups_size(); ++i) {
    EXPECT_EQ(cached->groups(i).schedule_config(), full->groups(i).schedule_config());
    EXPECT_EQ(cached->groups(i).provenance().SerializeAsString(), full->groups(i).provenance().SerializeAsString());
    EXPECT_TRUE(cached->groups(i).from_database());
  }
  EXPECT_TRUE(client.FetchArtifact(cached->package_digest()).ok());
  // Fewer trials are answered too; more are tuned, which adds records: the
  // next compile compiles again, and the one after is answered.
  std::vector<std::string> fewer_stages, deeper_stages, after_stages, again_stages;
  ASSERT_TRUE(compile(1, &fewer_stages).ok());
  EXPECT_EQ(fewer_stages, std::vector<std::string>{"cache"});
  auto deeper = compile(4, &deeper_stages);
  ASSERT_TRUE(deeper.ok()) << deeper.status();
  EXPECT_GT(deeper->trials_measured(), 0);
  ASSERT_TRUE(compile(4, &after_stages).ok());
  EXPECT_THAT(after_stages, ::testing::Contains("codegen"));
  auto again = compile(4, &again_stages);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again_stages, std::vector<std::string>{"cache"});
  EXPECT_EQ(again->package_digest(), deeper->package_digest());
}

TEST_F(CompileServiceTest, MoreTrialsDeepenTheSearchWithoutMeasuringAnythingTwice) {
  KilnClient client(farm_->address());
  for (const char* search : {"random", "evolutionary"}) {
    SCOPED_TRACE(search);
    // Shapes of their own: workloads no other test of the suite has tuned.
    kiln::v1::CompileRequest r = testing::MlpRequest(1);
    r.mutable_shapes(0)->set_dims(0, std::string(search) == "random" ? 5 : 6);
    r.set_search(search);
    auto first = Compile(client, r);
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_EQ(first->groups_size(), 2);
    EXPECT_EQ(first->trials_measured(), 2);  // one per workload: its default
    r.set_trials_per_group(3);
    auto deeper = Compile(client, r);
    ASSERT_TRUE(deeper.ok()) << deeper.status();
    EXPECT_EQ(deeper->trials_measured(), 4);  // two more per workload
    auto again = Compile(client, r);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->trials_measured(), 0);
    for (const auto& g : again->groups()) EXPECT_TRUE(g.from_database()) << g.index();
    // Fewer trials than measured already: answered from the database.
    r.set_trials_per_group(2);
    auto fewer = Compile(client, r);
    ASSERT_TRUE(fewer.ok()) << fewer.status();
    EXPECT_EQ(fewer->trials_measured(), 0);
    EXPECT_EQ(fewer->package_digest(), again->package_digest());
  }
  kiln::v1::CompileRequest bad = testing::MlpRequest(1);
  bad.set_search("annealing");
  auto refused = Compile(client, bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(refused.status().message()).find("annealing"), std::string::npos) << refused.status();
}

TEST_F(CompileServiceTest, WithTwoWorkersTheWorkloadsAreTunedTogether) {
  farm_->StartWorker();  // two workers: both workloads of the model tune at once
  KilnClient client(farm_->address());
  kiln::v1::CompileRequest r = testing::MlpRequest(3);
  r.mutable_shapes(0)->set_dims(0, 9);  // workloads of their own
  int events = 0;
  auto first = Compile(client, r, &events);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->groups_size(), 2);
  EXPECT_EQ(first->trials_measured(), 6);
  EXPECT_GT(events, 4);
  for (const auto& g : first->groups()) {
    EXPECT_FALSE(g.from_database()) << g.index();
    EXPECT_EQ(g.trials_measured(), 3) << g.index();
    EXPECT_FALSE(g.schedule_config().empty()) << g.index();
  }
  auto again = Compile(client, r);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->trials_measured(), 0);
  EXPECT_EQ(again->package_digest(), first->package_digest());
}

TEST_F(CompileServiceTest, AWholeModelBudgetIsSpentAcrossTheWorkloads) {
  KilnClient client(farm_->address());
  kiln::v1::CompileRequest r = testing::MlpRequest(0);
  r.mutable_shapes(0)->set_dims(0, 7);  // workloads of its own
  r.set_budget_trials(10);
  auto first = Compile(client, r);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->tuning_stop(), "budget");
  EXPECT_GE(first->trials_measured(), 2);  // every workload's default at least
  EXPECT_LE(first->trials_measured(), 10);
  int per_group = 0;
  for (const auto& g : first->groups()) per_group += g.trials_measured();
  EXPECT_EQ(per_group, first->trials_measured());
  // The same budget again continues from the records: new trials, new best or not.
  auto second = Compile(client, r);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GT(second->trials_measured(), 0);
  EXPECT_LE(second->trials_measured(), 10);
}

TEST_F(CompileServiceTest, AReportShowsEveryTrialWithItsPredictionAndTheWinner) {
  KilnClient client(farm_->address());
  kiln::v1::CompileRequest r = testing::MlpRequest(2);
  r.mutable_shapes(0)->set_dims(0, 11);  // workloads of its own
  ASSERT_TRUE(Compile(client, r).ok());
  // Deeper: by now the cost model has records to learn from.
  r.set_trials_per_group(6);
  auto compiled = Compile(client, r);
  ASSERT_TRUE(compiled.ok()) << compiled.status();

  kiln::v1::ReportRequest request;
  request.set_onnx_model(r.onnx_model());
  *request.mutable_shapes() = r.shapes();
  request.set_model_name("mlp");
  auto report = client.Report(request);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->target(), compiled->target());
  EXPECT_EQ(report->groups(), 2);
  ASSERT_EQ(report->workloads_size(), 2);
  int predicted = 0;
  int64_t job_id = 0;
  for (int i = 0; i < 2; ++i) {
    const kiln::v1::WorkloadTuning& w = report->workloads(i);
    SCOPED_TRACE(w.op_summary());
    EXPECT_EQ(w.workload_key(), compiled->groups(i).workload_key());
    EXPECT_EQ(w.count(), 1);
    EXPECT_EQ(w.best_config(), compiled->groups(i).schedule_config());
    EXPECT_GT(w.best_ms(), 0);
    EXPECT_GE(w.space_size(), 6);
    EXPECT_FALSE(w.default_config().empty());
    EXPECT_GT(w.default_ms(), 0);  // the default is always measured first
    int trials = 0;
    for (const kiln::v1::TuningTrial& t : w.trials()) {
      trials += t.remeasure() ? 0 : 1;
      predicted += t.has_predicted() ? 1 : 0;
      if (!t.remeasure()) {
        EXPECT_NE(t.job_id(), 0) << t.config();
        EXPECT_EQ(t.strategy(), "evolutionary");
        job_id = t.job_id();
      }
    }
    EXPECT_EQ(trials, 6);
    EXPECT_EQ(w.trials(0).config(), w.default_config());
  }
  EXPECT_GT(predicted, 0);

  kiln::v1::ReportRequest by_job;
  by_job.set_job_id(job_id);
  auto job = client.Report(by_job);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job_id(), job_id);
  EXPECT_EQ(job->job_state(), "done");
  ASSERT_EQ(job->workloads_size(), 1);
  EXPECT_GE(job->workloads(0).trials_size(), 6);

  by_job.set_job_id(987654);
  EXPECT_EQ(client.Report(by_job).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client.Report(kiln::v1::ReportRequest()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CompileServiceTest, AProgressiveCompileAnswersAtOnceAndALaterLookupGetsTheTunedPackage) {
  KilnClient client(farm_->address());
  kiln::v1::CompileRequest r = testing::MlpRequest(4);
  r.mutable_shapes(0)->set_dims(0, 13);  // workloads of its own
  r.set_progressive(true);
  auto now = Compile(client, r);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_TRUE(now->tuning_in_background());
  EXPECT_EQ(now->trials_measured(), 0);
  for (const auto& g : now->groups()) EXPECT_EQ(g.median_ms(), 0) << "untuned: the heuristic default";

  kiln::v1::LookupRequest lookup;
  lookup.set_onnx_model(r.onnx_model());
  *lookup.mutable_shapes() = r.shapes();
  lookup.set_target("cpu");
  // The background compile replaces the package when its tuning ends.
  absl::StatusOr<kiln::v1::LookupResponse> found;
  for (int i = 0; i < 600; ++i) {
    found = client.Lookup(lookup);
    ASSERT_TRUE(found.ok()) << found.status();
    ASSERT_TRUE(found->found()) << found->reason();
    if (!found->tuning_in_progress()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(found->tuning_in_progress());
  // The tuned package replaced the first answer unless the whole-model check
  // kept that one (on this small MLP the two can be within its tolerance);
  // either way, the compiles below answer what the lookup found.

  // What it tuned is in the database: the same compile, waiting, measures
  // nothing and gives the package the lookup found.
  r.set_progressive(false);
  auto waited = Compile(client, r);
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(waited->trials_measured(), 0);
  EXPECT_EQ(waited->package_digest(), found->package_digest());
  for (const auto& g : waited->groups()) EXPECT_GT(g.median_ms(), 0) << g.index();
  // Nothing left to tune: a progressive compile has no background work.
  r.set_progressive(true);
  auto again = Compile(client, r);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->tuning_in_background());
  EXPECT_EQ(again->package_digest(), found->package_digest());
}

TEST(CompileServiceThreadsTest, ACompileForTwoThreadsIsTunedOnTwoThreadsUnderItsOwnKey) {
  testing::TestFarm farm(/*with_worker=*/true, /*worker_threads=*/2);
  KilnClient client(farm.address());
  kiln::v1::CompileRequest r = testing::MlpRequest(2);
  r.set_threads(2);
  auto two = Compile(client, r);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->target().size() - two->target().rfind("/t2"), 3u) << two->target();
  EXPECT_EQ(two->trials_measured(), 4);
  auto bytes = client.FetchArtifact(two->package_digest());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto pkg = runtime::Package::FromBytes(*bytes);
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  EXPECT_EQ((*pkg)->manifest().tuned_threads, 2);

  // The one-thread compile of the same model has records of its own to make:
  // nothing measured on two threads stands for one.
  r.set_threads(1);
  auto one = Compile(client, r);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->target().find("/t"), std::string::npos) << one->target();
  EXPECT_EQ(one->trials_measured(), 4);
  EXPECT_NE(one->package_digest(), two->package_digest());
  auto db = tuningdb::TuningDb::Open(farm.db_path());
  ASSERT_TRUE(db.ok()) << db.status();
  for (const auto& g : two->groups()) {
    for (const std::string& target : {two->target(), one->target()}) {
      auto measured = (*db)->MeasuredConfigs(g.workload_key(), target, kScheduleSpaceVersion);
      ASSERT_TRUE(measured.ok()) << measured.status();
      EXPECT_EQ(measured->size(), 2u) << g.index() << " " << target;
    }
  }

  // Lookup finds each compile by its threads.
  kiln::v1::LookupRequest lookup;
  lookup.set_onnx_model(r.onnx_model());
  *lookup.mutable_shapes() = r.shapes();
  lookup.set_threads(2);
  auto found = client.Lookup(lookup);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->found()) << found->reason();
  EXPECT_EQ(found->package_digest(), two->package_digest());

  // A thread count that means nothing is refused, naming it.
  r.set_threads(-1);
  auto negative = Compile(client, r);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument) << negative.status();
  EXPECT_NE(std::string(negative.status().message()).find("threads -1"), std::string::npos) << negative.status();
}

// Puts the package of `other` under the compile key of `request` (as an
// earlier compile of the same key would have left it), and returns the key.
std::string PlantPreviousPackage(KilnClient& client, const std::string& db_path,
                                 const kiln::v1::CompileRequest& request, const std::string& other_digest) {
  kiln::v1::LookupRequest lookup;
  lookup.set_onnx_model(request.onnx_model());
  *lookup.mutable_shapes() = request.shapes();
  lookup.set_threads(request.threads());
  auto key = client.Lookup(lookup);
  EXPECT_TRUE(key.ok()) << key.status();
  auto db = tuningdb::TuningDb::Open(db_path);
  EXPECT_TRUE(db.ok()) << db.status();
  tuningdb::CompileEntry entry;
  entry.compile_key = key->compile_key();
  entry.package_digest = other_digest;
  entry.package_size = 1;
  EXPECT_TRUE((*db)->PutCompileEntry(entry).ok());
  return key->compile_key();
}

// Named targets: a worker standing for x86-64-v3 tunes compiles for it (the
// package records the level and runs here); a target no worker measures is
// compiled untuned, with a warning saying so, instead of waiting or failing.
TEST(CompileServiceTargetTest, ANamedTargetIsTunedByItsWorkerAndAnotherCompilesUntunedWithAWarning) {
  if (HostIsaLevel() != "x86-64-v3" && HostIsaLevel() != "x86-64-v4") {
    GTEST_SKIP() << "this host (" << HostIsaLevel() << ") cannot run x86-64-v3 code";
  }
  testing::TestFarm farm(/*with_worker=*/true, /*worker_threads=*/1, /*worker_target=*/"x86-64-v3");
  KilnClient client(farm.address());
  kiln::v1::CompileRequest r = testing::MlpRequest(2);
  r.set_target("x86-64-v3");
  auto v3 = Compile(client, r);
  ASSERT_TRUE(v3.ok()) << v3.status();
  EXPECT_EQ(v3->target().rfind("cpu/x86_64/x86-64-v3/", 0), 0u) << v3->target();
  EXPECT_EQ(v3->trials_measured(), 4);
  EXPECT_EQ(v3->warnings_size(), 0);
  auto bytes = client.FetchArtifact(v3->package_digest());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto pkg = runtime::Package::FromBytes(*bytes);
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  EXPECT_EQ((*pkg)->manifest().isa_level, "x86-64-v3");
  EXPECT_EQ((*pkg)->manifest().target_cpu, "x86-64-v3");

  r.set_target("cpu:x86-64-v2");
  auto v2 = Compile(client, r);
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(v2->trials_measured(), 0);
  ASSERT_EQ(v2->warnings_size(), 1);
  EXPECT_THAT(v2->warnings(0), HasSubstr("no worker measures target cpu/x86_64/x86-64-v2/"));
  EXPECT_THAT(v2->warnings(0), HasSubstr("kiln-worker --target x86-64-v2"));
  bytes = client.FetchArtifact(v2->package_digest());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  pkg = runtime::Package::FromBytes(*bytes);
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  EXPECT_EQ((*pkg)->manifest().isa_level, "x86-64-v2");

  r.set_target("pentium-mmx-9000");
  auto bad = Compile(client, r);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("unknown CPU target 'pentium-mmx-9000'"));
}

TEST(CompileServiceCheckTest, APackageReplacesAnotherOnlyAfterTheWholeModelIsTimedAgainstIt) {
  testing::TestFarm farm;
  KilnClient client(farm.address());
  kiln::v1::CompileRequest big = testing::MlpRequest(1);
  big.mutable_shapes(0)->set_dims(0, 96);
  auto other = Compile(client, big);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE(other->has_model_check()) << "nothing to replace";

  kiln::v1::CompileRequest r = testing::MlpRequest(1);
  PlantPreviousPackage(client, farm.db_path(), r, other->package_digest());
  auto checked = Compile(client, r);
  ASSERT_TRUE(checked.ok()) << checked.status();
  ASSERT_TRUE(checked->has_model_check());
  const kiln::v1::ModelCheck& check = checked->model_check();
  EXPECT_TRUE(check.checked()) << check.message();
  EXPECT_EQ(check.previous_digest(), other->package_digest());
  EXPECT_GT(check.previous_ms(), 0);
  EXPECT_GT(check.new_ms(), 0);
  // Whichever won, the rule decided it, and the result and a lookup agree.
  EXPECT_EQ(check.kept_previous(), check.new_ms() > check.previous_ms() * 1.02) << check.message();
  if (check.kept_previous()) {
    EXPECT_EQ(checked->package_digest(), other->package_digest());
  } else {
    EXPECT_NE(checked->package_digest(), other->package_digest());
  }
  kiln::v1::LookupRequest lookup;
  lookup.set_onnx_model(r.onnx_model());
  *lookup.mutable_shapes() = r.shapes();
  auto found = client.Lookup(lookup);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->package_digest(), checked->package_digest());
  auto bytes = client.FetchArtifact(checked->package_digest());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(static_cast<int64_t>(bytes->size()), checked->package_size());

  // The same package again replaces nothing: no check.
  if (!check.kept_previous()) {
    auto again = Compile(client, r);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_FALSE(again->has_model_check());
  }
}

// A check that kept the previous package stands: the same compile again gets
// that verdict without timing the pair again, and the same package.
TEST(CompileServiceCheckTest, AVerdictThatKeptThePreviousPackageStands) {
  testing::TestFarm farm;
  KilnClient client(farm.address());
  auto small = Compile(client, testing::MlpRequest(1));
  ASSERT_TRUE(small.ok()) << small.status();
  kiln::v1::CompileRequest big = testing::MlpRequest(1);
  big.mutable_shapes(0)->set_dims(0, 512);  // 512 times the rows: far slower
  PlantPreviousPackage(client, farm.db_path(), big, small->package_digest());
  auto checked = Compile(client, big);
  ASSERT_TRUE(checked.ok()) << checked.status();
  ASSERT_TRUE(checked->model_check().checked()) << checked->model_check().message();
  ASSERT_TRUE(checked->model_check().kept_previous()) << checked->model_check().message();
  EXPECT_EQ(checked->package_digest(), small->package_digest());

  auto again = Compile(client, big);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->package_digest(), small->package_digest());
  EXPECT_TRUE(again->model_check().kept_previous());
  EXPECT_THAT(again->model_check().message(), HasSubstr("checked earlier: "));
  EXPECT_EQ(again->model_check().new_ms(), checked->model_check().new_ms()) << "the same verdict, not a new timing";
}

TEST(CompileServiceCheckTest, WithoutAWorkerTheNewPackageReplacesTheOldUncheckedAndSaysWhy) {
  testing::TestFarm farm(/*with_worker=*/false);
  KilnClient client(farm.address());
  kiln::v1::CompileRequest big = testing::MlpRequest(0);
  big.mutable_shapes(0)->set_dims(0, 96);
  auto other = Compile(client, big);
  ASSERT_TRUE(other.ok()) << other.status();
  kiln::v1::CompileRequest r = testing::MlpRequest(0);
  PlantPreviousPackage(client, farm.db_path(), r, other->package_digest());
  auto compiled = Compile(client, r);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_TRUE(compiled->has_model_check());
  EXPECT_FALSE(compiled->model_check().checked());
  EXPECT_NE(compiled->model_check().message().find("no worker serves"), std::string::npos)
      << compiled->model_check().message();
  EXPECT_NE(compiled->package_digest(), other->package_digest());
}

TEST_F(CompileServiceTest, FetchOfUnknownDigestIsNotFound) {
  KilnClient client(farm_->address());
  auto r = client.FetchArtifact("sha256:" + std::string(64, '0'));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
}

// One test per error class: each is INVALID_ARGUMENT naming what is wrong, and
// the server compiles a good model right after.
struct BadModel {
  const char* name;
  std::string bytes;
  const char* must_mention;
};

std::vector<BadModel> BadModels() {
  std::vector<BadModel> out;
  out.push_back({"malformed bytes", std::string("\x08\x96\x01garbage\xff\xff\xff", 13), "malformed"});
  {
    testing::OnnxModelBuilder b;
    b.Input("x", {"4"});
    b.Node("FancyOp", "fancy0", {"x"}, {"y"});
    b.graph()->add_output()->set_name("y");
    out.push_back({"unsupported operator", b.model().SerializeAsString(), "fancy0"});
  }
  {
    testing::OnnxModelBuilder b;
    b.Input("x", {"4"});
    b.Node("Add", "add0", {"x", "nowhere"}, {"y"});
    b.graph()->add_output()->set_name("y");
    out.push_back({"dangling input", b.model().SerializeAsString(), "add0"});
  }
  {
    testing::OnnxModelBuilder b;
    b.Input("x", {"2", "3"});
    b.Initializer("w", {4}, {1, 2, 3, 4});
    b.Node("Add", "add_mismatch", {"x", "w"}, {"y"});
    b.graph()->add_output()->set_name("y");
    out.push_back({"shape mismatch", b.model().SerializeAsString(), "add_mismatch"});
  }
  return out;
}

TEST_F(CompileServiceTest, BadInputIsInvalidArgumentAndTheServerKeepsServing) {
  KilnClient client(farm_->address());
  for (const BadModel& bad : BadModels()) {
    kiln::v1::CompileRequest r;
    r.set_onnx_model(bad.bytes);
    r.set_target("cpu");
    auto result = Compile(client, r);
    ASSERT_FALSE(result.ok()) << bad.name;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << bad.name << ": " << result.status();
    EXPECT_NE(result.status().message().find(bad.must_mention), std::string::npos)
        << bad.name << ": " << result.status();
  }
  auto ok = Compile(client, testing::MlpRequest(0));
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST_F(CompileServiceTest, UnknownTargetIsInvalidArgument) {
  KilnClient client(farm_->address());
  auto r = testing::MlpRequest(0);
  r.set_target("tpu:v9");
  auto result = Compile(client, r);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("tpu:v9"), std::string::npos);
}

}  // namespace
}  // namespace kiln
