// kiln.v1.WorkerService: the farm's side of register, heartbeat, lease, report.
#pragma once

#include "kiln/v1/worker.grpc.pb.h"
#include "server/metrics.h"
#include "server/task_broker.h"

namespace kiln::server {

// The target key a worker measures for, derived from what it says it is.
std::string TargetKeyOf(const kiln::v1::DeviceInfo& device);

class WorkerServiceImpl final : public kiln::v1::WorkerService::Service {
 public:
  WorkerServiceImpl(TaskBroker* broker, ServerMetrics* metrics) : broker_(broker), metrics_(metrics) {}

  grpc::Status Register(grpc::ServerContext* context, const kiln::v1::RegisterRequest* request,
                        kiln::v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const kiln::v1::HeartbeatRequest* request,
                         kiln::v1::HeartbeatResponse* response) override;
  grpc::Status LeaseTasks(grpc::ServerContext* context, const kiln::v1::LeaseTasksRequest* request,
                          kiln::v1::LeaseTasksResponse* response) override;
  grpc::Status ReportResults(grpc::ServerContext* context,
                             const kiln::v1::ReportResultsRequest* request,
                             kiln::v1::ReportResultsResponse* response) override;

 private:
  TaskBroker* broker_;
  ServerMetrics* metrics_;
};

}  // namespace kiln::server
