// The tuner: finds the schedule for one workload on one target. A workload
// with as many measured schedules as the compile asks for is answered from the
// tuning database at once; one with fewer turns into a tuning job that
// measures more, round by round, on the farm's workers: a search strategy
// (server/search_strategy.h) proposes each round from what was measured so
// far. Asking for more trials later deepens the search; nothing is measured
// twice. The job lives in the database (tuningdb::TuningJob): every
// measurement is recorded as it arrives, and a restarted server resumes the
// jobs that were not finished.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/fusion/workload.h"
#include "server/cost_model_store.h"
#include "server/search_strategy.h"
#include "server/task_broker.h"
#include "tuning_db/tuning_db.h"

namespace kiln::server {

struct TuneOutcome {
  ScheduleConfig config;
  double median_ms = 0;       // 0 when the default was used without measuring
  bool from_database = false;
  int trials_measured = 0;     // by this call
  int schedules_measured = 0;  // for the workload on the target, by anyone (0 with trials == 0)
  // Why `config`: the RecordKey of each valid record of it (oldest first) and
  // how many distinct schedules had valid records when it was chosen. Empty
  // and 0 for the heuristic default (no valid record).
  std::vector<std::string> record_keys;
  int schedules_ranked = 0;
};

struct TuneProgress {
  int trials_done = 0;
  int trials_total = 0;
  double best_ms = 0;
};

// Thread-safe. Jobs run on background threads owned by the tuner: a compile
// that needs a workload whose job is already in flight (started by another
// compile or resumed after a restart) waits for that job instead of starting a
// second one, and a cancelled compile leaves its job running. Destroying the
// tuner stops its job threads without finishing their jobs, which stay
// "running" in the database for the next server to resume.
class Tuner {
 public:
  struct Options {
    // How long a compile waits for a worker of its target before failing.
    std::chrono::milliseconds worker_wait{30000};
  };
  Tuner(tuningdb::TuningDb* db, TaskBroker* broker, Options options)
      : db_(db), broker_(broker), options_(options), models_(db) {}

  // The broker whose workers measure for it.
  const TaskBroker* broker() const { return broker_; }
  ~Tuner();
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  // Makes sure the workload has `trials` measured schedules on the target (or
  // its whole space, when smaller), then answers with the best. trials == 0:
  // no search; the best record if one exists, else the heuristic default.
  // `strategy` names the search strategy ("" = kDefaultSearchStrategy).
  // `target_key` is the record target key (RecordTargetKey): its records, and
  // the threads its candidates are measured on.
  //
  // A compile that `cancelled` ends leaves its job running (its records serve
  // the next compile). `pay_after_leaving` (optional) is then charged each
  // trial the job measures while no compile waits on it: the last compile to
  // leave pays for what it started (AdmissionControl::Charge), until another
  // compile joins the job and follows it through its own progress.
  using TrialPayer = std::function<void(int64_t trials)>;
  absl::StatusOr<TuneOutcome> Tune(const Workload& workload, const std::string& target_key, const Target& target,
                                   int trials, const std::string& strategy,
                                   const std::function<void(const TuneProgress&)>& on_progress,
                                   const std::function<bool()>& cancelled, TrialPayer pay_after_leaving = nullptr);

  // Starts, in the background, every job the database lists as running that
  // this tuner does not run yet: their unmeasured candidates go to the broker
  // (they wait there for a worker of their target). Returns how many started.
  absl::StatusOr<int> ResumeUnfinishedJobs();

  // Jobs running in this process now.
  int active_jobs() const;
  bool IsActive(int64_t job_id) const;

  // Ends a running job as cancelled with `message`: the compiles waiting on
  // it fail with CANCELLED and the message; measurements already recorded
  // stay; tasks it queued are still measured, their results dropped. The next
  // compile of the workload starts a new job. NOT_FOUND: no such job;
  // FAILED_PRECONDITION: it has ended already.
  absl::Status CancelJob(int64_t job_id, const std::string& message);

  // Candidates a round of a job asks the farm for: twice the live workers of
  // the target (so that none waits while the next round is chosen), at least 4.
  int RoundSize(const std::string& target_key) const;
  // Registered workers that serve the record target key now (its target, and
  // at least its threads per measurement).
  int LiveWorkers(const std::string& target_key) const;

  CostModelStore& cost_models() { return models_; }

  // The CPU a (record) target key names: the server's own, or a live worker's.
  std::optional<Target> ResolveTarget(const std::string& record_key) const;

  // Warm start: the workload's best configs on sibling targets
  // (TuningDb::SiblingTargets), kSeedsPerSibling of each, merged rank by rank;
  // every round of a job gets them as seeds (SearchInput::seeds).
  static constexpr int kSeedsPerSibling = 4;
  std::vector<ScheduleConfig> SiblingSeeds(const std::string& workload_key, const std::string& target_key);

  // Before a job ends, its leader (and a runner-up within kConfirmMargin of
  // it) is measured again, up to kConfirmPasses times, until measured twice,
  // so that one lucky measurement does not crown a kernel: the winner is the
  // config with the best mean of its medians (TuningDb::ConfigStats).
  // Re-measurements are records, not trials.
  static constexpr int kConfirmPasses = 3;
  static constexpr double kConfirmMargin = 0.10;

 private:
  struct ActiveJob {
    tuningdb::TuningJob job;
    std::mutex mu;
    std::condition_variable cv;
    bool finished = false;
    std::atomic<bool> cancelled{false};  // CancelJob: stop measuring
    std::string cancel_message;          // under mu
    absl::Status status;  // when finished
    TuneOutcome outcome;  // when finished with OK
    TuneProgress progress;  // trials of this job: done, and planned to reach its goal
    absl::Status record_error;  // the database refused a result: the job stops (its thread only)
    int waiters = 0;            // under mu: compiles in WaitForJob
    TrialPayer left_by;         // under mu: the last compile to leave unfinished; charged while waiters == 0
  };

  // Requires mu_. Registers the job and starts its thread.
  std::shared_ptr<ActiveJob> StartJobLocked(tuningdb::TuningJob job);
  void RunJob(const std::shared_ptr<ActiveJob>& active);
  // Measures the job's leader again (see kConfirmPasses). False when the
  // tuner stopped meanwhile.
  bool ConfirmWinner(const std::shared_ptr<ActiveJob>& active);
  // The live workers of `target_key` that measure another schedule space
  // version than this build's ("w1-... measures version 2019, ..."), for the
  // error of a compile that found no worker; empty when there are none.
  std::string OtherSpaceWorkers(const std::string& target_key) const;
  // Proposes and appends the job's next round; false when there is none (the
  // goal is reached, the space is spent, or the job cannot grow).
  bool NextRound(const std::shared_ptr<ActiveJob>& active);
  // What the cost model expects of each config (NaN for all when it has no
  // model yet), whichever strategy proposed them: stored with the candidates
  // for reports of predicted against measured.
  std::vector<double> Predict(const std::string& workload_key, const Graph& workload, const std::string& target_key,
                              const Target& target, const std::vector<ScheduleConfig>& configs);
  // Measures the job's unmeasured candidates, recording each result. Returns
  // false when the tuner stopped before the job was done.
  bool MeasureCandidates(const std::shared_ptr<ActiveJob>& active, std::string* first_error);
  absl::StatusOr<TuneOutcome> WaitForJob(const std::shared_ptr<ActiveJob>& active,
                                         const std::function<void(const TuneProgress&)>& on_progress,
                                         const std::function<bool()>& cancelled, const TrialPayer& pay_after_leaving);

  tuningdb::TuningDb* db_;
  TaskBroker* broker_;
  Options options_;
  CostModelStore models_;

  mutable std::mutex mu_;
  // In flight in this process, by JobKey (workload, target, space version).
  std::map<std::string, std::shared_ptr<ActiveJob>> active_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
};

}  // namespace kiln::server
