// The client library of Kiln's services: remote compile with streamed
// progress, artifact download verified by digest, and cached lookup.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/channel_credentials.h"
#include "kiln/v1/admin.grpc.pb.h"
#include "kiln/v1/compile.grpc.pb.h"
#include "kiln/v1/lookup.grpc.pb.h"

namespace kiln::client {

// Every call fails with UNAVAILABLE at once when the server cannot be reached;
// Connect first waits a bounded time for it (a server still starting up).
class KilnClient {
 public:
  // A client whose channel is connected: waits up to `timeout` for the server
  // at `address` to accept a connection, else UNAVAILABLE "cannot reach
  // kiln-server at ADDRESS within 10 s".
  static absl::StatusOr<std::unique_ptr<KilnClient>> Connect(const std::string& address, absl::Duration timeout,
                                                             const ChannelSecurity& security = {});

  // Plaintext (a test's or an embedded farm's server).
  explicit KilnClient(const std::string& address);
  // Over a channel the caller made (a worker shares its WorkerService channel).
  explicit KilnClient(std::shared_ptr<grpc::Channel> channel);

  // Streams the compile; calls on_progress for every progress event; returns
  // the result. The call does not wait for a server that is away (Connect does).
  // `deadline` travels with the call: the server stops the compile when it
  // passes (queueing and tuning included), and the call fails with
  // DEADLINE_EXCEEDED.
  absl::StatusOr<kiln::v1::CompileResult> Compile(
      const kiln::v1::CompileRequest& request,
      const std::function<void(const kiln::v1::Progress&)>& on_progress,
      absl::Duration deadline = absl::Hours(12));
  // The artifact's bytes; fails with DATA_LOSS if they do not hash to `digest`.
  absl::StatusOr<std::string> FetchArtifact(const std::string& digest);
  absl::StatusOr<kiln::v1::LookupResponse> Lookup(const kiln::v1::LookupRequest& request);
  // The database's record of tuning a model or a job (read-only).
  absl::StatusOr<kiln::v1::TuningReport> Report(const kiln::v1::ReportRequest& request);

  // AdminService (the admin role): workers, drain, tuning jobs, cancel, gc.
  absl::StatusOr<kiln::v1::ListWorkersResponse> ListWorkers();
  absl::StatusOr<kiln::v1::DrainWorkerResponse> DrainWorker(const std::string& worker_id);
  absl::StatusOr<kiln::v1::ListJobsResponse> ListJobs(const kiln::v1::ListJobsRequest& request);
  absl::StatusOr<kiln::v1::CancelJobResponse> CancelJob(int64_t job_id, const std::string& reason);
  absl::StatusOr<kiln::v1::CollectGarbageResponse> CollectGarbage(int64_t max_artifact_bytes);

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<kiln::v1::CompileService::Stub> compile_;
  std::unique_ptr<kiln::v1::LookupService::Stub> lookup_;
  std::unique_ptr<kiln::v1::AdminService::Stub> admin_;
};

}  // namespace kiln::client
