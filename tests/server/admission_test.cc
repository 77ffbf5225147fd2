// AdmissionControl alone: per-client and server-wide slots, the bounded
// queue (first come first served, deadlines and cancellation), the tuning
// budget over a rolling window, model caps, and that its state shrinks back
// when clients go idle.
#include "server/admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "compiler_core/ir/graph.h"
#include "tests/server/eventually.h"

namespace kiln::server {
namespace {

using testing_util::Eventually;
using testing_util::kPatience;

using ::testing::HasSubstr;
using Clock = AdmissionControl::Clock;
using Slot = std::shared_ptr<AdmissionControl::Slot>;

constexpr auto kForever = Clock::time_point::max();

bool Never() { return false; }

AdmissionControl::Options Limits(int per_client, int queued, int server = 0) {
  AdmissionControl::Options o;
  o.max_compiles_per_client = per_client;
  o.max_queued_per_client = queued;
  o.max_compiles = server;
  return o;
}


TEST(AdmissionTest, RunsUpToTheClientsLimitThenRefusesWithoutAQueue) {
  AdmissionControl admission(Limits(2, 0));
  auto a = admission.Admit("alice", kForever, Never);
  auto b = admission.Admit("alice", kForever, Never);
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = admission.Admit("alice", kForever, Never);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(c.status().message(), "client 'alice' has 2 compiles running (limit --max-compiles-per-client=2)");
  EXPECT_EQ(LimitOf(c.status()), "max-compiles-per-client");
  // Another client has slots of its own.
  EXPECT_TRUE(admission.Admit("bob", kForever, Never).ok());
  // A freed slot is free at once.
  a->reset();
  EXPECT_TRUE(admission.Admit("alice", kForever, Never).ok());
}

TEST(AdmissionTest, QueuedCompilesStartInArrivalOrderAndAFullQueueIsRefused) {
  AdmissionControl admission(Limits(1, 2));
  auto running = admission.Admit("alice", kForever, Never);
  ASSERT_TRUE(running.ok());
  std::vector<int> order;
  std::mutex mu;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&, i] {
      auto slot = admission.Admit("alice", kForever, Never);
      ASSERT_TRUE(slot.ok()) << slot.status();
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
    });
    // The second waiter arrives after the first is queued.
    Eventually([&] { return admission.queued() == i + 1; });
  }
  auto refused = admission.Admit("alice", kForever, Never);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("client 'alice' has 1 compile running and 2 waiting"));
  EXPECT_THAT(refused.status().message(), HasSubstr("limit --max-queued-per-client=2"));
  EXPECT_EQ(LimitOf(refused.status()), "max-queued-per-client");
  EXPECT_EQ(admission.UsageOf("alice").queued, 2);

  running->reset();  // each waiter's slot is released as its thread ends
  for (std::thread& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
  EXPECT_EQ(admission.running(), 0);
  EXPECT_EQ(admission.queued(), 0);
}

TEST(AdmissionTest, AClientAtItsLimitHoldsUpNoOtherClient) {
  AdmissionControl admission(Limits(1, 4, /*server=*/2));
  auto alice = admission.Admit("alice", kForever, Never);
  ASSERT_TRUE(alice.ok());
  std::atomic<bool> alice_second_started{false};
  std::thread waiter([&] {
    auto slot = admission.Admit("alice", kForever, Never);
    EXPECT_TRUE(slot.ok());
    alice_second_started = true;
  });
  Eventually([&] { return admission.queued() == 1; });
  // Bob arrives later but alice's waiter may not start: bob goes first.
  auto bob = admission.Admit("bob", kForever, Never);
  ASSERT_TRUE(bob.ok()) << bob.status();
  EXPECT_FALSE(alice_second_started);
  // The server is full now (2): carol waits, and a server without a queue
  // would refuse her naming the server-wide limit.
  AdmissionControl no_queue(Limits(1, 0, /*server=*/1));
  auto first = no_queue.Admit("x", kForever, Never);
  ASSERT_TRUE(first.ok());
  auto refused = no_queue.Admit("y", kForever, Never);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(), "the server has 1 compile running (limit --max-compiles=1)");
  EXPECT_EQ(LimitOf(refused.status()), "max-compiles");

  alice->reset();
  waiter.join();
  EXPECT_TRUE(alice_second_started);
}

TEST(AdmissionTest, AWaitEndsAtTheDeadlineOrWhenCancelled) {
  AdmissionControl admission(Limits(1, 4));
  auto running = admission.Admit("alice", kForever, Never);
  ASSERT_TRUE(running.ok());
  const auto start = Clock::now();
  auto late = admission.Admit("alice", Clock::now() + std::chrono::milliseconds(200), Never);
  ASSERT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(late.status().message(), HasSubstr("waiting for a slot: client 'alice' has 1 compile running"));
  EXPECT_LT(Clock::now() - start, kPatience);

  std::atomic<bool> cancel{false};
  std::future<absl::Status> waiting = std::async(
      std::launch::async, [&] { return admission.Admit("alice", kForever, [&] { return cancel.load(); }).status(); });
  Eventually([&] { return admission.queued() == 1; });
  cancel = true;
  ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(waiting.get().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(admission.queued(), 0);
  // Those that gave up hold nothing: the next one starts once the slot frees.
  running->reset();
  EXPECT_TRUE(admission.Admit("alice", Clock::now(), Never).ok());
}

TEST(AdmissionTest, ZeroMeansUnlimited) {
  AdmissionControl admission(Limits(0, 0, 0));
  std::vector<Slot> slots;
  for (int i = 0; i < 100; ++i) {
    auto slot = admission.Admit("alice", kForever, Never);
    ASSERT_TRUE(slot.ok());
    slots.push_back(*slot);
    (*slot)->Measured(1000000);
    EXPECT_TRUE((*slot)->TuningAllowed().ok());
  }
  EXPECT_EQ(admission.running(), 100);
}

TEST(AdmissionTest, TheTuningBudgetIsSpentOverARollingWindow) {
  AdmissionControl::Options o = Limits(0, 0);
  o.tuning_trials_per_client = 10;
  o.tuning_window = std::chrono::seconds(3600);
  AdmissionControl admission(o);
  Clock::time_point now = Clock::now();
  admission.SetClockForTest([&now] { return now; });

  auto slot = admission.Admit("alice", kForever, Never);
  ASSERT_TRUE(slot.ok());
  // Running totals: 4, then 9 (charges 5), then a smaller total charges nothing.
  (*slot)->Measured(4);
  (*slot)->Measured(9);
  (*slot)->Measured(3);
  EXPECT_EQ(admission.UsageOf("alice").trials_in_window, 9);
  EXPECT_TRUE((*slot)->TuningAllowed().ok());
  now += std::chrono::minutes(30);
  (*slot)->Measured(12);  // the compile admitted under the budget may overshoot it
  EXPECT_EQ(admission.UsageOf("alice").trials_in_window, 12);
  absl::Status refused = (*slot)->TuningAllowed();
  ASSERT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("client 'alice' has measured 12 tuning trials in the last 3600 s "
                                           "(limit --tuning-trials-per-client=10 per --tuning-window-s=3600)"));
  EXPECT_EQ(LimitOf(refused), "tuning-trials-per-client");
  // Another client's budget is its own.
  auto bob = admission.Admit("bob", kForever, Never);
  ASSERT_TRUE(bob.ok());
  EXPECT_TRUE((*bob)->TuningAllowed().ok());

  // An hour after the first 9 they leave the window; the last 3 stay.
  now += std::chrono::minutes(31);
  EXPECT_EQ(admission.UsageOf("alice").trials_in_window, 3);
  EXPECT_TRUE((*slot)->TuningAllowed().ok());
  now += std::chrono::minutes(31);
  EXPECT_EQ(admission.UsageOf("alice").trials_in_window, 0);
}

TEST(AdmissionTest, StateIsForgottenWhenClientsGoIdle) {
  AdmissionControl::Options o = Limits(1, 1);
  o.tuning_trials_per_client = 100;
  o.tuning_window = std::chrono::seconds(60);
  AdmissionControl admission(o);
  Clock::time_point now = Clock::now();
  admission.SetClockForTest([&now] { return now; });
  // Ten thousand clients, one compile each, some refused on the way.
  for (int i = 0; i < 10000; ++i) {
    const std::string client = "client-" + std::to_string(i);
    auto slot = admission.Admit(client, kForever, Never);
    ASSERT_TRUE(slot.ok());
    if (i % 2 == 0) (*slot)->Measured(1);
    if (i % 3 == 0) EXPECT_FALSE(admission.Admit(client, Clock::now(), Never).ok());
  }
  EXPECT_EQ(admission.running(), 0);
  EXPECT_EQ(admission.queued(), 0);
  EXPECT_LE(admission.clients_tracked(), 5000);  // only those with trials in the window
  now += std::chrono::seconds(61);
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(admission.Admit("later", kForever, Never).ok());  // sweeps
  EXPECT_EQ(admission.clients_tracked(), 0);
}

TEST(AdmissionTest, ModelCapsNameTheLimit) {
  Graph g;
  Value* x = *g.AddInput("x", TensorType{});
  Value* c = *g.AddConstant("w", Tensor(DType::kFloat32, {1024}));
  Value* y = *g.AddValue("y");
  Value* z = *g.AddValue("z");
  ASSERT_TRUE(g.AddNode("Add", "add", {x, c}, {y}).ok());
  ASSERT_TRUE(g.AddNode("Relu", "relu", {y}, {z}).ok());
  EXPECT_TRUE(CheckModelLimits(g, ModelLimits{2, 4096}).ok());
  EXPECT_TRUE(CheckModelLimits(g, ModelLimits{0, 0}).ok());
  absl::Status nodes = CheckModelLimits(g, ModelLimits{1, 0});
  ASSERT_EQ(nodes.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(nodes.message(), "the model has 2 nodes (limit --max-model-nodes=1)");
  EXPECT_EQ(LimitOf(nodes), "max-model-nodes");
  absl::Status bytes = CheckModelLimits(g, ModelLimits{0, 4095});
  ASSERT_EQ(bytes.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(bytes.message(), HasSubstr("the model's initializers hold 4096 bytes"));
  EXPECT_EQ(LimitOf(bytes), "max-initializer-mb");
  EXPECT_EQ(LimitOf(absl::ResourceExhaustedError("other")), std::nullopt);
}

TEST(AdmissionTest, RefusalsAreCountedByLimit) {
  ServerMetrics metrics;
  metrics.AdmissionRefused("max-compiles-per-client");
  metrics.AdmissionRefused("max-compiles-per-client");
  double counted = -1;
  for (const prometheus::MetricFamily& f : metrics.registry()->Collect()) {
    if (f.name != "kiln_admission_refused_total") continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      if (m.label.size() == 1 && m.label[0].name == "limit" && m.label[0].value == "max-compiles-per-client") {
        counted = m.counter.value;
      }
    }
  }
  EXPECT_EQ(counted, 2);
}

}  // namespace
}  // namespace kiln::server
