// The task scheduler's allocation of a whole-model budget, over workloads
// whose improvement with trials is known (the tuning callback follows a curve
// per workload), and its stop rules.
#include "server/task_scheduler.h"

#include <map>

#include "gtest/gtest.h"

namespace kiln::server {
namespace {

struct Curve {
  int space = 100;
  // Best median after n measured schedules: start * factor^(rounds of 4 beyond the first), floored.
  double start = 1, factor = 1, floor = 0;
  double At(int n) const {
    double v = start;
    for (int i = 1; i + 4 <= n; i += 4) v *= factor;
    return std::max(v, floor);
  }
};

class FakeFarm {
 public:
  explicit FakeFarm(std::map<std::string, Curve> curves) : curves_(std::move(curves)) {}
  absl::StatusOr<TuneOutcome> Tune(const Workload& w, int goal) {
    const Curve& c = curves_.at(w.key);
    int& n = measured_[w.key];
    int target = std::min(goal, c.space);
    TuneOutcome o;
    o.trials_measured = std::max(0, target - n);
    n = std::max(n, target);
    o.schedules_measured = n;
    o.median_ms = c.At(n);
    calls_[w.key] += 1;
    return o;
  }
  int measured(const std::string& key) { return measured_[key]; }
  int calls(const std::string& key) { return calls_[key]; }

 private:
  std::map<std::string, Curve> curves_;
  std::map<std::string, int> measured_, calls_;
};

Workload Named(const std::string& key) {
  Workload w;
  w.key = key;
  return w;
}

TEST(TaskSchedulerTest, SpendsTheBudgetWhereTheModelGainsMost) {
  Workload big = Named("big"), many = Named("many"), flat = Named("flat"), tiny = Named("tiny");
  FakeFarm farm({{"big", {100, 10.0, 0.6, 2.0}},    // 10 ms, improves a lot
                 {"many", {100, 0.5, 0.9, 0.3}},   // 0.5 ms, run 8 times: 4 ms of the model
                 {"flat", {100, 1.0, 1.0, 1.0}},   // 1 ms, never improves
                 {"tiny", {1, 0.01, 1.0, 0.01}}}); // a space of one point
  TaskScheduler scheduler({{&big, 1, 100}, {&many, 8, 100}, {&flat, 1, 100}, {&tiny, 1, 1}},
                          TuningBudget{60, 0}, TaskScheduler::Options{});
  auto out = scheduler.Run([&](const Workload& w, int goal) { return farm.Tune(w, goal); }, [] { return false; });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->size(), 4u);
  EXPECT_EQ(scheduler.stop_reason(), "budget");
  EXPECT_LE(scheduler.trials_measured(), 60);
  EXPECT_GE(scheduler.trials_measured(), 56);
  // Every workload had its default measured; the space of one point no more.
  EXPECT_EQ(farm.calls("tiny"), 1);
  // The improving workloads reached their floors; the flat one got the fewest trials.
  EXPECT_DOUBLE_EQ(out->at("big").median_ms, 2.0);
  EXPECT_DOUBLE_EQ(out->at("many").median_ms, 0.3);
  EXPECT_GT(farm.measured("big"), farm.measured("flat"));
  EXPECT_GT(farm.measured("many"), farm.measured("flat"));
}

TEST(TaskSchedulerTest, StopsWhenNothingIsExpectedToGain) {
  Workload a = Named("a"), b = Named("b");
  FakeFarm farm({{"a", {100000, 1.0, 1.0, 1.0}}, {"b", {100000, 1.0, 1.0, 1.0}}});
  TaskScheduler scheduler({{&a, 1, 100000}, {&b, 1, 100000}}, TuningBudget{100000, 0}, TaskScheduler::Options{});
  auto out = scheduler.Run([&](const Workload& w, int goal) { return farm.Tune(w, goal); }, [] { return false; });
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(scheduler.stop_reason(), "converged");
  // The expectation halves with every turn that gains nothing: flat workloads
  // stop after a few turns each, long before the budget.
  EXPECT_LT(scheduler.trials_measured(), 100);
  EXPECT_GT(farm.calls("a"), 3);
}

TEST(TaskSchedulerTest, StopsWhenEverySpaceIsMeasuredAndPassesErrorsOn) {
  Workload a = Named("a");
  FakeFarm farm({{"a", {6, 1.0, 0.5, 0.1}}});
  TaskScheduler scheduler({{&a, 1, 6}}, TuningBudget{1000, 0}, TaskScheduler::Options{});
  auto out = scheduler.Run([&](const Workload& w, int goal) { return farm.Tune(w, goal); }, [] { return false; });
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(scheduler.stop_reason(), "spent");
  EXPECT_EQ(farm.measured("a"), 6);
  EXPECT_EQ(out->at("a").trials_measured, 6);

  TaskScheduler failing({{&a, 1, 6}}, TuningBudget{10, 0}, TaskScheduler::Options{});
  auto err = failing.Run([](const Workload&, int) -> absl::StatusOr<TuneOutcome> {
    return absl::UnavailableError("no worker");
  }, [] { return false; });
  EXPECT_EQ(err.status().code(), absl::StatusCode::kUnavailable);
  TaskScheduler cancelled({{&a, 1, 6}}, TuningBudget{10, 0}, TaskScheduler::Options{});
  EXPECT_EQ(cancelled.Run([&](const Workload& w, int goal) { return farm.Tune(w, goal); }, [] { return true; })
                .status()
                .code(),
            absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace kiln::server
