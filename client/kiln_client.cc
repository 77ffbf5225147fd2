// gRPC calls of the Kiln client library.
#include "client/kiln_client.h"

#include <grpcpp/grpcpp.h>

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/digest.h"

namespace kiln::client {
namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  std::string msg = s.error_message();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) msg = absl::StrCat(what, ": server unavailable: ", msg);
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), msg);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                          const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(1 << 30);
  return grpc::CreateCustomChannel(address, credentials, args);
}

}  // namespace

KilnClient::KilnClient(const std::string& address)
    : KilnClient(MakeChannel(address, grpc::InsecureChannelCredentials())) {}

absl::StatusOr<std::unique_ptr<KilnClient>> KilnClient::Connect(const std::string& address, absl::Duration timeout,
                                                                 const ChannelSecurity& security) {
  auto credentials = MakeChannelCredentials(security);
  if (!credentials.ok()) return credentials.status();
  auto client = std::make_unique<KilnClient>(MakeChannel(address, *credentials));
  if (!client->channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) {
    return absl::UnavailableError(absl::StrCat(
        "cannot reach kiln-server at ", address, " within ", absl::FormatDuration(timeout),
        security.tls_ca.empty() ? "" : " (over TLS: is it serving TLS, with a certificate --tls-ca signed?)"));
  }
  return client;
}

KilnClient::KilnClient(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)),
      compile_(kiln::v1::CompileService::NewStub(channel_)),
      lookup_(kiln::v1::LookupService::NewStub(channel_)),
      admin_(kiln::v1::AdminService::NewStub(channel_)) {}

absl::StatusOr<kiln::v1::CompileResult> KilnClient::Compile(
    const kiln::v1::CompileRequest& request,
    const std::function<void(const kiln::v1::Progress&)>& on_progress, absl::Duration deadline) {
  grpc::ClientContext context;
  // Long by default: a compile may tune for hours. The connection is made
  // before (Connect), and a server that goes away fails the stream with
  // UNAVAILABLE at once.
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  auto reader = compile_->Compile(&context, request);
  kiln::v1::CompileEvent event;
  std::optional<kiln::v1::CompileResult> result;
  while (reader->Read(&event)) {
    if (event.has_progress()) on_progress(event.progress());
    if (event.has_result()) result = event.result();
  }
  grpc::Status s = reader->Finish();
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::DeadlineExceededError(absl::StrCat("the compile did not finish within its deadline of ",
                                                    absl::FormatDuration(deadline), "; the server stopped it (",
                                                    s.error_message(), ")"));
  }
  if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
      absl::StrContains(s.error_message(), "Received message larger than max")) {
    return absl::ResourceExhaustedError(absl::StrCat("the request is larger than the server accepts (kiln-server "
                                                     "--max-request-mb): ", s.error_message()));
  }
  if (!s.ok()) return FromGrpc(s, "compile");
  if (!result) return absl::InternalError("compile stream ended without a result");
  return *result;
}

absl::StatusOr<std::string> KilnClient::FetchArtifact(const std::string& digest) {
  grpc::ClientContext context;
  kiln::v1::FetchArtifactRequest request;
  request.set_digest(digest);
  auto reader = compile_->FetchArtifact(&context, request);
  std::string bytes;
  kiln::v1::ArtifactChunk chunk;
  while (reader->Read(&chunk)) {
    if (chunk.offset() != static_cast<int64_t>(bytes.size())) {
      context.TryCancel();
      return absl::DataLossError(absl::StrCat("artifact ", digest, ": chunk at offset ", chunk.offset(),
                                              " after ", bytes.size(), " bytes"));
    }
    bytes += chunk.data();
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return FromGrpc(s, "fetch artifact");
  std::string got = ContentDigest(bytes);
  if (got != digest) {
    return absl::DataLossError(absl::StrCat("artifact ", digest, " arrived with digest ", got));
  }
  return bytes;
}

absl::StatusOr<kiln::v1::TuningReport> KilnClient::Report(const kiln::v1::ReportRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  kiln::v1::TuningReport report;
  grpc::Status s = compile_->Report(&context, request, &report);
  if (!s.ok()) return FromGrpc(s, "report");
  return report;
}

absl::StatusOr<kiln::v1::LookupResponse> KilnClient::Lookup(const kiln::v1::LookupRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  kiln::v1::LookupResponse response;
  grpc::Status s = lookup_->Lookup(&context, request, &response);
  if (!s.ok()) return FromGrpc(s, "lookup");
  return response;
}

namespace {

// One unary AdminService call with a deadline.
template <typename Request, typename Response, typename Call>
absl::StatusOr<Response> AdminCall(const Request& request, Call call, const char* what) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  Response response;
  grpc::Status s = call(&context, request, &response);
  if (!s.ok()) return FromGrpc(s, what);
  return response;
}

}  // namespace

absl::StatusOr<kiln::v1::ListWorkersResponse> KilnClient::ListWorkers() {
  return AdminCall<kiln::v1::ListWorkersRequest, kiln::v1::ListWorkersResponse>(
      {}, [this](auto* c, const auto& q, auto* r) { return admin_->ListWorkers(c, q, r); }, "list workers");
}

absl::StatusOr<kiln::v1::DrainWorkerResponse> KilnClient::DrainWorker(const std::string& worker_id) {
  kiln::v1::DrainWorkerRequest request;
  request.set_worker_id(worker_id);
  return AdminCall<kiln::v1::DrainWorkerRequest, kiln::v1::DrainWorkerResponse>(
      request, [this](auto* c, const auto& q, auto* r) { return admin_->DrainWorker(c, q, r); }, "drain worker");
}

absl::StatusOr<kiln::v1::ListJobsResponse> KilnClient::ListJobs(const kiln::v1::ListJobsRequest& request) {
  return AdminCall<kiln::v1::ListJobsRequest, kiln::v1::ListJobsResponse>(
      request, [this](auto* c, const auto& q, auto* r) { return admin_->ListJobs(c, q, r); }, "list jobs");
}

absl::StatusOr<kiln::v1::CancelJobResponse> KilnClient::CancelJob(int64_t job_id, const std::string& reason) {
  kiln::v1::CancelJobRequest request;
  request.set_job_id(job_id);
  request.set_reason(reason);
  return AdminCall<kiln::v1::CancelJobRequest, kiln::v1::CancelJobResponse>(
      request, [this](auto* c, const auto& q, auto* r) { return admin_->CancelJob(c, q, r); }, "cancel job");
}

absl::StatusOr<kiln::v1::CollectGarbageResponse> KilnClient::CollectGarbage(int64_t max_artifact_bytes) {
  kiln::v1::CollectGarbageRequest request;
  request.set_max_artifact_bytes(max_artifact_bytes);
  return AdminCall<kiln::v1::CollectGarbageRequest, kiln::v1::CollectGarbageResponse>(
      request, [this](auto* c, const auto& q, auto* r) { return admin_->CollectGarbage(c, q, r); },
      "collect garbage");
}

}  // namespace kiln::client
