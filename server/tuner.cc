// Tuning jobs: database lookup, candidate choice, persistent jobs measured by
// the farm, a record per measurement as it arrives, resume after a restart.
#include "server/tuner.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "compiler_core/driver/version.h"
#include "compiler_core/frontend/graph_proto.h"
#include "server/farm_target.h"

namespace kiln::server {
namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

tuningdb::RecordError ToRecordError(kiln::v1::MeasureError e) {
  switch (e) {
    case kiln::v1::MEASURE_OK: return tuningdb::RecordError::kOk;
    case kiln::v1::BUILD_ERROR: return tuningdb::RecordError::kBuildError;
    case kiln::v1::WRONG_ANSWER: return tuningdb::RecordError::kWrongAnswer;
    case kiln::v1::TIMEOUT: return tuningdb::RecordError::kTimeout;
    default: return tuningdb::RecordError::kRuntimeError;
  }
}

std::string JobKey(const std::string& workload_key, const std::string& target_key, int space_version) {
  return absl::StrCat(workload_key, "|", target_key, "|", space_version);
}

// What every candidate's measurement task shares (all but schedule_config).
kiln::v1::MeasureTask TaskTemplate(const Workload& workload) {
  kiln::v1::MeasureTask base;
  base.set_workload_key(workload.key);
  GraphToProto(*workload.graph, base.mutable_workload());
  base.set_space_version(kScheduleSpaceVersion);
  base.mutable_options()->set_warmup_runs(2);
  base.mutable_options()->set_min_repeats(5);
  base.mutable_options()->set_min_time_ms(10);
  base.mutable_options()->set_rtol(1e-4);
  base.mutable_options()->set_atol(1e-5);
  base.mutable_options()->set_flush_cache(false);
  return base;
}

tuningdb::Record RecordOf(const tuningdb::TuningJob& job, const std::string& config, const TaskOutcome& o) {
  tuningdb::Record r;
  r.workload_key = job.workload_key;
  r.target_key = job.target_key;
  r.space_version = job.space_version;
  r.compiler_version = kCompilerVersion;
  r.config = config;
  r.median_ms = o.result.median_ms();
  r.p10_ms = o.result.p10_ms();
  r.p90_ms = o.result.p90_ms();
  r.repeats = o.result.repeats();
  r.error = ToRecordError(o.result.error());
  r.error_message = o.result.error_message();
  r.worker_id = o.worker_id;
  r.created_unix_ms = NowUnixMs();
  return r;
}

int MeasuredCount(const tuningdb::TuningJob& job) {
  return static_cast<int>(std::count_if(job.candidates.begin(), job.candidates.end(),
                                        [](const tuningdb::JobCandidate& c) { return c.measured(); }));
}

}  // namespace

Tuner::~Tuner() {
  stopping_ = true;
  while (true) {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    if (threads.empty()) break;
    for (std::thread& t : threads) t.join();
  }
}

int Tuner::active_jobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(active_.size());
}

bool Tuner::IsActive(int64_t job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, active] : active_) {
    if (active->job.id == job_id) return true;
  }
  return false;
}

absl::Status Tuner::CancelJob(int64_t job_id, const std::string& message) {
  ASSIGN_OR_RETURN(std::optional<tuningdb::TuningJob> job, db_->GetJob(job_id));
  if (!job) return absl::NotFoundError(absl::StrCat("no tuning job ", job_id));
  if (job->state != tuningdb::JobState::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("tuning job ", job_id, " has ended already (", std::string(tuningdb::JobStateName(job->state)), ")"));
  }
  // The database first: a job that ends meanwhile keeps its own end.
  if (absl::Status s = db_->FinishJob(job_id, tuningdb::JobState::kCancelled, message); !s.ok()) {
    if (s.code() == absl::StatusCode::kFailedPrecondition) {
      return absl::FailedPreconditionError(absl::StrCat("tuning job ", job_id, " has ended already"));
    }
    return s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, active] : active_) {
    if (active->job.id != job_id) continue;
    {
      std::lock_guard<std::mutex> job_lock(active->mu);
      active->cancel_message = message;
    }
    active->cancelled = true;
  }
  return absl::OkStatus();
}

int Tuner::LiveWorkers(const std::string& target_key) const {
  int workers = 0;
  for (const WorkerView& w : broker_->Workers()) {
    workers += !w.draining && WorkerServes(w.target_key, MeasureThreadsOf(w.device), target_key) ? 1 : 0;
  }
  return workers;
}

int Tuner::RoundSize(const std::string& target_key) const { return std::max(4, 2 * LiveWorkers(target_key)); }

std::optional<Target> Tuner::ResolveTarget(const std::string& record_key) const {
  const std::string target_key = ParseRecordTargetKey(record_key).target_key;
  if (std::optional<GpuTarget> gpu = GpuTargetOfKey(target_key)) return Target(*gpu);
  CpuTarget host = HostFarmTarget();
  if (host.Key() == target_key) return host;
  for (const WorkerView& w : broker_->Workers()) {
    if (w.target_key == target_key) return FarmTargetOf(w.device);
  }
  return std::nullopt;
}

absl::StatusOr<TuneOutcome> Tuner::Tune(const Workload& workload, const std::string& target_key,
                                        const Target& target, int trials, const std::string& strategy_name,
                                        const std::function<void(const TuneProgress&)>& on_progress,
                                        const std::function<bool()>& cancelled, TrialPayer pay_after_leaving) {
  const std::string strategy = strategy_name.empty() ? kDefaultSearchStrategy : strategy_name;
  ASSIGN_OR_RETURN(std::unique_ptr<SearchStrategy> search, MakeSearchStrategy(strategy, &models_));
  tuningdb::WorkloadInfo info;
  info.key = workload.key;
  info.canonical_text = workload.canonical_text;
  info.kind = workload.kind;
  info.op_summary = workload.op_summary;
  info.flops = workload.flops;
  info.bytes = workload.bytes;
  kiln::v1::Graph graph_proto;
  GraphToProto(*workload.graph, &graph_proto);
  info.graph = graph_proto.SerializeAsString();
  if (absl::Status s = db_->UpsertWorkload(info); !s.ok()) return s;

  // The best record of the database, when it has one.
  auto recorded = [&]() -> absl::StatusOr<std::optional<TuneOutcome>> {
    auto best = db_->ConfigStats(workload.key, target_key, kScheduleSpaceVersion, 1);
    if (!best.ok()) return best.status();
    if (best->empty()) return std::nullopt;
    auto config = ScheduleConfig::Parse(best->front().config);
    if (config.ok()) {
      ASSIGN_OR_RETURN(tuningdb::TuningDb::ConfigEvidence evidence,
                       db_->Evidence(workload.key, target_key, kScheduleSpaceVersion, best->front().config));
      TuneOutcome hit{*config, best->front().mean_ms, /*from_database=*/true, 0};
      hit.record_keys = std::move(evidence.record_keys);
      hit.schedules_ranked = evidence.configs_ranked;
      return hit;
    }
    LogWarn("unparseable record ignored", {{"workload", workload.key}, {"config", best->front().config}});
    return std::nullopt;
  };
  if (trials <= 0) {
    ASSIGN_OR_RETURN(std::optional<TuneOutcome> hit, recorded());
    if (hit) return *hit;
    return TuneOutcome{DefaultSchedule(*workload.graph, target), 0, false, 0};
  }
  const std::vector<ScheduleConfig> space = EnumerateSchedules(*workload.graph, target);
  const int goal = std::min<int>(trials, static_cast<int>(space.size()));
  // The answer once the workload has `goal` measured schedules: the best
  // record, or why there is none. nullopt: more must be measured.
  auto settled = [&](bool goal_or_spent) -> absl::StatusOr<std::optional<TuneOutcome>> {
    ASSIGN_OR_RETURN(std::vector<std::string> measured,
                     db_->MeasuredConfigs(workload.key, target_key, kScheduleSpaceVersion));
    if (static_cast<int>(measured.size()) < goal && !goal_or_spent) return std::nullopt;
    ASSIGN_OR_RETURN(std::optional<TuneOutcome> hit, recorded());
    if (hit) hit->schedules_measured = static_cast<int>(measured.size());
    if (hit) return hit;
    ASSIGN_OR_RETURN(std::string why, db_->ExplainMiss(workload.key, target_key, kScheduleSpaceVersion));
    return absl::InternalError(absl::StrCat("every measured schedule of workload ", workload.key.substr(0, 12),
                                            " failed: ", why));
  };

  int trials_measured = 0;
  while (true) {
    {
      ASSIGN_OR_RETURN(std::optional<TuneOutcome> done, settled(false));
      if (done) {
        done->trials_measured = trials_measured;
        return *done;
      }
    }
    // Wait for a worker that measures this target.
    auto wait_until = std::chrono::steady_clock::now() + options_.worker_wait;
    while (!broker_->HasLiveWorker(target_key, kScheduleSpaceVersion)) {
      if (cancelled()) return absl::CancelledError("compile cancelled");
      if (std::chrono::steady_clock::now() > wait_until) {
        if (std::string others = OtherSpaceWorkers(target_key); !others.empty()) {
          return absl::UnavailableError(absl::StrCat(
              "no worker measures target ", target_key, " at schedule space version ", kScheduleSpaceVersion,
              ": worker ", others, "; run workers of this server's Kiln build (docs/operations.md, "
              "\"Across schedule-space versions\")"));
        }
        const int threads = ParseRecordTargetKey(target_key).threads;
        return absl::UnavailableError(absl::StrCat(
            "no worker measures target ", target_key, "; start `kiln-worker --server ... --device cpu",
            threads > 1 ? absl::StrCat(" --threads ", threads) : "", "` on a ",
            "matching host, or pass --trials 0 to use untuned default schedules"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }

    // The first round of a new job, chosen outside the tuner's lock (the cost
    // model may retrain meanwhile).
    std::vector<std::string> candidates;
    std::vector<double> predicted;  // for each candidate
    {
      ASSIGN_OR_RETURN(std::vector<std::string> measured,
                       db_->MeasuredConfigs(workload.key, target_key, kScheduleSpaceVersion));
      SearchInput in;
      in.workload_key = workload.key;
      in.workload = workload.graph.get();
      in.target_key = target_key;
      in.target = target;
      in.space_version = kScheduleSpaceVersion;
      in.space = space;
      in.default_config = DefaultSchedule(*workload.graph, target);
      in.measured = std::set<std::string>(measured.begin(), measured.end());
      in.seeds = SiblingSeeds(workload.key, target_key);
      const int round = std::min(RoundSize(target_key), goal - static_cast<int>(measured.size()));
      const std::vector<ScheduleConfig> proposed = search->Propose(in, round);
      for (const ScheduleConfig& c : proposed) candidates.push_back(c.ToString());
      predicted = Predict(workload.key, *workload.graph, target_key, target, proposed);
    }

    // Join the job in flight for this workload, or begin one with this goal.
    std::shared_ptr<ActiveJob> active;
    bool ours = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = active_.find(JobKey(workload.key, target_key, kScheduleSpaceVersion));
      if (it != active_.end()) {
        active = it->second;
      } else {
        // A job for this workload may have finished (and left active_) since
        // the check above: its records may answer.
        ASSIGN_OR_RETURN(std::optional<TuneOutcome> done, settled(false));
        if (done) {
          done->trials_measured = trials_measured;
          return *done;
        }
        // Nor measured since they were proposed.
        ASSIGN_OR_RETURN(std::vector<std::string> measured,
                         db_->MeasuredConfigs(workload.key, target_key, kScheduleSpaceVersion));
        const std::set<std::string> now_measured(measured.begin(), measured.end());
        size_t kept = 0;
        for (size_t i = 0; i < candidates.size(); ++i) {
          if (now_measured.count(candidates[i])) continue;
          candidates[kept] = candidates[i];
          predicted[kept++] = predicted[i];
        }
        candidates.resize(kept);
        predicted.resize(kept);
        if (candidates.empty()) {
          // Measured schedules outside today's space count for nothing here.
          ASSIGN_OR_RETURN(std::optional<TuneOutcome> hit, settled(true));
          if (hit) {
            hit->trials_measured = trials_measured;
            return *hit;
          }
          return absl::InternalError(absl::StrCat("no schedule of workload ", workload.key.substr(0, 12),
                                                  " is left to measure and none measured succeeded"));
        }
        auto begun = db_->BeginJob(workload.key, target_key, kScheduleSpaceVersion,
                                   TaskTemplate(workload).SerializeAsString(), candidates, goal, strategy,
                                   predicted);
        if (!begun.ok()) return begun.status();
        if (!begun->created) {
          LogInfo("joining a tuning job the database lists as running",
                  {{"job", absl::StrCat(begun->job.id)}, {"workload", workload.key}});
        }
        ours = begun->created;
        active = StartJobLocked(std::move(begun->job));
      }
    }
    ASSIGN_OR_RETURN(TuneOutcome outcome, WaitForJob(active, on_progress, cancelled, pay_after_leaving));
    trials_measured += outcome.trials_measured;
    if (ours) {
      // Our goal is met, or the strategy found nothing more to propose.
      ASSIGN_OR_RETURN(std::optional<TuneOutcome> done, settled(true));
      if (done) outcome = *done;
      outcome.trials_measured = trials_measured;
      outcome.from_database = false;
      return outcome;
    }
    // Another compile's job, whose goal may be below ours: check again.
  }
}

std::vector<ScheduleConfig> Tuner::SiblingSeeds(const std::string& workload_key, const std::string& target_key) {
  auto siblings = db_->SiblingTargets(target_key);
  if (!siblings.ok()) return {};
  // Each sibling's best configs, merged rank by rank.
  std::vector<std::vector<std::string>> ranked;
  for (const std::string& sibling : *siblings) {
    auto stats = db_->ConfigStats(workload_key, sibling, kScheduleSpaceVersion, kSeedsPerSibling);
    if (!stats.ok() || stats->empty()) continue;
    ranked.emplace_back();
    for (const auto& s : *stats) ranked.back().push_back(s.config);
  }
  std::vector<ScheduleConfig> seeds;
  std::set<std::string> seen;
  for (int rank = 0; rank < kSeedsPerSibling; ++rank) {
    for (const auto& configs : ranked) {
      if (rank >= static_cast<int>(configs.size()) || !seen.insert(configs[rank]).second) continue;
      if (auto c = ScheduleConfig::Parse(configs[rank]); c.ok()) seeds.push_back(*c);
    }
  }
  return seeds;
}

std::vector<double> Tuner::Predict(const std::string& workload_key, const Graph& workload,
                                   const std::string& target_key, const Target& target,
                                   const std::vector<ScheduleConfig>& configs) {
  std::vector<double> out(configs.size(), std::nan(""));
  if (configs.empty()) return out;
  if (auto scores = models_.Score(workload_key, workload, target_key, target, kScheduleSpaceVersion, configs)) {
    for (size_t i = 0; i < scores->size() && i < out.size(); ++i) out[i] = (*scores)[i];
  }
  return out;
}

absl::StatusOr<int> Tuner::ResumeUnfinishedJobs() {
  auto jobs = db_->ListJobs(tuningdb::JobState::kRunning);
  if (!jobs.ok()) return jobs.status();
  int started = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (tuningdb::TuningJob& job : *jobs) {
    if (active_.count(JobKey(job.workload_key, job.target_key, job.space_version))) continue;
    LogInfo("resuming tuning job", {{"job", absl::StrCat(job.id)},
                                    {"workload", job.workload_key},
                                    {"target", job.target_key},
                                    {"measured", absl::StrCat(MeasuredCount(job), "/", job.candidates.size())}});
    StartJobLocked(std::move(job));
    ++started;
  }
  return started;
}

std::shared_ptr<Tuner::ActiveJob> Tuner::StartJobLocked(tuningdb::TuningJob job) {
  auto active = std::make_shared<ActiveJob>();
  active->progress.trials_done = MeasuredCount(job);
  // Planned: up to the goal, less what the workload had measured before the job.
  int measured_elsewhere = 0;
  if (auto m = db_->MeasuredConfigs(job.workload_key, job.target_key, job.space_version); m.ok()) {
    measured_elsewhere = std::max(0, static_cast<int>(m->size()) - active->progress.trials_done);
  }
  active->progress.trials_total =
      std::max(static_cast<int>(job.candidates.size()), job.trials - measured_elsewhere);
  std::string key = JobKey(job.workload_key, job.target_key, job.space_version);
  active->job = std::move(job);
  active_[key] = active;
  threads_.emplace_back([this, active] { RunJob(active); });
  return active;
}

std::string Tuner::OtherSpaceWorkers(const std::string& target_key) const {
  std::string out;
  for (const WorkerView& w : broker_->Workers()) {
    const int version = w.device.space_version();
    if (w.draining || version == 0 || version == kScheduleSpaceVersion ||
        !WorkerServes(w.target_key, MeasureThreadsOf(w.device), target_key)) {
      continue;
    }
    absl::StrAppend(&out, out.empty() ? "" : ", ", w.id, " measures version ", version);
  }
  return out;
}

bool Tuner::MeasureCandidates(const std::shared_ptr<ActiveJob>& active, std::string* first_error) {
  const tuningdb::TuningJob& job = active->job;
  kiln::v1::MeasureTask base;
  if (!base.ParseFromString(job.task_template)) {
    *first_error = "its stored measurement task does not parse";
    return true;
  }
  std::vector<std::pair<int, std::shared_future<TaskOutcome>>> futures;
  for (size_t i = 0; i < job.candidates.size(); ++i) {
    if (job.candidates[i].measured()) continue;
    kiln::v1::MeasureTask t = base;
    t.set_schedule_config(job.candidates[i].config);
    futures.emplace_back(static_cast<int>(i), broker_->Submit(job.target_key, std::move(t)));
  }
  for (auto& [position, future] : futures) {
    while (future.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
      if (stopping_ || active->cancelled) return false;
    }
    const TaskOutcome& o = future.get();
    tuningdb::Record r = RecordOf(job, job.candidates[position].config, o);
    // Recorded now, not at the end: a restart loses at most the tasks in flight.
    if (absl::Status s = db_->AddJobRecord(job.id, position, r); !s.ok()) {
      LogWarn("cannot record a measurement", {{"job", absl::StrCat(job.id)}, {"error", s.ToString()}});
      // Recorded already (by another server resuming the job) is no loss. Any
      // other refusal (a full or read-only disk) stops the job with the reason;
      // it stays running in the database and resumes once it can be written.
      auto now = db_->GetJob(job.id);
      if (!now.ok() || !*now || position >= static_cast<int>((*now)->candidates.size()) ||
          !(*now)->candidates[position].measured()) {
        active->record_error = s;
        return true;
      }
    }
    if (o.result.error() != kiln::v1::MEASURE_OK && first_error->empty()) {
      *first_error = absl::StrCat(r.config, ": ", kiln::v1::MeasureError_Name(o.result.error()), " ",
                                  o.result.error_message());
    }
    TrialPayer pay;
    {
      std::lock_guard<std::mutex> lock(active->mu);
      ++active->progress.trials_done;
      if (o.result.error() == kiln::v1::MEASURE_OK &&
          (active->progress.best_ms == 0 || o.result.median_ms() < active->progress.best_ms)) {
        active->progress.best_ms = o.result.median_ms();
      }
      // No compile follows the job: the one that left it last pays.
      if (active->waiters == 0) pay = active->left_by;
      active->cv.notify_all();
    }
    if (pay) pay(1);
  }
  return true;
}

bool Tuner::NextRound(const std::shared_ptr<ActiveJob>& active) {
  tuningdb::TuningJob& job = active->job;
  // The job as the database has it now: which candidates are measured.
  if (auto fresh = db_->GetJob(job.id); fresh.ok() && *fresh) job = std::move(**fresh);
  auto measured = db_->MeasuredConfigs(job.workload_key, job.target_key, job.space_version);
  if (!measured.ok() || static_cast<int>(measured->size()) >= job.trials) return false;
  std::optional<Target> target = ResolveTarget(job.target_key);
  kiln::v1::MeasureTask base;
  if (!target || !base.ParseFromString(job.task_template)) return false;
  auto graph = GraphFromProto(base.workload());
  auto search = MakeSearchStrategy(job.strategy, &models_);
  if (!graph.ok() || !search.ok()) return false;
  SearchInput in;
  in.workload_key = job.workload_key;
  in.workload = graph->get();
  in.target_key = job.target_key;
  in.target = *target;
  in.space_version = job.space_version;
  in.space = EnumerateSchedules(**graph, *target);
  in.default_config = DefaultSchedule(**graph, *target);
  in.measured = std::set<std::string>(measured->begin(), measured->end());
  for (const tuningdb::JobCandidate& c : job.candidates) in.measured.insert(c.config);
  if (auto top = db_->TopK(job.workload_key, job.target_key, job.space_version, 64); top.ok()) {
    for (const tuningdb::Record& r : *top) {
      if (auto c = ScheduleConfig::Parse(r.config); c.ok()) in.results.emplace_back(*c, r.median_ms);
    }
  }
  in.seeds = SiblingSeeds(job.workload_key, job.target_key);
  const int round = std::min(RoundSize(job.target_key), job.trials - static_cast<int>(measured->size()));
  const std::vector<ScheduleConfig> proposed = (*search)->Propose(in, round);
  if (proposed.empty()) return false;
  // What the cost model expects of each candidate, whichever strategy chose
  // it: stored beside the candidate for reports of predicted against measured.
  const std::vector<double> predicted = Predict(job.workload_key, **graph, job.target_key, *target, proposed);
  std::vector<std::string> configs;
  for (const ScheduleConfig& c : proposed) configs.push_back(c.ToString());
  if (auto added = db_->AddJobCandidates(job.id, configs, predicted); !added.ok()) {
    LogWarn("cannot add a round to a tuning job", {{"job", absl::StrCat(job.id)}, {"error", added.status().ToString()}});
    return false;
  }
  for (size_t i = 0; i < configs.size(); ++i) {
    tuningdb::JobCandidate c{configs[i], 0, std::nullopt};
    if (std::isfinite(predicted[i])) c.predicted = predicted[i];
    job.candidates.push_back(std::move(c));
  }
  return true;
}

bool Tuner::ConfirmWinner(const std::shared_ptr<ActiveJob>& active) {
  const tuningdb::TuningJob& job = active->job;
  kiln::v1::MeasureTask base;
  if (!base.ParseFromString(job.task_template)) return true;
  for (int pass = 0; pass < kConfirmPasses; ++pass) {
    auto stats = db_->ConfigStats(job.workload_key, job.target_key, job.space_version, 2);
    if (!stats.ok() || stats->empty()) return true;
    // The leader, and a runner-up close enough to overtake it, until each has
    // been measured twice.
    std::vector<std::string> again;
    if (stats->front().count < 2) again.push_back(stats->front().config);
    if (stats->size() > 1 && (*stats)[1].count < 2 &&
        (*stats)[1].mean_ms <= stats->front().mean_ms * (1 + kConfirmMargin)) {
      again.push_back((*stats)[1].config);
    }
    if (again.empty()) return true;
    std::vector<std::pair<std::string, std::shared_future<TaskOutcome>>> futures;
    for (const std::string& config : again) {
      kiln::v1::MeasureTask t = base;
      t.set_schedule_config(config);
      // On another worker than those that measured it, where the farm has
      // one: a second opinion, not the same worker's again.
      std::set<std::string> measured_by;
      if (auto evidence = db_->Evidence(job.workload_key, job.target_key, job.space_version, config); evidence.ok()) {
        measured_by.insert(evidence->workers.begin(), evidence->workers.end());
      }
      futures.emplace_back(config, broker_->Submit(job.target_key, std::move(t), std::move(measured_by)));
    }
    for (auto& [config, future] : futures) {
      while (future.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
        if (stopping_ || active->cancelled) return false;
      }
      tuningdb::Record r = RecordOf(job, config, future.get());
      if (absl::Status s = db_->AddRecords({r}); !s.ok()) {
        LogWarn("cannot record a re-measurement", {{"job", absl::StrCat(job.id)}, {"error", s.ToString()}});
        return true;
      }
    }
  }
  return true;
}

void Tuner::RunJob(const std::shared_ptr<ActiveJob>& active) {
  const tuningdb::TuningJob& job = active->job;
  std::string first_error;
  bool done = true;
  do {
    done = MeasureCandidates(active, &first_error);
  } while (done && !stopping_ && !active->cancelled && active->record_error.ok() && NextRound(active));
  done = done && !stopping_ && !active->cancelled && (!active->record_error.ok() || ConfirmWinner(active)) &&
         !stopping_;
  absl::Status status;
  TuneOutcome outcome;
  if (active->cancelled) {  // CancelJob ended it in the database
    std::lock_guard<std::mutex> lock(active->mu);
    status = absl::CancelledError(active->cancel_message);
    LogInfo("tuning job cancelled", {{"job", absl::StrCat(job.id)}, {"message", active->cancel_message}});
  } else if (!done) {
    status = absl::UnavailableError("the server is stopping; the tuning job resumes when it restarts");
  } else if (!active->record_error.ok()) {
    status = absl::Status(active->record_error.code(), absl::StrCat("cannot record a measurement of tuning job ",
                                                                    job.id, ": ", active->record_error.message()));
    LogWarn("tuning job stopped", {{"job", absl::StrCat(job.id)}, {"error", status.ToString()}});
  } else {
    // The best config of the triple by its valid records, whichever job or
    // import made them.
    auto best = db_->ConfigStats(job.workload_key, job.target_key, job.space_version, 1);
    absl::StatusOr<ScheduleConfig> config = absl::NotFoundError("no valid record");
    if (best.ok() && !best->empty()) config = ScheduleConfig::Parse(best->front().config);
    if (!best.ok()) {
      status = best.status();
    } else if (config.ok()) {
      outcome = TuneOutcome{*config, best->front().mean_ms, false, 0};
      (void)db_->FinishJob(job.id, tuningdb::JobState::kDone,
                           absl::StrCat("best ", best->front().config, " ", best->front().mean_ms, " ms (",
                                        best->front().count, " measurements)"));
    } else {
      auto why = db_->ExplainMiss(job.workload_key, job.target_key, job.space_version);
      status = absl::InternalError(absl::StrCat(
          "every candidate schedule of workload ", job.workload_key.substr(0, 12), " failed; ",
          first_error.empty() ? (why.ok() ? *why : why.status().ToString()) : absl::StrCat("first: ", first_error)));
      (void)db_->FinishJob(job.id, tuningdb::JobState::kFailed, std::string(status.message()));
    }
    LogInfo("tuning job finished", {{"job", absl::StrCat(job.id)},
                                    {"workload", job.workload_key},
                                    {"status", status.ok() ? "done" : "failed"}});
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_.erase(JobKey(job.workload_key, job.target_key, job.space_version));
  }
  std::lock_guard<std::mutex> lock(active->mu);
  active->status = status;
  active->outcome = outcome;
  active->outcome.trials_measured = active->progress.trials_done;
  active->finished = true;
  active->cv.notify_all();
}

absl::StatusOr<TuneOutcome> Tuner::WaitForJob(const std::shared_ptr<ActiveJob>& active,
                                              const std::function<void(const TuneProgress&)>& on_progress,
                                              const std::function<bool()>& cancelled,
                                              const TrialPayer& pay_after_leaving) {
  int reported = -1;
  {
    std::lock_guard<std::mutex> lock(active->mu);
    ++active->waiters;
  }
  // Leaving: a compile cancelled while the job goes on pays for what it
  // measures next, unless another compile still follows it.
  auto leave = [&](bool cancelled_here) {
    int unreported = 0;
    {
      std::lock_guard<std::mutex> lock(active->mu);
      --active->waiters;
      if (!cancelled_here || active->waiters > 0 || active->finished || !pay_after_leaving) return;
      active->left_by = pay_after_leaving;
      // Measured since the last progress this compile reported (and charged).
      unreported = active->progress.trials_done - std::max(reported, 0);
    }
    if (unreported > 0) pay_after_leaving(unreported);
  };
  while (true) {
    TuneProgress progress;
    bool finished = false;  // once true, status and outcome no longer change
    {
      std::unique_lock<std::mutex> lock(active->mu);
      active->cv.wait_for(lock, std::chrono::milliseconds(200), [&] {
        return active->finished || active->progress.trials_done != reported;
      });
      progress = active->progress;
      finished = active->finished;
    }
    if (progress.trials_done != reported) {
      reported = progress.trials_done;
      on_progress(progress);
    }
    if (finished) {
      leave(false);
      std::lock_guard<std::mutex> lock(active->mu);
      if (!active->status.ok()) return active->status;
      return active->outcome;
    }
    // The job goes on without this compile; its records serve the next one.
    if (cancelled()) {
      leave(true);
      return absl::CancelledError("compile cancelled");
    }
  }
}

}  // namespace kiln::server
