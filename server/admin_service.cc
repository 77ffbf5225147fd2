// AdminService: each call is authorized for the admin role, logged with the
// caller, and answered from the broker, the tuner or the database.
#include "server/admin_service.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "server/auth.h"
#include "server/grpc_status.h"

namespace kiln::server {
namespace {

constexpr int kDefaultJobLimit = 100;

std::optional<tuningdb::JobState> ParseJobState(const std::string& name) {
  for (tuningdb::JobState s : {tuningdb::JobState::kRunning, tuningdb::JobState::kDone, tuningdb::JobState::kFailed,
                               tuningdb::JobState::kCancelled}) {
    if (tuningdb::JobStateName(s) == name) return s;
  }
  return std::nullopt;
}

std::string Caller(const grpc::ServerContext* context) {
  std::string identity = CallerIdentity(context);
  return identity.empty() ? context->peer() : identity;
}

}  // namespace

kiln::v1::JobStatus AdminServiceImpl::StatusOf(const tuningdb::TuningJob& job) const {
  kiln::v1::JobStatus out;
  out.set_job_id(job.id);
  out.set_workload_key(job.workload_key);
  out.set_target_key(job.target_key);
  out.set_space_version(job.space_version);
  out.set_state(std::string(tuningdb::JobStateName(job.state)));
  out.set_strategy(job.strategy);
  out.set_trials(job.trials);
  out.set_candidates(static_cast<int>(job.candidates.size()));
  out.set_measured(static_cast<int>(std::count_if(job.candidates.begin(), job.candidates.end(),
                                                  [](const tuningdb::JobCandidate& c) { return c.measured(); })));
  out.set_message(job.message);
  out.set_created_unix_ms(job.created_unix_ms);
  out.set_updated_unix_ms(job.updated_unix_ms);
  out.set_active(job.state == tuningdb::JobState::kRunning && tuner_->IsActive(job.id));
  return out;
}

grpc::Status AdminServiceImpl::ListWorkers(grpc::ServerContext* context, const kiln::v1::ListWorkersRequest*,
                                           kiln::v1::ListWorkersResponse* response) {
  if (grpc::Status denied = Authorize(context, {Role::kAdmin}); !denied.ok()) return denied;
  TaskBroker::FarmState farm = broker_->State();
  for (const TaskBroker::WorkerState& w : farm.workers) {
    kiln::v1::WorkerStatus* out = response->add_workers();
    out->set_worker_id(w.view.id);
    out->set_target_key(w.view.target_key);
    out->set_hostname(w.view.hostname);
    *out->mutable_device() = w.view.device;
    out->set_leased_tasks(w.view.leased_tasks);
    out->set_silent_seconds(w.silent_seconds);
    out->set_draining(w.view.draining);
    out->set_identity(workers_->RegisteredBy(w.view.id));
  }
  int64_t queued = 0;
  for (const auto& [key, queue] : farm.queues) queued += queue.queued;
  response->set_queued_tasks(queued);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::DrainWorker(grpc::ServerContext* context, const kiln::v1::DrainWorkerRequest* request,
                                           kiln::v1::DrainWorkerResponse* response) {
  if (grpc::Status denied = Authorize(context, {Role::kAdmin}); !denied.ok()) return denied;
  std::optional<int> leased = broker_->Drain(request->worker_id());
  if (!leased) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no worker '", request->worker_id(),
                                                                  "' is registered (kiln admin workers lists them)"));
  }
  LogInfo("admin drained a worker", {{"worker", request->worker_id()}, {"by", Caller(context)}});
  response->set_leased_tasks(*leased);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::ListJobs(grpc::ServerContext* context, const kiln::v1::ListJobsRequest* request,
                                        kiln::v1::ListJobsResponse* response) {
  if (grpc::Status denied = Authorize(context, {Role::kAdmin}); !denied.ok()) return denied;
  std::optional<tuningdb::JobState> state;
  if (!request->state().empty()) {
    state = ParseJobState(request->state());
    if (!state) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat("unknown job state '", request->state(),
                                                                           "' (running, done, failed or cancelled)"));
    }
  }
  if (request->limit() < 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat("negative job limit ", request->limit()));
  }
  auto jobs = db_->ListJobs(state);
  if (!jobs.ok()) return ToGrpcStatus(jobs.status());
  const size_t limit = request->limit() > 0 ? request->limit() : kDefaultJobLimit;
  // Newest first.
  for (auto it = jobs->rbegin(); it != jobs->rend() && static_cast<size_t>(response->jobs_size()) < limit; ++it) {
    *response->add_jobs() = StatusOf(*it);
  }
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::CancelJob(grpc::ServerContext* context, const kiln::v1::CancelJobRequest* request,
                                         kiln::v1::CancelJobResponse* response) {
  if (grpc::Status denied = Authorize(context, {Role::kAdmin}); !denied.ok()) return denied;
  const std::string by = Caller(context);
  std::string message = absl::StrCat("tuning job ", request->job_id(), " cancelled by admin '", by, "'");
  if (!request->reason().empty()) absl::StrAppend(&message, ": ", request->reason());
  if (absl::Status s = tuner_->CancelJob(request->job_id(), message); !s.ok()) return ToGrpcStatus(s);
  LogInfo("admin cancelled a tuning job", {{"job", absl::StrCat(request->job_id())}, {"by", by}});
  auto job = db_->GetJob(request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  if (job->has_value()) *response->mutable_job() = StatusOf(**job);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::CollectGarbage(grpc::ServerContext* context,
                                              const kiln::v1::CollectGarbageRequest* request,
                                              kiln::v1::CollectGarbageResponse* response) {
  if (grpc::Status denied = Authorize(context, {Role::kAdmin}); !denied.ok()) return denied;
  auto freed = db_->GcArtifacts(request->max_artifact_bytes());
  if (!freed.ok()) return ToGrpcStatus(freed.status());
  auto stats = db_->GetStats();
  if (!stats.ok()) return ToGrpcStatus(stats.status());
  LogInfo("admin collected artifacts", {{"freed_bytes", absl::StrCat(*freed)},
                                        {"max_bytes", absl::StrCat(request->max_artifact_bytes())},
                                        {"by", Caller(context)}});
  response->set_bytes_freed(*freed);
  response->set_artifacts_left(stats->artifacts);
  response->set_artifact_bytes_left(stats->artifact_bytes);
  return grpc::Status::OK;
}

}  // namespace kiln::server
