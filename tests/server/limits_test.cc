// The server's limits through real gRPC (docs/operations.md, "Limits"): an
// oversize request, a model over its caps, a client over its concurrent and
// queued compiles, a deadline while tuning and while queued, and a client over
// its tuning budget each end in the documented status naming the limit, and
// the server goes on serving.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "client/kiln_client.h"
#include "compiler_core/codegen/schedule_space.h"
#include "kiln/v1/compile.grpc.pb.h"
#include "kiln/v1/worker.grpc.pb.h"
#include "server/embedded_farm.h"
#include "tests/server/eventually.h"
#include "tests/server/test_farm.h"
#include "tuning_db/tuning_db.h"
#include "worker/device_info.h"

namespace kiln {
namespace {

using testing_util::Eventually;
using testing_util::kPatience;

using client::KilnClient;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

void NoProgress(const kiln::v1::Progress&) {}

// A farm over a fresh database with the given limits; `worker`: one in-process
// CPU worker, else none (a compile that tunes then waits for one).
class LimitedFarm {
 public:
  LimitedFarm(const server::ServerOptions& limits, bool worker) {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("kiln_limits_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    server::EmbeddedFarm::Options options;
    options.server = limits;
    options.server.db_path = (dir_ / "tuning.db").string();
    options.server.worker_wait = std::chrono::milliseconds(120000);
    options.workers = worker ? 1 : 0;
    options.isolate = false;
    options.worker_name = "limits-worker";
    auto farm = server::EmbeddedFarm::Start(options);
    EXPECT_TRUE(farm.ok()) << farm.status();
    if (farm.ok()) farm_ = std::move(*farm);
  }
  ~LimitedFarm() {
    farm_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string address() const { return farm_->address(); }
  std::string db_path() const { return (dir_ / "tuning.db").string(); }
  server::AdmissionControl& admission() { return farm_->server().admission(); }
  server::KilnServer& server() { return farm_->server(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::unique_ptr<server::EmbeddedFarm> farm_;
};

// A compile held open on the server: it tunes on a farm without workers, so it
// waits (holding its slot) until cancelled.
class HeldCompile {
 public:
  explicit HeldCompile(const std::string& address)
      : stub_(kiln::v1::CompileService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
    reader_ = stub_->Compile(&context_, testing::MlpRequest(3));
    // The first progress event comes once the compile has its slot.
    kiln::v1::CompileEvent event;
    started_ = reader_->Read(&event) && event.has_progress();
  }
  bool started() const { return started_; }
  grpc::Status Cancel() {
    context_.TryCancel();
    kiln::v1::CompileEvent event;
    while (reader_->Read(&event)) {
    }
    return reader_->Finish();
  }

 private:
  std::unique_ptr<kiln::v1::CompileService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<kiln::v1::CompileEvent>> reader_;
  bool started_ = false;
};

TEST(LimitsTest, AnOversizeRequestIsRefusedUnreadAndTheServerGoesOn) {
  server::ServerOptions limits;
  limits.max_request_bytes = 1 << 20;
  LimitedFarm farm(limits, /*worker=*/false);
  KilnClient client(farm.address());
  kiln::v1::CompileRequest big = testing::MlpRequest(0);
  big.set_onnx_model(std::string(2 << 20, 'x'));
  auto refused = client.Compile(big, NoProgress);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("--max-request-mb"));
  auto fine = client.Compile(testing::MlpRequest(0), NoProgress);
  EXPECT_TRUE(fine.ok()) << fine.status();
}

TEST(LimitsTest, AModelOverItsCapsIsRefusedNamingTheLimit) {
  {
    server::ServerOptions limits;
    limits.model_limits.max_nodes = 3;
    LimitedFarm farm(limits, /*worker=*/false);
    KilnClient client(farm.address());
    auto refused = client.Compile(testing::MlpRequest(0), NoProgress);
    ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
    EXPECT_THAT(refused.status().message(), HasSubstr("nodes (limit --max-model-nodes=3)"));
    // The report of the model is held to the same caps.
    kiln::v1::ReportRequest report;
    report.set_onnx_model(testing::MlpRequest(0).onnx_model());
    *report.mutable_shapes() = testing::MlpRequest(0).shapes();
    auto reported = client.Report(report);
    EXPECT_EQ(reported.status().code(), absl::StatusCode::kResourceExhausted) << reported.status();
  }
  {
    server::ServerOptions limits;
    limits.model_limits.max_initializer_bytes = 1024;
    LimitedFarm farm(limits, /*worker=*/false);
    KilnClient client(farm.address());
    auto refused = client.Compile(testing::MlpRequest(0), NoProgress);
    ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
    EXPECT_THAT(refused.status().message(), HasSubstr("the model's initializers hold"));
    EXPECT_THAT(refused.status().message(), HasSubstr("(limit --max-initializer-mb=1024 bytes)"));
  }
}

TEST(LimitsTest, AClientOverItsConcurrentCompilesWaitsThenIsRefused) {
  server::ServerOptions limits;
  limits.admission.max_compiles_per_client = 1;
  limits.admission.max_queued_per_client = 1;
  LimitedFarm farm(limits, /*worker=*/false);
  HeldCompile held(farm.address());
  ASSERT_TRUE(held.started());
  EXPECT_EQ(farm.admission().running(), 1);

  // The second waits in the client's queue for the slot ...
  KilnClient client(farm.address());
  std::future<absl::StatusOr<kiln::v1::CompileResult>> queued =
      std::async(std::launch::async, [&] { return client.Compile(testing::MlpRequest(0), NoProgress); });
  Eventually([&] { return farm.admission().queued() == 1; });
  // ... and the third finds the queue full.
  auto refused = client.Compile(testing::MlpRequest(0), NoProgress);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("client '127.0.0.1' has 1 compile running and 1 waiting"));
  EXPECT_THAT(refused.status().message(), HasSubstr("limit --max-queued-per-client=1"));

  // The held compile ends: the queued one runs.
  EXPECT_EQ(held.Cancel().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_EQ(queued.wait_for(kPatience), std::future_status::ready);
  auto result = queued.get();
  EXPECT_TRUE(result.ok()) << result.status();
  Eventually([&] { return farm.admission().running() == 0; });
}

TEST(LimitsTest, ADeadlineStopsTheCompileWhileTuningAndWhileQueued) {
  server::ServerOptions limits;
  limits.admission.max_compiles_per_client = 1;
  LimitedFarm farm(limits, /*worker=*/false);
  KilnClient client(farm.address());

  // Tuning with no worker would wait 120 s for one: the 2 s deadline ends it.
  const auto start = Clock::now();
  auto tuned = client.Compile(testing::MlpRequest(3), NoProgress, absl::Seconds(2));
  ASSERT_EQ(tuned.status().code(), absl::StatusCode::kDeadlineExceeded) << tuned.status();
  EXPECT_THAT(tuned.status().message(), HasSubstr("did not finish within its deadline of 2s"));
  EXPECT_LT(Clock::now() - start, kPatience);
  // The server stopped it too: its slot is free.
  Eventually([&] { return farm.admission().running() == 0; });

  // Waiting behind a compile that holds the client's only slot.
  HeldCompile held(farm.address());
  ASSERT_TRUE(held.started());
  auto waited = client.Compile(testing::MlpRequest(0), NoProgress, absl::Seconds(1));
  ASSERT_EQ(waited.status().code(), absl::StatusCode::kDeadlineExceeded) << waited.status();
  Eventually([&] { return farm.admission().queued() == 0; });
  EXPECT_EQ(held.Cancel().error_code(), grpc::StatusCode::CANCELLED);
  Eventually([&] { return farm.admission().running() == 0; });
}

TEST(LimitsTest, AClientOverItsTuningBudgetMayStillCompileWhatTheDatabaseAnswers) {
  server::ServerOptions limits;
  limits.admission.tuning_trials_per_client = 2;
  LimitedFarm farm(limits, /*worker=*/true);
  KilnClient client(farm.address());

  auto first = client.Compile(testing::MlpRequest(2), NoProgress);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_GE(first->trials_measured(), 2);
  const int64_t spent = farm.admission().UsageOf("127.0.0.1").trials_in_window;
  EXPECT_GE(spent, first->trials_measured());

  // New workloads (other shapes) would be measured: refused.
  kiln::v1::CompileRequest other = testing::MlpRequest(2);
  other.mutable_shapes(0)->set_dims(0, 3);
  auto refused = client.Compile(other, NoProgress);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("client '127.0.0.1' has measured " + std::to_string(spent) +
                        " tuning trials in the last 3600 s (limit --tuning-trials-per-client=2"));
  // So is their progressive compile (its tuning would go on in the background).
  other.set_progressive(true);
  EXPECT_EQ(client.Compile(other, NoProgress).status().code(), absl::StatusCode::kResourceExhausted);

  // What the database answers still compiles, and so does an untuned compile.
  auto again = client.Compile(testing::MlpRequest(2), NoProgress);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->trials_measured(), 0);
  EXPECT_EQ(again->package_digest(), first->package_digest());
  other.set_progressive(false);
  other.set_trials_per_group(0);
  auto untuned = client.Compile(other, NoProgress);
  EXPECT_TRUE(untuned.ok()) << untuned.status();
}

// A cancelled compile leaves its tuning job running (the records serve the
// next compile); what that job measures afterwards is still its client's.
TEST(LimitsTest, TrialsAJobMeasuresAfterItsCompileWasCancelledAreChargedToItsClient) {
  server::ServerOptions limits;
  limits.admission.tuning_trials_per_client = 100000;  // counted, never reached
  LimitedFarm farm(limits, /*worker=*/true);
  auto stub =
      kiln::v1::CompileService::NewStub(grpc::CreateChannel(farm.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  kiln::v1::CompileRequest request = testing::MlpRequest(24);
  auto reader = stub->Compile(&context, request);
  // Cancelled once its first job has measured something: most of it is left.
  kiln::v1::CompileEvent event;
  int64_t seen = 0;
  while (reader->Read(&event)) {
    if (event.has_progress() && event.progress().trials_measured() >= 1) {
      seen = event.progress().trials_measured();
      break;
    }
  }
  ASSERT_GE(seen, 1) << "the compile ended before it measured anything";
  context.TryCancel();
  while (reader->Read(&event)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  // The job goes on to its goal; then every trial it measured is charged.
  Eventually([&] { return farm.server().active_tuning_jobs() == 0; });
  auto db = tuningdb::TuningDb::Open(farm.db_path());
  ASSERT_TRUE(db.ok()) << db.status();
  auto jobs = (*db)->ListJobs(std::nullopt);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  int64_t measured = 0;
  for (const tuningdb::TuningJob& job : *jobs) {
    for (const auto& candidate : job.candidates) measured += candidate.measured() ? 1 : 0;
  }
  EXPECT_GT(measured, seen) << "the job stopped with the compile";
  EXPECT_EQ(farm.admission().UsageOf("127.0.0.1").trials_in_window, measured);
}

// A compile that tunes while the only worker of its target runs another
// schedule space version (a worker of an older Kiln build) is told so, not
// only that no worker measures the target: UNAVAILABLE after --worker-wait-ms,
// naming the worker and its version.
TEST(LimitsTest, AWorkerOfAnotherSpaceVersionIsNamedWhenACompileFindsNoWorker) {
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                              ("kiln_limits_space_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  server::EmbeddedFarm::Options options;
  options.server.db_path = (dir / "tuning.db").string();
  options.server.worker_wait = std::chrono::milliseconds(1500);
  options.workers = 0;
  auto farm = server::EmbeddedFarm::Start(options);
  ASSERT_TRUE(farm.ok()) << farm.status();
  auto channel = grpc::CreateChannel((*farm)->address(), grpc::InsecureChannelCredentials());
  auto workers = kiln::v1::WorkerService::NewStub(channel);
  kiln::v1::RegisterRequest reg;
  reg.set_hostname("old-build");
  *reg.mutable_device() = worker::DescribeCpu();
  reg.mutable_device()->set_space_version(kScheduleSpaceVersion - 1);
  kiln::v1::RegisterResponse registered;
  {
    grpc::ClientContext context;
    grpc::Status s = workers->Register(&context, reg, &registered);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  KilnClient client((*farm)->address());
  auto compiled = client.Compile(testing::MlpRequest(2), NoProgress);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kUnavailable) << compiled.status();
  EXPECT_THAT(compiled.status().message(),
              HasSubstr(registered.worker_id() + " measures version " + std::to_string(kScheduleSpaceVersion - 1)));
  EXPECT_THAT(compiled.status().message(),
              HasSubstr("at schedule space version " + std::to_string(kScheduleSpaceVersion)));
  farm->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln
