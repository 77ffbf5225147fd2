// kiln.v1.LookupService: answers with the package an earlier compile produced
// for the same model, shapes, target and compiler version. Never compiles.
#pragma once

#include "kiln/v1/lookup.grpc.pb.h"
#include "server/compile_pipeline.h"
#include "server/metrics.h"
#include "server/progressive_compiles.h"
#include "tuning_db/tuning_db.h"

namespace kiln::server {

class LookupServiceImpl final : public kiln::v1::LookupService::Service {
 public:
  LookupServiceImpl(CompilePipeline* pipeline, tuningdb::TuningDb* db, const ProgressiveCompiles* progressive,
                    ServerMetrics* metrics)
      : pipeline_(pipeline), db_(db), progressive_(progressive), metrics_(metrics) {}

  grpc::Status Lookup(grpc::ServerContext* context, const kiln::v1::LookupRequest* request,
                      kiln::v1::LookupResponse* response) override;

 private:
  CompilePipeline* pipeline_;
  tuningdb::TuningDb* db_;
  const ProgressiveCompiles* progressive_;
  ServerMetrics* metrics_;
};

}  // namespace kiln::server
