// Lease bookkeeping for the tuning farm.
#include "server/task_broker.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "server/farm_target.h"

namespace kiln::server {

TaskBroker::TaskBroker(Options options, ServerMetrics* metrics) : options_(options), metrics_(metrics) {
  std::random_device random;
  incarnation_ = absl::StrCat(absl::Hex(random(), absl::kZeroPad8));
  reaper_ = std::thread([this] { ReaperLoop(); });
}

TaskBroker::~TaskBroker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [id, task] : tasks_) {
      TaskOutcome o;
      o.result.set_task_id(id);
      o.result.set_error(kiln::v1::TIMEOUT);
      o.result.set_error_message("server shutting down");
      task.promise.set_value(o);
    }
    tasks_.clear();
    for (auto& [id, w] : workers_) w.wake->notify_all();
  }
  reaper_cv_.notify_all();
  reaper_.join();
}

std::string TaskBroker::RegisterWorker(const std::string& target_key, const std::string& hostname,
                                       const kiln::v1::DeviceInfo& device) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string id = absl::StrCat("w", next_worker_++, "-", incarnation_, "-", hostname);
  Worker w;
  w.view.id = id;
  w.view.target_key = target_key;
  w.view.hostname = hostname;
  w.view.device = device;
  w.last_seen = Clock::now();
  workers_[id] = std::move(w);
  LogInfo("worker registered",
          {{"worker", id}, {"target", target_key}, {"space_version", absl::StrCat(device.space_version())}});
  return id;
}

bool TaskBroker::Heartbeat(const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return false;
  it->second.last_seen = Clock::now();
  return true;
}

std::vector<kiln::v1::MeasureTask> TaskBroker::Lease(const std::string& worker_id, int max_tasks,
                                                     std::chrono::milliseconds wait, bool* draining) {
  std::unique_lock<std::mutex> lock(mu_);
  auto deadline = Clock::now() + wait;
  std::vector<kiln::v1::MeasureTask> out;
  if (draining != nullptr) *draining = false;
  if (!workers_.count(worker_id)) return out;
  workers_[worker_id].polling++;
  while (!stopping_) {
    auto wit = workers_.find(worker_id);
    if (wit == workers_.end()) return out;
    if (wit->second.view.draining) break;  // nothing more for it
    wit->second.last_seen = Clock::now();
    const int worker_space = wit->second.view.device.space_version();
    // The worker's target measured on one thread, then on every thread count
    // it may use.
    const int measure_threads = MeasureThreadsOf(wit->second.view.device);
    for (int threads = 1; threads <= measure_threads; ++threads) {
      auto& queue = queues_[RecordTargetKey(wit->second.view.target_key, threads)];
      for (auto qit = queue.begin(); qit != queue.end() && static_cast<int>(out.size()) < std::max(1, max_tasks);) {
        auto tit = tasks_.find(*qit);
        if (tit == tasks_.end()) {
          qit = queue.erase(qit);
          continue;
        }
        // A worker measures only tasks of its own schedule-space version (0:
        // any), and not a task that avoids it while another worker could.
        if ((worker_space != 0 && tit->second.proto.space_version() != worker_space) ||
            !MayLeaseLocked(tit->second, worker_id, wit->second)) {
          ++qit;
          continue;
        }
        qit = queue.erase(qit);
        Task& t = tit->second;
        t.worker_id = worker_id;
        t.attempts++;
        t.leased_at = Clock::now();
        t.lease_deadline = t.leased_at + options_.task_timeout;
        t.proto.set_deadline_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::system_clock::now().time_since_epoch() +
                                         options_.task_timeout)
                                         .count());
        wit->second.view.leased_tasks++;
        out.push_back(t.proto);
      }
    }
    if (!out.empty() || Clock::now() >= deadline) break;
    wit->second.woken = false;
    std::shared_ptr<std::condition_variable> wake = wit->second.wake;  // the worker may be dropped meanwhile
    wake->wait_until(lock, deadline);
  }
  auto wit = workers_.find(worker_id);
  if (wit != workers_.end()) {
    wit->second.polling--;
    wit->second.last_seen = Clock::now();
    if (wit->second.view.draining && out.empty()) {
      if (draining != nullptr) *draining = true;
      if (wit->second.view.leased_tasks == 0 && wit->second.polling == 0) {
        LogInfo("drained worker stopped", {{"worker", worker_id}});
        workers_.erase(wit);
      }
    }
  }
  return out;
}

std::pair<int, int> TaskBroker::Report(const std::string& worker_id,
                                       const std::vector<kiln::v1::MeasureResult>& results) {
  std::lock_guard<std::mutex> lock(mu_);
  int accepted = 0, rejected = 0;
  auto wit = workers_.find(worker_id);
  if (wit != workers_.end()) wit->second.last_seen = Clock::now();
  for (const auto& r : results) {
    auto it = tasks_.find(r.task_id());
    if (it == tasks_.end() || it->second.worker_id != worker_id || wit == workers_.end()) {
      ++rejected;
      continue;
    }
    wit->second.view.leased_tasks--;
    if (metrics_ != nullptr) {
      const double lease_seconds = std::chrono::duration<double>(Clock::now() - it->second.leased_at).count();
      metrics_->ResultAccepted(wit->second.view.hostname, wit->second.view.device.device_model(), r.error(),
                               lease_seconds);
    }
    FinishLocked(r.task_id(), TaskOutcome{r, worker_id});
    ++accepted;
  }
  return {accepted, rejected};
}

std::shared_future<TaskOutcome> TaskBroker::Submit(const std::string& target_key, kiln::v1::MeasureTask task,
                                                   std::set<std::string> avoid) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string dedup = absl::StrCat(target_key, "|", task.workload_key(), "|", task.space_version(),
                                   "|", task.schedule_config());
  auto dit = by_dedup_key_.find(dedup);
  if (dit != by_dedup_key_.end()) return tasks_.at(dit->second).future;
  std::string id = absl::StrCat("t", next_task_++);
  task.set_task_id(id);
  task.set_threads(ParseRecordTargetKey(target_key).threads);
  Task t;
  t.proto = std::move(task);
  t.target_key = target_key;
  t.queued_at = Clock::now();
  t.dedup_key = dedup;
  t.avoid = std::move(avoid);
  t.future = t.promise.get_future().share();
  auto future = t.future;
  tasks_.emplace(id, std::move(t));
  by_dedup_key_[dedup] = id;
  queues_[target_key].push_back(id);
  if (metrics_ != nullptr) metrics_->TaskSubmitted();
  WakeOneLocked(tasks_.at(id));
  return future;
}

std::optional<int> TaskBroker::Drain(const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return std::nullopt;
  if (!it->second.view.draining) {
    it->second.view.draining = true;
    LogInfo("draining worker", {{"worker", worker_id}, {"leased_tasks", absl::StrCat(it->second.view.leased_tasks)}});
  }
  it->second.wake->notify_all();  // its waiting Lease returns now
  return it->second.view.leased_tasks;
}

bool TaskBroker::HasLiveWorker(const std::string& target_key, int space_version) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, w] : workers_) {
    if (w.view.draining) continue;
    const int worker_space = w.view.device.space_version();
    if (WorkerServes(w.view.target_key, MeasureThreadsOf(w.view.device), target_key) &&
        (space_version == 0 || worker_space == 0 || worker_space == space_version)) {
      return true;
    }
  }
  return false;
}

std::vector<WorkerView> TaskBroker::Workers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<WorkerView> out;
  for (const auto& [id, w] : workers_) out.push_back(w.view);
  return out;
}

int64_t TaskBroker::pending_tasks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(tasks_.size());
}

TaskBroker::FarmState TaskBroker::State() const {
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = Clock::now();
  auto seconds_since = [now](Clock::time_point t) { return std::chrono::duration<double>(now - t).count(); };
  FarmState state;
  for (const auto& [key, queue] : queues_) state.queues[key];
  for (const auto& [id, t] : tasks_) {
    QueueState& q = state.queues[t.target_key];
    if (t.worker_id.empty()) {
      ++q.queued;
      q.oldest_queued_seconds = std::max(q.oldest_queued_seconds, seconds_since(t.queued_at));
    } else {
      ++q.leased;
      q.oldest_lease_seconds = std::max(q.oldest_lease_seconds, seconds_since(t.leased_at));
    }
  }
  for (const auto& [id, w] : workers_) {
    // A worker long-polling for a lease is alive, however long ago it was last seen.
    state.workers.push_back({w.view, w.polling > 0 ? 0.0 : seconds_since(w.last_seen)});
  }
  return state;
}

void TaskBroker::FinishLocked(const std::string& task_id, TaskOutcome outcome) {
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return;
  outcome.result.set_task_id(task_id);
  by_dedup_key_.erase(it->second.dedup_key);
  it->second.promise.set_value(std::move(outcome));
  tasks_.erase(it);
}

void TaskBroker::RequeueLocked(const std::string& task_id, LeaseLoss reason, const std::string& why) {
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return;
  Task& t = it->second;
  LogWarn("lease lost", {{"task", task_id}, {"worker", t.worker_id}, {"why", why}});
  if (metrics_ != nullptr) metrics_->LeaseLost(reason);
  t.worker_id.clear();
  if (t.attempts >= options_.max_attempts) {
    if (metrics_ != nullptr) metrics_->TaskAbandoned();
    TaskOutcome o;
    o.result.set_error(kiln::v1::TIMEOUT);
    o.result.set_error_message(absl::StrCat("lost its lease ", t.attempts, " times; last: ", why));
    FinishLocked(task_id, std::move(o));
    return;
  }
  t.queued_at = Clock::now();
  queues_[t.target_key].push_front(task_id);
  WakeOneLocked(t);
}

bool TaskBroker::ServesLocked(const Task& task, const Worker& w) const {
  if (w.view.draining) return false;
  const int worker_space = w.view.device.space_version();
  if (worker_space != 0 && worker_space != task.proto.space_version()) return false;
  return WorkerServes(w.view.target_key, MeasureThreadsOf(w.view.device), task.target_key);
}

bool TaskBroker::MayLeaseLocked(const Task& task, const std::string& id, const Worker& w) const {
  if (task.avoid.count(id) == 0) return true;
  for (const auto& [other_id, other] : workers_) {
    if (task.avoid.count(other_id) == 0 && ServesLocked(task, other)) return false;
  }
  return ServesLocked(task, w);
}

void TaskBroker::WakeOneLocked(const Task& task) {
  for (auto& [id, w] : workers_) {
    if (w.polling == 0 || w.woken || !ServesLocked(task, w) || !MayLeaseLocked(task, id, w)) continue;
    w.woken = true;
    w.wake->notify_one();
    return;
  }
}

void TaskBroker::ReaperLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    reaper_cv_.wait_for(lock, std::chrono::milliseconds(200));
    if (stopping_) break;
    auto now = Clock::now();
    std::vector<std::string> dead;
    for (const auto& [id, w] : workers_) {
      if (w.polling == 0 && now - w.last_seen > options_.worker_timeout) dead.push_back(id);
    }
    for (const std::string& id : dead) {
      LogWarn("worker expired", {{"worker", id}});
      workers_.erase(id);
    }
    struct Lost {
      std::string task_id;
      LeaseLoss reason;
      std::string why;
    };
    std::vector<Lost> lost;
    for (const auto& [tid, t] : tasks_) {
      if (t.worker_id.empty()) continue;
      if (!workers_.count(t.worker_id)) {
        lost.push_back({tid, LeaseLoss::kWorkerSilent, absl::StrCat("worker ", t.worker_id, " went silent")});
      } else if (now > t.lease_deadline) {
        lost.push_back({tid, LeaseLoss::kDeadline, "lease deadline passed"});
      }
    }
    for (const Lost& l : lost) RequeueLocked(l.task_id, l.reason, l.why);
  }
}

}  // namespace kiln::server
