// The farm's lease rules: leases go to workers of the right target, a silent
// worker loses its lease and the task is measured elsewhere, identical tasks
// are measured once, results count only from the holder, and tasks measured
// on several threads go to workers that may use as many.
#include "server/task_broker.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "server/farm_target.h"

namespace kiln::server {
namespace {

using std::chrono::milliseconds;

kiln::v1::MeasureTask Task(const std::string& config) {
  kiln::v1::MeasureTask t;
  t.set_workload_key("wk");
  t.set_schedule_config(config);
  t.set_space_version(1);
  return t;
}

kiln::v1::MeasureResult Ok(const std::string& task_id, double ms) {
  kiln::v1::MeasureResult r;
  r.set_task_id(task_id);
  r.set_median_ms(ms);
  return r;
}

TaskBroker::Options FastOptions() {
  TaskBroker::Options o;
  o.worker_timeout = milliseconds(300);
  o.task_timeout = milliseconds(5000);
  return o;
}

TEST(TaskBrokerTest, LeaseGoesToWorkersOfTheTarget) {
  TaskBroker broker(FastOptions());
  std::string cpu = broker.RegisterWorker("cpu/a", "h1", {});
  std::string other = broker.RegisterWorker("cpu/b", "h2", {});
  auto f = broker.Submit("cpu/a", Task("x=1"));
  EXPECT_TRUE(broker.Lease(other, 1, milliseconds(50)).empty());
  auto leased = broker.Lease(cpu, 1, milliseconds(50));
  ASSERT_EQ(leased.size(), 1u);
  EXPECT_EQ(leased[0].schedule_config(), "x=1");
  EXPECT_GT(leased[0].deadline_unix_ms(), 0);
  auto [accepted, rejected] = broker.Report(cpu, {Ok(leased[0].task_id(), 1.5)});
  EXPECT_EQ(accepted, 1);
  EXPECT_EQ(rejected, 0);
  ASSERT_EQ(f.wait_for(std::chrono::seconds(1)), std::future_status::ready);
  EXPECT_DOUBLE_EQ(f.get().result.median_ms(), 1.5);
  EXPECT_EQ(f.get().worker_id, cpu);
}

TEST(TaskBrokerTest, ADrainedWorkerLeasesNothingReportsWhatItHoldsAndIsForgotten) {
  TaskBroker broker(FastOptions());
  std::string a = broker.RegisterWorker("cpu", "a", {});
  std::string b = broker.RegisterWorker("cpu", "b", {});
  auto first = broker.Submit("cpu", Task("x=1"));
  auto held = broker.Lease(a, 1, milliseconds(50));
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(broker.Drain(a), 1);  // it holds one task
  EXPECT_EQ(broker.Drain("nobody"), std::nullopt);
  // New work goes to the other worker; the drained one gets none, and is told.
  auto second = broker.Submit("cpu", Task("x=2"));
  bool draining = false;
  EXPECT_TRUE(broker.Lease(a, 1, milliseconds(50), &draining).empty());
  EXPECT_TRUE(draining);
  ASSERT_EQ(broker.Lease(b, 1, milliseconds(50), &draining).size(), 1u);
  EXPECT_FALSE(draining);
  // What it held still counts, then it is forgotten at its next lease.
  EXPECT_EQ(broker.Report(a, {Ok(held[0].task_id(), 1.0)}), std::make_pair(1, 0));
  EXPECT_DOUBLE_EQ(first.get().result.median_ms(), 1.0);
  EXPECT_TRUE(broker.Lease(a, 1, milliseconds(50), &draining).empty());
  EXPECT_TRUE(draining);
  std::vector<WorkerView> workers = broker.Workers();
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].id, b);
  EXPECT_TRUE(broker.HasLiveWorker("cpu"));
  EXPECT_EQ(broker.Drain(b), 1);
  EXPECT_FALSE(broker.HasLiveWorker("cpu"));  // compiles do not wait for a draining worker
}

TEST(TaskBrokerTest, ADrainWakesAWorkerWaitingForWork) {
  TaskBroker broker(FastOptions());
  std::string a = broker.RegisterWorker("cpu", "a", {});
  bool draining = false;
  std::thread drain([&] {
    std::this_thread::sleep_for(milliseconds(100));
    broker.Drain(a);
  });
  // Without the drain it would wait the whole 60 s for work.
  EXPECT_TRUE(broker.Lease(a, 1, milliseconds(60000), &draining).empty());
  drain.join();
  EXPECT_TRUE(draining);
  EXPECT_TRUE(broker.Workers().empty());
}

TEST(TaskBrokerTest, ResultsFromANonHolderAreRejected) {
  TaskBroker broker(FastOptions());
  std::string a = broker.RegisterWorker("cpu", "a", {});
  std::string b = broker.RegisterWorker("cpu", "b", {});
  auto f = broker.Submit("cpu", Task("x=1"));
  auto leased = broker.Lease(a, 1, milliseconds(50));
  ASSERT_EQ(leased.size(), 1u);
  EXPECT_EQ(broker.Report(b, {Ok(leased[0].task_id(), 1.0)}), std::make_pair(0, 1));
  EXPECT_EQ(broker.Report("nobody", {Ok(leased[0].task_id(), 1.0)}), std::make_pair(0, 1));
  EXPECT_NE(f.wait_for(milliseconds(10)), std::future_status::ready);
  EXPECT_EQ(broker.Report(a, {Ok(leased[0].task_id(), 2.0)}), std::make_pair(1, 0));
  EXPECT_DOUBLE_EQ(f.get().result.median_ms(), 2.0);
}

// Two workers of one host (the same name) and a server restart: the one that
// registers again first must not get the id the other still holds, or the
// other would beat, lease and report as it, keeping a dead one's leases alive.
TEST(TaskBrokerTest, ARestartedBrokerNeverReusesAnEarlierWorkerId) {
  std::string before, after;
  {
    TaskBroker first(FastOptions());
    before = first.RegisterWorker("cpu", "host", {});
  }
  TaskBroker restarted(FastOptions());
  after = restarted.RegisterWorker("cpu", "host", {});
  EXPECT_NE(after, before);
  EXPECT_FALSE(restarted.Heartbeat(before));  // the old holder learns to register again
  EXPECT_TRUE(restarted.Heartbeat(after));
}

TEST(TaskBrokerTest, SilentWorkerLosesItsLeaseToAnother) {
  TaskBroker broker(FastOptions());
  std::string dead = broker.RegisterWorker("cpu", "dead", {});
  auto f = broker.Submit("cpu", Task("x=1"));
  auto leased = broker.Lease(dead, 1, milliseconds(50));
  ASSERT_EQ(leased.size(), 1u);
  // `dead` never beats again; a live worker keeps beating and gets the task.
  std::string live = broker.RegisterWorker("cpu", "live", {});
  std::vector<kiln::v1::MeasureTask> again;
  for (int i = 0; i < 40 && again.empty(); ++i) {
    ASSERT_TRUE(broker.Heartbeat(live));
    again = broker.Lease(live, 1, milliseconds(50));
  }
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].task_id(), leased[0].task_id());
  EXPECT_FALSE(broker.Heartbeat(dead));  // forgotten: it must register again
  EXPECT_EQ(broker.Report(dead, {Ok(leased[0].task_id(), 1.0)}), std::make_pair(0, 1));
  EXPECT_EQ(broker.Report(live, {Ok(again[0].task_id(), 3.0)}), std::make_pair(1, 0));
  EXPECT_EQ(f.get().worker_id, live);
}

TEST(TaskBrokerTest, IdenticalInFlightTasksAreMeasuredOnce) {
  TaskBroker broker(FastOptions());
  std::string w = broker.RegisterWorker("cpu", "w", {});
  auto f1 = broker.Submit("cpu", Task("x=1"));
  auto f2 = broker.Submit("cpu", Task("x=1"));
  auto f3 = broker.Submit("cpu", Task("x=2"));
  auto leased = broker.Lease(w, 10, milliseconds(50));
  ASSERT_EQ(leased.size(), 2u);
  std::vector<kiln::v1::MeasureResult> results;
  for (const auto& t : leased) results.push_back(Ok(t.task_id(), 1.0));
  broker.Report(w, results);
  EXPECT_EQ(f1.get().result.task_id(), f2.get().result.task_id());
  EXPECT_NE(f1.get().result.task_id(), f3.get().result.task_id());
}

TEST(TaskBrokerTest, GivesUpAfterMaxAttempts) {
  auto options = FastOptions();
  options.max_attempts = 2;
  TaskBroker broker(options);
  auto f = broker.Submit("cpu", Task("x=1"));
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::string w = broker.RegisterWorker("cpu", "flaky", {});
    ASSERT_EQ(broker.Lease(w, 1, milliseconds(2000)).size(), 1u);
    // ...and dies.
  }
  ASSERT_EQ(f.wait_for(std::chrono::seconds(3)), std::future_status::ready);
  EXPECT_EQ(f.get().result.error(), kiln::v1::TIMEOUT);
  EXPECT_NE(f.get().result.error_message().find("lost its lease 2 times"), std::string::npos);
}

TEST(TaskBrokerTest, WorkersLeaseOnlyTasksOfTheirScheduleSpaceVersion) {
  TaskBroker broker(FastOptions());
  kiln::v1::DeviceInfo old_build, new_build;
  old_build.set_space_version(1);
  new_build.set_space_version(2);
  std::string old_worker = broker.RegisterWorker("cpu", "old", old_build);
  auto f = broker.Submit("cpu", Task("x=1"));  // space version 1
  kiln::v1::MeasureTask v2 = Task("x=2");
  v2.set_space_version(2);
  broker.Submit("cpu", v2);
  EXPECT_TRUE(broker.HasLiveWorker("cpu", 1));
  EXPECT_FALSE(broker.HasLiveWorker("cpu", 2));
  auto leased = broker.Lease(old_worker, 10, milliseconds(50));
  ASSERT_EQ(leased.size(), 1u);
  EXPECT_EQ(leased[0].schedule_config(), "x=1");
  std::string new_worker = broker.RegisterWorker("cpu", "new", new_build);
  auto leased2 = broker.Lease(new_worker, 10, milliseconds(50));
  ASSERT_EQ(leased2.size(), 1u);
  EXPECT_EQ(leased2[0].schedule_config(), "x=2");
}

TEST(TaskBrokerTest, TasksOnMoreThreadsGoOnlyToWorkersThatMayUseThem) {
  TaskBroker broker(FastOptions());
  kiln::v1::DeviceInfo one_core, two_cores;
  two_cores.set_measure_threads(2);
  std::string narrow = broker.RegisterWorker("cpu/a", "narrow", one_core);
  broker.Submit(RecordTargetKey("cpu/a", 2), Task("x=2"));
  EXPECT_FALSE(broker.HasLiveWorker("cpu/a/t2"));
  EXPECT_TRUE(broker.HasLiveWorker("cpu/a"));
  EXPECT_TRUE(broker.Lease(narrow, 10, milliseconds(50)).empty());

  std::string wide = broker.RegisterWorker("cpu/a", "wide", two_cores);
  EXPECT_TRUE(broker.HasLiveWorker("cpu/a/t2"));
  EXPECT_FALSE(broker.HasLiveWorker("cpu/a/t3"));
  broker.Submit("cpu/a", Task("x=1"));
  auto leased = broker.Lease(wide, 10, milliseconds(50));
  ASSERT_EQ(leased.size(), 2u);
  // One thread first, then two; the broker stamps the task with its threads.
  EXPECT_EQ(leased[0].schedule_config(), "x=1");
  EXPECT_EQ(leased[0].threads(), 1);
  EXPECT_EQ(leased[1].schedule_config(), "x=2");
  EXPECT_EQ(leased[1].threads(), 2);
}

TEST(FarmTargetTest, RecordTargetKeysNameTheThreadsAboveOne) {
  EXPECT_EQ(RecordTargetKey("cpu/x86_64/znver4/1a2b3c4d", 1), "cpu/x86_64/znver4/1a2b3c4d");
  EXPECT_EQ(RecordTargetKey("cpu/x86_64/znver4/1a2b3c4d", 0), "cpu/x86_64/znver4/1a2b3c4d");
  EXPECT_EQ(RecordTargetKey("cpu/x86_64/znver4/1a2b3c4d", 8), "cpu/x86_64/znver4/1a2b3c4d/t8");
  RecordTarget r = ParseRecordTargetKey("cpu/x86_64/znver4/1a2b3c4d/t8");
  EXPECT_EQ(r.target_key, "cpu/x86_64/znver4/1a2b3c4d");
  EXPECT_EQ(r.threads, 8);
  for (const char* plain : {"cpu/x86_64/znver4/1a2b3c4d", "cuda/sm_90", "cpu/a/t", "cpu/a/t1", "cpu/a/tx", "t2"}) {
    EXPECT_EQ(ParseRecordTargetKey(plain).target_key, plain) << plain;
    EXPECT_EQ(ParseRecordTargetKey(plain).threads, 1) << plain;
  }
  EXPECT_TRUE(WorkerServes("cpu/a", 4, "cpu/a/t3"));
  EXPECT_FALSE(WorkerServes("cpu/a", 2, "cpu/a/t3"));
  EXPECT_FALSE(WorkerServes("cpu/b", 4, "cpu/a/t2"));
}

TEST(TaskBrokerTest, LeaseLongPollWakesOnSubmit) {
  TaskBroker broker(FastOptions());
  std::string w = broker.RegisterWorker("cpu", "w", {});
  std::thread submitter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    broker.Submit("cpu", Task("x=1"));
  });
  auto leased = broker.Lease(w, 1, milliseconds(3000));
  submitter.join();
  EXPECT_EQ(leased.size(), 1u);
}

// A task wakes one waiting worker that can measure it, not all of them: a
// burst of tasks, one per waiting worker of the target, wakes every one of
// them (none is lost), while a waiting worker of another target sleeps on.
TEST(TaskBrokerTest, EachTaskWakesOneWaitingWorkerThatServesIt) {
  TaskBroker broker(FastOptions());
  constexpr int kWorkers = 8;
  std::vector<std::string> ids;
  for (int i = 0; i < kWorkers; ++i) ids.push_back(broker.RegisterWorker("cpu", "w" + std::to_string(i), {}));
  const std::string other = broker.RegisterWorker("gpu", "g", {});
  std::vector<std::future<size_t>> leases;
  for (const std::string& id : ids) {
    leases.push_back(
        std::async(std::launch::async, [&, id] { return broker.Lease(id, 1, milliseconds(60000)).size(); }));
  }
  auto other_lease = std::async(std::launch::async, [&] { return broker.Lease(other, 1, milliseconds(60000)).size(); });
  // Every worker is waiting before the burst (each Lease is polling).
  while (true) {
    int polling = 0;
    for (const auto& q : broker.State().workers) polling += q.silent_seconds == 0 ? 1 : 0;
    if (polling == kWorkers + 1) break;
    std::this_thread::sleep_for(milliseconds(5));
  }
  for (int i = 0; i < kWorkers; ++i) broker.Submit("cpu", Task("x=" + std::to_string(i)));
  // Without a wake each would wait its whole 60 s: the test's timeout says so.
  for (auto& lease : leases) EXPECT_EQ(lease.get(), 1u);
  EXPECT_NE(other_lease.wait_for(milliseconds(100)), std::future_status::ready);
  broker.Drain(other);
  EXPECT_EQ(other_lease.get(), 0u);
}

}  // namespace
}  // namespace kiln::server

namespace kiln::server {
namespace {

// A re-measurement avoids the workers that measured the schedule before: a
// second worker of the target takes it; the avoided one leases it only when
// it is the only worker left.
TEST(TaskBrokerTest, ATaskAvoidsItsWorkersWhileAnotherCanMeasureIt) {
  TaskBroker broker(FastOptions());
  const std::string a = broker.RegisterWorker("cpu/a", "a", {});
  const std::string b = broker.RegisterWorker("cpu/a", "b", {});
  broker.Submit("cpu/a", Task("x=1"), {a});
  EXPECT_TRUE(broker.Lease(a, 10, milliseconds(50)).empty()) << "the avoided worker leased it while b could";
  auto leased = broker.Lease(b, 10, milliseconds(50));
  ASSERT_EQ(leased.size(), 1u);
  EXPECT_EQ(leased[0].schedule_config(), "x=1");

  // Only avoided workers serve the target: one of them measures it.
  broker.Submit("cpu/a", Task("x=2"), {a, b});
  auto either = broker.Lease(a, 10, milliseconds(50));
  ASSERT_EQ(either.size(), 1u);
  EXPECT_EQ(either[0].schedule_config(), "x=2");

  // b drains: a is the only live worker and takes what avoids it.
  broker.Drain(b);
  broker.Submit("cpu/a", Task("x=3"), {a});
  auto alone = broker.Lease(a, 10, milliseconds(50));
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone[0].schedule_config(), "x=3");
}

}  // namespace
}  // namespace kiln::server
