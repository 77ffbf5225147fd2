// CompileService: streams progress, then the result; streams artifacts in chunks.
#include "server/compile_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "server/grpc_status.h"

namespace kiln::server {

grpc::Status CompileServiceImpl::Compile(grpc::ServerContext* context,
                                         const kiln::v1::CompileRequest* request,
                                         grpc::ServerWriter<kiln::v1::CompileEvent>* writer) {
  LogInfo("compile started", {{"model", request->model_name()}, {"target", request->target()},
                              {"peer", context->peer()}});
  auto output = pipeline_->Run(
      *request,
      [&](const kiln::v1::Progress& p) {
        kiln::v1::CompileEvent e;
        *e.mutable_progress() = p;
        writer->Write(e);
      },
      [&] { return context->IsCancelled(); });
  if (!output.ok()) {
    metrics_->compiles_failed.Increment();
    LogWarn("compile failed", {{"model", request->model_name()},
                               {"error", std::string(output.status().message())}});
    return ToGrpcStatus(output.status());
  }
  // Progressive: the tuning left goes on in the background (or joins the
  // background compile of the same key already running).
  if (output->result.tuning_in_background()) {
    progressive_->Start(CompileKeyFor(*request, output->result.target()), *request);
  }
  metrics_->compiles_ok.Increment();
  metrics_->trials_measured.Increment(output->result.trials_measured());
  kiln::v1::CompileEvent e;
  *e.mutable_result() = output->result;
  writer->Write(e);
  return grpc::Status::OK;
}

grpc::Status CompileServiceImpl::FetchArtifact(grpc::ServerContext* context,
                                               const kiln::v1::FetchArtifactRequest* request,
                                               grpc::ServerWriter<kiln::v1::ArtifactChunk>* writer) {
  auto blob = db_->GetArtifact(request->digest());
  if (!blob.ok()) return ToGrpcStatus(blob.status());
  if (!blob->has_value()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no artifact with digest ", request->digest()));
  }
  const std::string& bytes = **blob;
  constexpr size_t kChunk = 1 << 20;
  size_t offset = 0;
  do {
    kiln::v1::ArtifactChunk chunk;
    size_t n = std::min(kChunk, bytes.size() - offset);
    chunk.set_data(bytes.substr(offset, n));
    chunk.set_offset(static_cast<int64_t>(offset));
    chunk.set_total_size(static_cast<int64_t>(bytes.size()));
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    offset += n;
  } while (offset < bytes.size());
  metrics_->artifacts_fetched.Increment();
  return grpc::Status::OK;
}

grpc::Status CompileServiceImpl::Report(grpc::ServerContext* /*context*/, const kiln::v1::ReportRequest* request,
                                        kiln::v1::TuningReport* response) {
  auto report = pipeline_->Report(*request);
  if (!report.ok()) return ToGrpcStatus(report.status());
  *response = std::move(*report);
  return grpc::Status::OK;
}

}  // namespace kiln::server
