// Gradient-style allocation of tuning rounds across a model's workloads.
#include "server/task_scheduler.h"

#include <algorithm>
#include <cmath>

namespace kiln::server {

absl::StatusOr<std::map<std::string, TuneOutcome>> TaskScheduler::Run(const TuneFn& tune,
                                                                       const std::function<bool()>& cancelled) {
  const auto start = std::chrono::steady_clock::now();
  auto over_budget = [&] {
    if (budget_.trials > 0 && trials_measured_ >= budget_.trials) return true;
    return budget_.seconds > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= budget_.seconds;
  };
  struct State {
    int measured = 0;     // schedules measured for the workload (all compiles)
    int stale = 0;        // turns in a row without improvement
    double best = 0;      // best median, ms
    double last_gain = 0; // best before its last turn - best after, ms
  };
  std::map<std::string, TuneOutcome> out;
  std::vector<State> state(tasks_.size());

  // Every workload's default first (or what the database has already).
  for (size_t i = 0; i < tasks_.size(); ++i) {
    if (cancelled()) return absl::CancelledError("compile cancelled");
    auto o = tune(*tasks_[i].workload, 1);
    if (!o.ok()) return o.status();
    out[tasks_[i].workload->key] = *o;
    trials_measured_ += o->trials_measured;
    state[i].measured = o->schedules_measured;
    state[i].best = o->median_ms;
    turns_.push_back(Turn{tasks_[i].workload->key, std::max(1, o->schedules_measured), o->median_ms});
  }
  double model_ms = 0;
  for (size_t i = 0; i < tasks_.size(); ++i) model_ms += tasks_[i].count * state[i].best;

  while (true) {
    if (over_budget()) {
      stop_reason_ = "budget";
      break;
    }
    if (cancelled()) return absl::CancelledError("compile cancelled");
    int pick = -1;
    double best_gain = 0;
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (state[i].measured >= tasks_[i].space_size) continue;
      double expected = options_.prior * state[i].best * std::pow(options_.decay, state[i].stale);
      double gain = tasks_[i].count * std::max(state[i].last_gain, expected);
      if (pick < 0 || gain > best_gain) {
        pick = static_cast<int>(i);
        best_gain = gain;
      }
    }
    if (pick < 0) {
      stop_reason_ = "spent";
      break;
    }
    if (best_gain < options_.stop_fraction * model_ms) {
      stop_reason_ = "converged";
      break;
    }
    State& s = state[pick];
    int round = options_.round;
    if (budget_.trials > 0) round = std::min(round, budget_.trials - trials_measured_);
    const int goal = s.measured + std::max(1, round);
    auto o = tune(*tasks_[pick].workload, goal);
    if (!o.ok()) return o.status();
    trials_measured_ += o->trials_measured;
    const double before = s.best;
    s.measured = std::max(o->schedules_measured, goal);  // a spent space reports fewer
    if (o->schedules_measured < goal) s.measured = tasks_[pick].space_size;
    s.best = o->median_ms > 0 ? std::min(before, o->median_ms) : before;
    s.stale = s.best < before * (1 - 1e-3) ? 0 : s.stale + 1;
    s.last_gain = before - s.best;
    model_ms -= tasks_[pick].count * (before - s.best);
    TuneOutcome& kept = out[tasks_[pick].workload->key];
    const int earlier = kept.trials_measured;
    kept = *o;
    kept.trials_measured += earlier;
    kept.from_database = kept.trials_measured == 0;
    turns_.push_back(Turn{tasks_[pick].workload->key, goal, s.best});
  }
  return out;
}

}  // namespace kiln::server
