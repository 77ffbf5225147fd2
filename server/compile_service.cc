// CompileService: streams progress, then the result; streams artifacts in chunks.
#include "server/compile_service.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "server/auth.h"
#include "server/grpc_status.h"

namespace kiln::server {

grpc::Status CompileServiceImpl::Compile(grpc::ServerContext* context,
                                         const kiln::v1::CompileRequest* request,
                                         grpc::ServerWriter<kiln::v1::CompileEvent>* writer) {
  if (grpc::Status denied = Authorize(context, {Role::kClient}); !denied.ok()) return denied;
  const std::string client = ClientKey(*context);
  LogInfo("compile started", {{"model", request->model_name()}, {"target", request->target()},
                              {"peer", context->peer()}, {"client", client}});
  const auto started = std::chrono::steady_clock::now();
  auto seconds = [&started] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  // The call's deadline on the steady clock (none: time_point::max()).
  const auto deadline = [&] {
    const auto left = context->deadline() - std::chrono::system_clock::now();
    if (left > std::chrono::hours(24 * 365)) return std::chrono::steady_clock::time_point::max();
    return started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
  }();
  // A deadline that passes ends the compile as a cancelled call does (the
  // pipeline polls this while it waits and between stages).
  auto cancelled = [&] { return context->IsCancelled() || std::chrono::steady_clock::now() >= deadline; };
  auto failed = [&](absl::Status status) {
    // The client's own deadline cancels the call a little before the
    // server's copy of it passes (transit, and the header's rounding).
    if (status.code() == absl::StatusCode::kCancelled && deadline != std::chrono::steady_clock::time_point::max() &&
        std::chrono::steady_clock::now() + std::chrono::seconds(1) >= deadline) {
      status = absl::DeadlineExceededError(absl::StrCat("the call's deadline passed after ",
                                                        static_cast<int64_t>(seconds() * 10) / 10.0,
                                                        " s; the compile stopped (", status.message(), ")"));
    }
    // A refusal is the client's excess, not a failing compile: it counts
    // apart (kiln_admission_refused_total), out of the compile error ratio.
    if (std::optional<std::string> limit = LimitOf(status)) {
      metrics_->AdmissionRefused(*limit);
    } else {
      metrics_->CompileFinished(status, 0, seconds());
    }
    LogWarn("compile failed", {{"model", request->model_name()}, {"client", client},
                               {"error", std::string(status.message())}});
    return ToGrpcStatus(status);
  };
  absl::StatusOr<std::shared_ptr<AdmissionControl::Slot>> slot = admission_->Admit(client, deadline, cancelled);
  if (!slot.ok()) return failed(slot.status());
  auto output = pipeline_->Run(
      *request,
      [&](const kiln::v1::Progress& p) {
        (*slot)->Measured(p.trials_measured());
        kiln::v1::CompileEvent e;
        *e.mutable_progress() = p;
        writer->Write(e);
      },
      cancelled, [&] { return (*slot)->TuningAllowed(); },
      // The tuning a cancelled compile leaves running is its client's too. The
      // admission control outlives the tuner's jobs (KilnServer::State).
      [admission = admission_, client](int64_t trials) { admission->Charge(client, trials); });
  if (!output.ok()) return failed(output.status());
  (*slot)->Measured(output->result.trials_measured());
  // Progressive: the tuning left goes on in the background (or joins the
  // background compile of the same key already running), in this compile's
  // slot, spending its client's budget.
  if (output->result.tuning_in_background()) {
    progressive_->Start(CompileKeyFor(*request, output->result.target()), *request,
                        [slot = *slot](const kiln::v1::Progress& p) { slot->Measured(p.trials_measured()); });
  }
  metrics_->CompileFinished(absl::OkStatus(), output->result.trials_measured(), seconds());
  kiln::v1::CompileEvent e;
  *e.mutable_result() = output->result;
  writer->Write(e);
  return grpc::Status::OK;
}

grpc::Status CompileServiceImpl::FetchArtifact(grpc::ServerContext* context,
                                               const kiln::v1::FetchArtifactRequest* request,
                                               grpc::ServerWriter<kiln::v1::ArtifactChunk>* writer) {
  if (grpc::Status denied = Authorize(context, {Role::kClient, Role::kWorker}); !denied.ok()) return denied;
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
  metrics_->ArtifactFetched();
  return grpc::Status::OK;
}

grpc::Status CompileServiceImpl::Report(grpc::ServerContext* context, const kiln::v1::ReportRequest* request,
                                        kiln::v1::TuningReport* response) {
  if (grpc::Status denied = Authorize(context, {Role::kClient}); !denied.ok()) return denied;
  auto report = pipeline_->Report(*request);
  if (!report.ok()) {
    if (std::optional<std::string> limit = LimitOf(report.status())) metrics_->AdmissionRefused(*limit);
    return ToGrpcStatus(report.status());
  }
  *response = std::move(*report);
  return grpc::Status::OK;
}

}  // namespace kiln::server
