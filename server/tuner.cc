// Tuning jobs: database lookup, candidate choice, farm measurement, records.
#include "server/tuner.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "compiler_core/graph_proto.h"
#include "compiler_core/version.h"
#include "server/log.h"

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

// The candidates to measure: the heuristic default first, then a shuffle of the
// rest of the space seeded by the workload key (so a rerun picks the same ones).
std::vector<ScheduleConfig> ChooseCandidates(const Workload& w, const CpuTarget& target, int trials) {
  std::vector<ScheduleConfig> space = EnumerateSchedules(*w.graph, target);
  ScheduleConfig def = DefaultSchedule(*w.graph, target);
  std::vector<ScheduleConfig> rest;
  for (const auto& c : space) {
    if (!(c == def)) rest.push_back(c);
  }
  std::seed_seq seed(w.key.begin(), w.key.end());
  std::mt19937_64 rng(seed);
  std::shuffle(rest.begin(), rest.end(), rng);
  std::vector<ScheduleConfig> out = {def};
  for (const auto& c : rest) {
    if (static_cast<int>(out.size()) >= trials) break;
    out.push_back(c);
  }
  return out;
}

}  // namespace

absl::StatusOr<TuneOutcome> Tuner::Tune(const Workload& workload, const std::string& target_key,
                                        const CpuTarget& target, int trials,
                                        const std::function<void(const TuneProgress&)>& on_progress,
                                        const std::function<bool()>& cancelled) {
  tuningdb::WorkloadInfo info;
  info.key = workload.key;
  info.canonical_text = workload.canonical_text;
  info.kind = workload.kind;
  info.op_summary = workload.op_summary;
  info.flops = workload.flops;
  info.bytes = workload.bytes;
  if (absl::Status s = db_->UpsertWorkload(info); !s.ok()) return s;

  auto best = db_->TopK(workload.key, target_key, kScheduleSpaceVersion, 1);
  if (!best.ok()) return best.status();
  if (!best->empty()) {
    auto config = ScheduleConfig::Parse(best->front().config);
    if (config.ok()) {
      return TuneOutcome{*config, best->front().median_ms, /*from_database=*/true, 0};
    }
    LogWarn("unparseable record ignored", {{"workload", workload.key}, {"config", best->front().config}});
  }
  if (trials <= 0) return TuneOutcome{DefaultSchedule(*workload.graph, target), 0, false, 0};

  // Wait for a worker that measures this target.
  auto wait_until = std::chrono::steady_clock::now() + options_.worker_wait;
  while (!broker_->HasLiveWorker(target_key)) {
    if (cancelled()) return absl::CancelledError("compile cancelled");
    if (std::chrono::steady_clock::now() > wait_until) {
      return absl::UnavailableError(absl::StrCat(
          "no worker measures target ", target_key, "; start `kiln-worker --server ... --device cpu` on a ",
          "matching host, or pass --trials 0 to use untuned default schedules"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  std::vector<ScheduleConfig> candidates = ChooseCandidates(workload, target, trials);
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

  std::vector<std::shared_future<TaskOutcome>> futures;
  for (const auto& c : candidates) {
    kiln::v1::MeasureTask t = base;
    t.set_schedule_config(c.ToString());
    futures.push_back(broker_->Submit(target_key, std::move(t)));
  }

  TuneProgress progress;
  progress.trials_total = static_cast<int>(candidates.size());
  std::vector<tuningdb::Record> records;
  TuneOutcome out;
  bool found = false;
  std::string first_error;
  for (size_t i = 0; i < futures.size(); ++i) {
    while (futures[i].wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
      if (cancelled()) return absl::CancelledError("compile cancelled");
    }
    const TaskOutcome& o = futures[i].get();
    tuningdb::Record r;
    r.workload_key = workload.key;
    r.target_key = target_key;
    r.space_version = kScheduleSpaceVersion;
    r.compiler_version = kCompilerVersion;
    r.config = candidates[i].ToString();
    r.median_ms = o.result.median_ms();
    r.p10_ms = o.result.p10_ms();
    r.p90_ms = o.result.p90_ms();
    r.repeats = o.result.repeats();
    r.error = ToRecordError(o.result.error());
    r.error_message = o.result.error_message();
    r.worker_id = o.worker_id;
    r.created_unix_ms = NowUnixMs();
    records.push_back(r);
    if (o.result.error() == kiln::v1::MEASURE_OK) {
      if (!found || o.result.median_ms() < out.median_ms) {
        out.config = candidates[i];
        out.median_ms = o.result.median_ms();
        found = true;
      }
    } else if (first_error.empty()) {
      first_error = absl::StrCat(r.config, ": ", kiln::v1::MeasureError_Name(o.result.error()), " ",
                                 o.result.error_message());
    }
    progress.trials_done = static_cast<int>(i + 1);
    progress.best_ms = found ? out.median_ms : 0;
    on_progress(progress);
  }
  if (absl::Status s = db_->AddRecords(records); !s.ok()) return s;
  if (!found) {
    return absl::InternalError(absl::StrCat("every candidate schedule of workload ", workload.key.substr(0, 12),
                                            " (", workload.op_summary, ") failed; first: ", first_error));
  }
  out.trials_measured = static_cast<int>(candidates.size());
  return out;
}

}  // namespace kiln::server
