// kiln.v1.AdminService: a farm operator's hands on a running server: list and
// drain workers, list and cancel tuning jobs, collect artifact garbage. Every
// call needs the admin role when credentials are checked.
#pragma once

#include "kiln/v1/admin.grpc.pb.h"
#include "server/task_broker.h"
#include "server/tuner.h"
#include "server/worker_service.h"
#include "tuning_db/tuning_db.h"

namespace kiln::server {

class AdminServiceImpl final : public kiln::v1::AdminService::Service {
 public:
  AdminServiceImpl(TaskBroker* broker, Tuner* tuner, tuningdb::TuningDb* db, WorkerServiceImpl* workers)
      : broker_(broker), tuner_(tuner), db_(db), workers_(workers) {}

  grpc::Status ListWorkers(grpc::ServerContext* context, const kiln::v1::ListWorkersRequest* request,
                           kiln::v1::ListWorkersResponse* response) override;
  grpc::Status DrainWorker(grpc::ServerContext* context, const kiln::v1::DrainWorkerRequest* request,
                           kiln::v1::DrainWorkerResponse* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const kiln::v1::ListJobsRequest* request,
                        kiln::v1::ListJobsResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const kiln::v1::CancelJobRequest* request,
                         kiln::v1::CancelJobResponse* response) override;
  grpc::Status CollectGarbage(grpc::ServerContext* context, const kiln::v1::CollectGarbageRequest* request,
                              kiln::v1::CollectGarbageResponse* response) override;

 private:
  kiln::v1::JobStatus StatusOf(const tuningdb::TuningJob& job) const;

  TaskBroker* broker_;
  Tuner* tuner_;
  tuningdb::TuningDb* db_;
  WorkerServiceImpl* workers_;
};

}  // namespace kiln::server
