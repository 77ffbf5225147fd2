// gRPC calls of the Kiln client library.
#include "client/kiln_client.h"

#include <grpcpp/grpcpp.h>

#include <optional>

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

}  // namespace

KilnClient::KilnClient(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(1 << 30);
  channel_ = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  compile_ = kiln::v1::CompileService::NewStub(channel_);
  lookup_ = kiln::v1::LookupService::NewStub(channel_);
}

absl::StatusOr<std::unique_ptr<KilnClient>> KilnClient::Connect(const std::string& address,
                                                                 absl::Duration timeout) {
  auto client = std::make_unique<KilnClient>(address);
  if (!client->channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach kiln-server at ", address, " within ", absl::FormatDuration(timeout)));
  }
  return client;
}

KilnClient::KilnClient(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)),
      compile_(kiln::v1::CompileService::NewStub(channel_)),
      lookup_(kiln::v1::LookupService::NewStub(channel_)) {}

absl::StatusOr<kiln::v1::CompileResult> KilnClient::Compile(
    const kiln::v1::CompileRequest& request,
    const std::function<void(const kiln::v1::Progress&)>& on_progress) {
  grpc::ClientContext context;
  // Long: a compile may tune for hours. The connection is made before (Connect),
  // and a server that goes away fails the stream with UNAVAILABLE at once.
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::hours(12));
  auto reader = compile_->Compile(&context, request);
  kiln::v1::CompileEvent event;
  std::optional<kiln::v1::CompileResult> result;
  while (reader->Read(&event)) {
    if (event.has_progress()) on_progress(event.progress());
    if (event.has_result()) result = event.result();
  }
  grpc::Status s = reader->Finish();
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

}  // namespace kiln::client
