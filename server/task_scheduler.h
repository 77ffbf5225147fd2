// The task scheduler: spends a whole-model tuning budget (trials, seconds or
// both) across the model's distinct workloads where it lowers the model's
// latency most, as Ansor's task scheduler does. Every workload first gets its
// heuristic default measured (one trial); then, round after round, the
// workload with the highest expected gain gets one more round of trials:
//
//   gain = count x max(last turn's improvement, prior x best_ms x decay^stale)
//
// count: how often the model runs it; best_ms: its best measured median;
// stale: its turns in a row that improved nothing (so a workload that stops
// improving stops getting trials). A workload whose space is spent gains
// nothing.
// The run stops when the budget is spent, when no workload can gain, or when
// the best gain is below `stop_fraction` of the model's measured latency.
// Tuning itself goes through a callback (the tuner, with a per-workload goal
// of measured trials), so deepening and resuming work as for any compile.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/fusion/workload.h"
#include "server/tuner.h"

namespace kiln::server {

struct TuningBudget {
  int trials = 0;          // measured schedules for the whole model; 0: no limit
  double seconds = 0;      // wall time of the tuning stage; 0: no limit
  bool enabled() const { return trials > 0 || seconds > 0; }
};

class TaskScheduler {
 public:
  struct Options {
    int round = 4;                // trials a workload gets per turn
    double prior = 0.3;           // expected relative gain of a turn before any is seen
    double decay = 0.5;           // of that expectation, per turn without improvement
    double stop_fraction = 1e-3;  // stop when the best gain is below this share of the model's time
  };
  struct Task {
    const Workload* workload = nullptr;
    int count = 1;       // groups of the model with this workload
    int space_size = 1;  // points of its schedule space
  };
  // Tunes `workload` until it has `trials` measured schedules (Tuner::Tune).
  using TuneFn = std::function<absl::StatusOr<TuneOutcome>(const Workload& workload, int trials)>;

  TaskScheduler(std::vector<Task> tasks, TuningBudget budget, Options options)
      : tasks_(std::move(tasks)), budget_(budget), options_(options) {}

  // The outcome per workload key. Stops early (returning what it has) on the
  // budget; an error of any tuning is returned as is.
  absl::StatusOr<std::map<std::string, TuneOutcome>> Run(const TuneFn& tune, const std::function<bool()>& cancelled);

  // What the run did, for reports: turns in order (workload key, goal in
  // trials after the turn, best median after it).
  struct Turn {
    std::string workload_key;
    int goal = 0;
    double best_ms = 0;
  };
  const std::vector<Turn>& turns() const { return turns_; }
  int trials_measured() const { return trials_measured_; }
  // Why the run stopped: "budget", "converged", "spent" (every space measured).
  const std::string& stop_reason() const { return stop_reason_; }

 private:
  std::vector<Task> tasks_;
  TuningBudget budget_;
  Options options_;
  std::vector<Turn> turns_;
  int trials_measured_ = 0;
  std::string stop_reason_;
};

}  // namespace kiln::server
