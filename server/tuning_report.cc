// Tuning reports: TuningHistory and ConfigStats, per workload.
#include "server/tuning_report.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/graph_proto.h"
#include "kiln/v1/worker.pb.h"

namespace kiln::server {
namespace {

// The measurements of one workload, its default and its winner. `graph`,
// when known with `target`, gives the space's size and default.
absl::Status FillWorkload(tuningdb::TuningDb& db, const std::string& workload_key, const std::string& target_key,
                          int space_version, const Graph* graph, const std::optional<Target>& target,
                          kiln::v1::WorkloadTuning* out) {
  out->set_workload_key(workload_key);
  ASSIGN_OR_RETURN(std::optional<tuningdb::WorkloadInfo> info, db.GetWorkload(workload_key));
  if (info) {
    out->set_kind(info->kind);
    out->set_op_summary(info->op_summary);
  }
  if (graph != nullptr && target) {
    out->set_space_size(static_cast<int>(EnumerateSchedules(*graph, *target).size()));
    out->set_default_config(DefaultSchedule(*graph, *target).ToString());
  }
  ASSIGN_OR_RETURN(std::vector<tuningdb::TuningDb::HistoryEntry> history,
                   db.TuningHistory(workload_key, target_key, space_version));
  std::set<std::string> seen;
  for (const tuningdb::TuningDb::HistoryEntry& e : history) {
    kiln::v1::TuningTrial* t = out->add_trials();
    t->set_config(e.record.config);
    t->set_median_ms(e.record.median_ms);
    t->set_p10_ms(e.record.p10_ms);
    t->set_p90_ms(e.record.p90_ms);
    t->set_error(std::string(tuningdb::RecordErrorName(e.record.error)));
    t->set_error_message(e.record.error_message);
    t->set_remeasure(!seen.insert(e.record.config).second);
    t->set_job_id(e.job_id);
    t->set_strategy(e.strategy);
    if (e.predicted) {
      t->set_has_predicted(true);
      t->set_predicted(*e.predicted);
    }
    t->set_created_unix_ms(e.record.created_unix_ms);
    t->set_worker_id(e.record.worker_id);
  }
  ASSIGN_OR_RETURN(std::vector<tuningdb::TuningDb::ConfigStat> stats,
                   db.ConfigStats(workload_key, target_key, space_version, static_cast<int>(seen.size())));
  if (!stats.empty()) {
    out->set_best_config(stats.front().config);
    out->set_best_ms(stats.front().mean_ms);
    out->set_best_measurements(stats.front().count);
  }
  for (const tuningdb::TuningDb::ConfigStat& s : stats) {
    if (s.config == out->default_config()) out->set_default_ms(s.mean_ms);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<kiln::v1::TuningReport> ReportModel(tuningdb::TuningDb& db, const PreparedModel& model,
                                                   const std::string& target_key, const Target& target) {
  kiln::v1::TuningReport report;
  report.set_target(target_key);
  report.set_space_version(kScheduleSpaceVersion);
  report.set_groups(static_cast<int>(model.workloads.size()));
  std::map<std::string, kiln::v1::WorkloadTuning*> by_key;
  for (size_t i = 0; i < model.workloads.size(); ++i) {
    const Workload& w = model.workloads[i];
    auto [it, added] = by_key.emplace(w.key, nullptr);
    if (added) {
      it->second = report.add_workloads();
      RETURN_IF_ERROR(
          FillWorkload(db, w.key, target_key, kScheduleSpaceVersion, w.graph.get(), target, it->second));
      // A workload never tuned is not in the database yet: name it anyway.
      if (it->second->kind().empty()) it->second->set_kind(w.kind);
      if (it->second->op_summary().empty()) it->second->set_op_summary(w.op_summary);
    }
    it->second->set_count(it->second->count() + 1);
    it->second->add_groups(static_cast<int>(i));
  }
  return report;
}

absl::StatusOr<kiln::v1::TuningReport> ReportJob(tuningdb::TuningDb& db, int64_t job_id,
                                                 const std::optional<Target>& target) {
  ASSIGN_OR_RETURN(std::optional<tuningdb::TuningJob> job, db.GetJob(job_id));
  if (!job) return absl::NotFoundError(absl::StrCat("no tuning job ", job_id, " in ", db.path()));
  kiln::v1::TuningReport report;
  report.set_target(job->target_key);
  report.set_space_version(job->space_version);
  report.set_job_id(job->id);
  report.set_job_state(std::string(tuningdb::JobStateName(job->state)));
  report.set_job_message(job->message);
  report.set_groups(1);
  // The job's workload graph travels in its task template.
  std::unique_ptr<Graph> graph;
  kiln::v1::MeasureTask task;
  if (task.ParseFromString(job->task_template)) {
    if (auto g = GraphFromProto(task.workload()); g.ok()) graph = std::move(*g);
  }
  kiln::v1::WorkloadTuning* w = report.add_workloads();
  // A space of another version has other points: no size or default then.
  const bool current = job->space_version == kScheduleSpaceVersion;
  RETURN_IF_ERROR(FillWorkload(db, job->workload_key, job->target_key, job->space_version,
                               current ? graph.get() : nullptr, target, w));
  w->set_count(1);
  return report;
}

}  // namespace kiln::server
