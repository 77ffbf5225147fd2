// The tuner: finds the schedule for one workload on one target. A tuning
// database hit answers at once; a miss turns into a tuning job whose candidate
// schedules are measured by the farm's workers, every measurement recorded.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "compiler_core/schedule_space.h"
#include "compiler_core/target.h"
#include "compiler_core/workload.h"
#include "server/task_broker.h"
#include "tuning_db/tuning_db.h"

namespace kiln::server {

struct TuneOutcome {
  ScheduleConfig config;
  double median_ms = 0;       // 0 when the default was used without measuring
  bool from_database = false;
  int trials_measured = 0;
};

struct TuneProgress {
  int trials_done = 0;
  int trials_total = 0;
  double best_ms = 0;
};

class Tuner {
 public:
  struct Options {
    // How long a tuning job waits for a worker of its target before failing.
    std::chrono::milliseconds worker_wait{30000};
  };
  Tuner(tuningdb::TuningDb* db, TaskBroker* broker, Options options)
      : db_(db), broker_(broker), options_(options) {}

  // trials == 0: no search; the heuristic default (or a database record if one exists).
  absl::StatusOr<TuneOutcome> Tune(const Workload& workload, const std::string& target_key,
                                   const CpuTarget& target, int trials,
                                   const std::function<void(const TuneProgress&)>& on_progress,
                                   const std::function<bool()>& cancelled);

 private:
  tuningdb::TuningDb* db_;
  TaskBroker* broker_;
  Options options_;
};

}  // namespace kiln::server
