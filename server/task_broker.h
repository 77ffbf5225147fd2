// The tuning farm's lease manager: measurement tasks wait in a queue per
// target, workers lease them with a deadline, a worker that goes silent loses
// its leases and the tasks go back to the queue to be measured elsewhere.
// Identical in-flight tasks (same target, workload, schedule, space version)
// are measured once; results count only from the worker holding the task.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kiln/v1/worker.pb.h"
#include "server/metrics.h"

namespace kiln::server {

struct TaskOutcome {
  kiln::v1::MeasureResult result;
  std::string worker_id;  // who measured it ("" when the broker gave up)
};

struct WorkerView {
  std::string id;
  std::string target_key;
  std::string hostname;
  kiln::v1::DeviceInfo device;
  int leased_tasks = 0;
  bool draining = false;  // Drain(): no new tasks; it stops once it holds none
};

class TaskBroker {
 public:
  struct Options {
    std::chrono::milliseconds heartbeat_interval{1000};
    // A worker silent this long is dropped and its leases are re-queued.
    std::chrono::milliseconds worker_timeout{10000};
    // A lease not reported within this long is re-queued even if the worker beats.
    std::chrono::milliseconds task_timeout{120000};
    int max_attempts = 3;
  };
  // `metrics`, when given, counts submissions, results, lost leases and
  // abandoned tasks; it must outlive the broker.
  explicit TaskBroker(Options options, ServerMetrics* metrics = nullptr);
  ~TaskBroker();

  // Returns the new worker's id, "w<N>-<incarnation>-<hostname>": unique to
  // this broker, and unlike any an earlier broker gave (a worker still holding
  // one learns from Heartbeat that it must register again).
  std::string RegisterWorker(const std::string& target_key, const std::string& hostname,
                             const kiln::v1::DeviceInfo& device);
  // false when the worker is unknown (expired or never registered).
  bool Heartbeat(const std::string& worker_id);
  // Blocks up to `wait` for work for the worker's target. Unknown worker:
  // empty. A draining worker gets nothing, at once, and *draining is set; once
  // it holds no task it is forgotten (it stops).
  std::vector<kiln::v1::MeasureTask> Lease(const std::string& worker_id, int max_tasks,
                                           std::chrono::milliseconds wait, bool* draining = nullptr);
  // Drains a worker (AdminService.DrainWorker): it leases nothing more, and
  // compiles no longer count it as a live worker of its target. Returns the
  // tasks it still holds; nullopt when the worker is unknown.
  std::optional<int> Drain(const std::string& worker_id);
  // Returns {accepted, rejected}.
  std::pair<int, int> Report(const std::string& worker_id,
                             const std::vector<kiln::v1::MeasureResult>& results);

  // Queues a task for `target_key`, a record target key (RecordTargetKey):
  // task_id, threads (from the key) and deadline are set by the broker. A
  // worker leases it when its target is the key's and it may measure on as
  // many threads (WorkerServes). A worker in `avoid` leases it only while no
  // other live worker could: a re-measurement goes to another worker than
  // the ones that measured it before, so that one worker cannot crown a
  // kernel alone (a worker with the worker role could report any time).
  std::shared_future<TaskOutcome> Submit(const std::string& target_key, kiln::v1::MeasureTask task,
                                         std::set<std::string> avoid = {});

  // A registered worker that serves the record target key and measures
  // `space_version` (workers that report no version count for every version),
  // and is not draining.
  bool HasLiveWorker(const std::string& target_key, int space_version = 0) const;
  std::vector<WorkerView> Workers() const;
  const Options& options() const { return options_; }
  int64_t pending_tasks() const;

  // The farm now, for the gauges sampled at scrape time.
  struct QueueState {
    int64_t queued = 0, leased = 0;
    double oldest_queued_seconds = 0, oldest_lease_seconds = 0;  // 0 when none
  };
  struct WorkerState {
    WorkerView view;
    double silent_seconds = 0;  // since its last heartbeat, lease or report
  };
  struct FarmState {
    std::map<std::string, QueueState> queues;  // by record target key: every key ever queued
    std::vector<WorkerState> workers;
  };
  FarmState State() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Task {
    kiln::v1::MeasureTask proto;
    std::string target_key;
    std::string dedup_key;
    std::string worker_id;  // holder, "" while pending
    Clock::time_point lease_deadline;
    Clock::time_point queued_at, leased_at;
    int attempts = 0;
    std::set<std::string> avoid;  // workers that lease it only when no other can
    std::promise<TaskOutcome> promise;
    std::shared_future<TaskOutcome> future;
  };
  struct Worker {
    WorkerView view;
    Clock::time_point last_seen;
    int polling = 0;  // Lease calls in progress: a long-polling worker is alive
    // Its waiting Lease calls wait here; a new task wakes one waiting worker
    // that can measure it (WakeOneLocked), not every worker of the farm.
    std::shared_ptr<std::condition_variable> wake = std::make_shared<std::condition_variable>();
    bool woken = false;  // a wake is on its way: the next task wakes another
  };

  void ReaperLoop();
  // Requires mu_. Puts a leased task back in its queue or fails it after max_attempts.
  void RequeueLocked(const std::string& task_id, LeaseLoss reason, const std::string& why);
  void FinishLocked(const std::string& task_id, TaskOutcome outcome);
  // Requires mu_. Wakes one worker waiting in Lease that serves the queued
  // task's target and schedule-space version (none waiting: the next Lease
  // finds the task before it waits).
  void WakeOneLocked(const Task& task);
  // Requires mu_. Whether worker `w` (id `id`) can measure `task`: its target
  // and space version, and not avoided while another live worker could.
  bool MayLeaseLocked(const Task& task, const std::string& id, const Worker& w) const;
  bool ServesLocked(const Task& task, const Worker& w) const;

  Options options_;
  ServerMetrics* metrics_;
  mutable std::mutex mu_;
  std::condition_variable reaper_cv_;
  bool stopping_ = false;
  int64_t next_worker_ = 1;
  // Random, one per broker (per server start): a worker id from an earlier
  // server is never given to another worker by a restarted one.
  std::string incarnation_;
  int64_t next_task_ = 1;
  std::map<std::string, Worker> workers_;
  std::map<std::string, Task> tasks_;                     // in flight (pending or leased)
  std::map<std::string, std::deque<std::string>> queues_;  // target -> pending task ids
  std::map<std::string, std::string> by_dedup_key_;        // dedup key -> task id
  std::thread reaper_;
};

}  // namespace kiln::server
