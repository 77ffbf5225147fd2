// kiln.v1.CompileService over the compile pipeline and the artifact store.
#pragma once

#include "kiln/v1/compile.grpc.pb.h"
#include "server/admission.h"
#include "server/compile_pipeline.h"
#include "server/progressive_compiles.h"
#include "server/metrics.h"
#include "tuning_db/tuning_db.h"

namespace kiln::server {

class CompileServiceImpl final : public kiln::v1::CompileService::Service {
 public:
  // Every compile takes a slot of `admission` for as long as it runs (its
  // background tuning included) and spends its client's tuning budget there.
  CompileServiceImpl(CompilePipeline* pipeline, ProgressiveCompiles* progressive, tuningdb::TuningDb* db,
                     ServerMetrics* metrics, AdmissionControl* admission)
      : pipeline_(pipeline), progressive_(progressive), db_(db), metrics_(metrics), admission_(admission) {}

  grpc::Status Compile(grpc::ServerContext* context, const kiln::v1::CompileRequest* request,
                       grpc::ServerWriter<kiln::v1::CompileEvent>* writer) override;
  grpc::Status FetchArtifact(grpc::ServerContext* context,
                             const kiln::v1::FetchArtifactRequest* request,
                             grpc::ServerWriter<kiln::v1::ArtifactChunk>* writer) override;
  grpc::Status Report(grpc::ServerContext* context, const kiln::v1::ReportRequest* request,
                      kiln::v1::TuningReport* response) override;

 private:
  CompilePipeline* pipeline_;
  ProgressiveCompiles* progressive_;
  tuningdb::TuningDb* db_;
  ServerMetrics* metrics_;
  AdmissionControl* admission_;
};

}  // namespace kiln::server
