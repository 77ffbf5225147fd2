// WorkerService: validates worker requests and forwards them to the broker.
#include "server/worker_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/log.h"
#include "server/auth.h"
#include "server/farm_target.h"

namespace kiln::server {

// The most threads a worker may measure one task on.
constexpr int kMaxMeasureThreads = 1024;

tuningdb::TargetInfo TargetInfoOf(const std::string& target_key, const kiln::v1::DeviceInfo& device) {
  tuningdb::TargetInfo t;
  t.key = target_key;
  t.kind = device.kind();
  t.arch = device.arch();
  t.cpu_name = device.cpu_name();
  t.features = absl::StrJoin(device.features(), ",");
  t.device_model = device.device_model();
  t.driver_version = device.driver_version();
  t.toolkit_version = device.toolkit_version();
  return t;
}

grpc::Status WorkerServiceImpl::Register(grpc::ServerContext* context, const kiln::v1::RegisterRequest* request,
                                         kiln::v1::RegisterResponse* response) {
  if (grpc::Status denied = Authorize(context, {Role::kWorker}); !denied.ok()) return denied;
  if (request->device().kind().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "register: device.kind is empty");
  }
  if (request->device().measure_threads() < 0 || request->device().measure_threads() > kMaxMeasureThreads) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("register: device.measure_threads ", request->device().measure_threads(),
                                     " is out of range 0..", kMaxMeasureThreads));
  }
  std::string key = FarmTargetKeyOf(request->device());
  if (db_ != nullptr) {
    // Records name the target by key; its row says what the key stands for.
    // So do the keys of its records on more threads (one row per thread count
    // the worker may measure on).
    for (int threads = 1; threads <= MeasureThreadsOf(request->device()); ++threads) {
      const std::string record_key = RecordTargetKey(key, threads);
      if (absl::Status s = db_->UpsertTarget(TargetInfoOf(record_key, request->device())); !s.ok()) {
        LogWarn("cannot remember the worker's target", {{"target", record_key}, {"error", s.ToString()}});
      }
    }
  }
  response->set_worker_id(broker_->RegisterWorker(key, request->hostname(), request->device()));
  if (std::string identity = CallerIdentity(context); !identity.empty()) {
    std::lock_guard<std::mutex> lock(owners_mu_);
    owners_[response->worker_id()] = identity;
  }
  response->set_target_key(key);
  response->set_heartbeat_interval_ms(static_cast<int>(broker_->options().heartbeat_interval.count()));
  response->set_lease_timeout_ms(static_cast<int>(broker_->options().worker_timeout.count()));
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Heartbeat(grpc::ServerContext* context, const kiln::v1::HeartbeatRequest* request,
                                          kiln::v1::HeartbeatResponse* response) {
  if (grpc::Status denied = Authorize(context, {Role::kWorker}); !denied.ok()) return denied;
  if (grpc::Status denied = CheckOwner(context, request->worker_id()); !denied.ok()) return denied;
  response->set_known(broker_->Heartbeat(request->worker_id()));
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::LeaseTasks(grpc::ServerContext* context,
                                           const kiln::v1::LeaseTasksRequest* request,
                                           kiln::v1::LeaseTasksResponse* response) {
  if (grpc::Status denied = Authorize(context, {Role::kWorker}); !denied.ok()) return denied;
  if (grpc::Status denied = CheckOwner(context, request->worker_id()); !denied.ok()) return denied;
  // A worker the server forgot (silent too long, or a restart) registers again.
  if (!broker_->Heartbeat(request->worker_id())) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("worker ", request->worker_id(), " is not registered (it was silent too long or "
                                     "the server restarted): register again"));
  }
  int wait_ms = std::clamp(request->wait_ms(), 0, 30000);
  bool draining = false;
  for (auto& t : broker_->Lease(request->worker_id(), std::max(1, request->max_tasks()),
                                std::chrono::milliseconds(wait_ms), &draining)) {
    *response->add_tasks() = std::move(t);
  }
  response->set_draining(draining);
  return grpc::Status::OK;
}

std::string WorkerServiceImpl::RegisteredBy(const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(owners_mu_);
  auto it = owners_.find(worker_id);
  return it == owners_.end() ? "" : it->second;
}

grpc::Status WorkerServiceImpl::ReportResults(grpc::ServerContext* context,
                                              const kiln::v1::ReportResultsRequest* request,
                                              kiln::v1::ReportResultsResponse* response) {
  if (grpc::Status denied = Authorize(context, {Role::kWorker}); !denied.ok()) return denied;
  if (grpc::Status denied = CheckOwner(context, request->worker_id()); !denied.ok()) return denied;
  std::vector<kiln::v1::MeasureResult> results(request->results().begin(), request->results().end());
  auto [accepted, rejected] = broker_->Report(request->worker_id(), results);
  response->set_accepted(accepted);
  response->set_rejected(rejected);
  metrics_->ResultsReported(accepted);
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::CheckOwner(const grpc::ServerContext* context, const std::string& worker_id) {
  const std::string identity = CallerIdentity(context);
  if (identity.empty()) return grpc::Status::OK;
  std::lock_guard<std::mutex> lock(owners_mu_);
  auto it = owners_.find(worker_id);
  if (it == owners_.end() || it->second == identity) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat("worker ", worker_id, " was registered by '", it->second, "', not by '", identity,
                                   "': a worker leases and reports only as itself"));
}

}  // namespace kiln::server
