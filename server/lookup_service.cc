// LookupService: compile key -> package digest, with the artifact checked present.
#include "server/lookup_service.h"

#include "absl/strings/str_cat.h"
#include "server/auth.h"
#include "server/grpc_status.h"

namespace kiln::server {

grpc::Status LookupServiceImpl::Lookup(grpc::ServerContext* context, const kiln::v1::LookupRequest* request,
                                       kiln::v1::LookupResponse* response) {
  if (grpc::Status denied = Authorize(context, {Role::kClient}); !denied.ok()) return denied;
  if (request->onnx_model().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "lookup request carries no model");
  }
  auto target = pipeline_->ResolveTarget(request->target(), request->threads());
  if (!target.ok()) return ToGrpcStatus(target.status());
  std::string key = CompileKey(request->onnx_model(), request->shapes(), target->first);
  response->set_compile_key(key);
  response->set_tuning_in_progress(progressive_->InFlight(key));
  auto entry = db_->GetCompileEntry(key);
  if (!entry.ok()) return ToGrpcStatus(entry.status());
  if (!entry->has_value()) {
    metrics_->LookupAnswered(false);
    response->set_found(false);
    response->set_reason(absl::StrCat("no compile of this model with these shapes for target ",
                                      target->first, " by this compiler version"));
    return grpc::Status::OK;
  }
  auto present = db_->HasArtifact((*entry)->package_digest);
  if (!present.ok()) return ToGrpcStatus(present.status());
  if (!*present) {
    metrics_->LookupAnswered(false);
    response->set_found(false);
    response->set_reason(absl::StrCat("the package ", (*entry)->package_digest,
                                      " was compiled but has since been evicted from the artifact store"));
    return grpc::Status::OK;
  }
  metrics_->LookupAnswered(true);
  response->set_found(true);
  response->set_package_digest((*entry)->package_digest);
  response->set_package_size((*entry)->package_size);
  return grpc::Status::OK;
}

}  // namespace kiln::server
