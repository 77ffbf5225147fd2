// kiln.v1.WorkerService: the farm's side of register, heartbeat, lease, report.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "kiln/v1/worker.grpc.pb.h"
#include "server/metrics.h"
#include "server/task_broker.h"
#include "tuning_db/tuning_db.h"

namespace kiln::server {

class WorkerServiceImpl final : public kiln::v1::WorkerService::Service {
 public:
  // `db` (may be null) remembers each registering worker's target with its
  // device model, driver and toolkit versions.
  WorkerServiceImpl(TaskBroker* broker, ServerMetrics* metrics, tuningdb::TuningDb* db = nullptr)
      : broker_(broker), metrics_(metrics), db_(db) {}

  grpc::Status Register(grpc::ServerContext* context, const kiln::v1::RegisterRequest* request,
                        kiln::v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const kiln::v1::HeartbeatRequest* request,
                         kiln::v1::HeartbeatResponse* response) override;
  grpc::Status LeaseTasks(grpc::ServerContext* context, const kiln::v1::LeaseTasksRequest* request,
                          kiln::v1::LeaseTasksResponse* response) override;
  grpc::Status ReportResults(grpc::ServerContext* context,
                             const kiln::v1::ReportResultsRequest* request,
                             kiln::v1::ReportResultsResponse* response) override;

  // The identity that registered the worker ("" without credentials checked).
  std::string RegisteredBy(const std::string& worker_id);

 private:
  // With credentials checked: PERMISSION_DENIED when `worker_id` was
  // registered by another identity than the caller's (a worker may heartbeat,
  // lease and report only as itself).
  grpc::Status CheckOwner(const grpc::ServerContext* context, const std::string& worker_id);

  TaskBroker* broker_;
  ServerMetrics* metrics_;
  tuningdb::TuningDb* db_;
  std::mutex owners_mu_;
  std::map<std::string, std::string> owners_;  // worker id -> identity that registered it
};

// The tuning database's row for the target a worker measures for.
tuningdb::TargetInfo TargetInfoOf(const std::string& target_key, const kiln::v1::DeviceInfo& device);

}  // namespace kiln::server
