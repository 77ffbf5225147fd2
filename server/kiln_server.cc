// Wiring of the compile server: database, broker, tuner, pipeline, services.
#include "server/kiln_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "base/file.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "server/compile_pipeline.h"
#include "server/model_check.h"
#include "server/compile_service.h"
#include "server/lookup_service.h"
#include "server/metrics.h"
#include "server/task_broker.h"
#include "server/tuner.h"
#include "server/worker_service.h"
#include "tuning_db/tuning_db.h"

namespace kiln::server {

struct KilnServer::State {
  std::unique_ptr<tuningdb::TuningDb> db;
  std::unique_ptr<ServerMetrics> metrics;
  std::unique_ptr<TaskBroker> broker;
  std::unique_ptr<Tuner> tuner;
  std::unique_ptr<ModelChecker> checker;
  std::unique_ptr<CompilePipeline> pipeline;
  std::unique_ptr<ProgressiveCompiles> progressive;  // destroyed before the pipeline and tuner it uses
  std::unique_ptr<CompileServiceImpl> compile_service;
  std::unique_ptr<WorkerServiceImpl> worker_service;
  std::unique_ptr<LookupServiceImpl> lookup_service;
  std::unique_ptr<grpc::Server> server;
  std::string host;
  int port = 0;
};

KilnServer::KilnServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

KilnServer::~KilnServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<KilnServer>> KilnServer::Start(const ServerOptions& options) {
  auto state = std::make_unique<State>();
  if (options.db_path.empty()) return absl::InvalidArgumentError("--db is required");
  auto db = tuningdb::TuningDb::Open(options.db_path);
  if (!db.ok()) return db.status();
  state->db = std::move(*db);
  state->metrics = std::make_unique<ServerMetrics>();
  if (!options.metrics_address.empty()) RETURN_IF_ERROR(state->metrics->Expose(options.metrics_address));
  TaskBroker::Options bopts;
  bopts.heartbeat_interval = options.heartbeat_interval;
  bopts.worker_timeout = options.worker_timeout;
  state->broker = std::make_unique<TaskBroker>(bopts);
  state->tuner = std::make_unique<Tuner>(state->db.get(), state->broker.get(),
                                         Tuner::Options{options.worker_wait});
  state->checker = std::make_unique<ModelChecker>(state->broker.get(), ModelChecker::Options{});
  state->pipeline = std::make_unique<CompilePipeline>(state->db.get(), state->tuner.get(), state->checker.get());
  state->progressive = std::make_unique<ProgressiveCompiles>(state->pipeline.get());
  state->compile_service = std::make_unique<CompileServiceImpl>(state->pipeline.get(), state->progressive.get(),
                                                                state->db.get(), state->metrics.get());
  state->worker_service = std::make_unique<WorkerServiceImpl>(state->broker.get(), state->metrics.get(),
                                                              state->db.get());
  state->lookup_service =
      std::make_unique<LookupServiceImpl>(state->pipeline.get(), state->db.get(), state->progressive.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &state->port);
  // No SO_REUSEPORT: a second server on a port in use must fail, not share it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(1 << 30);
  builder.SetMaxSendMessageSize(64 << 20);
  builder.RegisterService(state->compile_service.get());
  builder.RegisterService(state->worker_service.get());
  builder.RegisterService(state->lookup_service.get());
  state->server = builder.BuildAndStart();
  if (!state->server || state->port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen, ": the port is in use or the address is not this host's"));
  }
  state->host = options.listen.substr(0, options.listen.rfind(':'));
  if (state->host.empty() || state->host == "0.0.0.0" || state->host == "[::]") state->host = "127.0.0.1";
  if (!options.port_file.empty()) {
    if (absl::Status s = WriteFileAtomic(options.port_file, absl::StrCat(state->port, "\n")); !s.ok()) {
      return absl::UnavailableError(absl::StrCat("cannot write port file: ", s.message()));
    }
  }
  // Tuning jobs a previous server left unfinished go on in the background; their
  // tasks wait in the broker for a worker of their target.
  if (absl::StatusOr<int> resumed = state->tuner->ResumeUnfinishedJobs(); !resumed.ok()) {
    LogWarn("cannot resume unfinished tuning jobs", {{"error", resumed.status().ToString()}});
  } else if (*resumed > 0) {
    LogInfo("resumed unfinished tuning jobs", {{"jobs", absl::StrCat(*resumed)}});
  }
  LogInfo("server listening", {{"address", absl::StrCat(state->host, ":", state->port)},
                               {"db", options.db_path}});
  return std::unique_ptr<KilnServer>(new KilnServer(std::move(state)));
}

int KilnServer::port() const { return state_->port; }

std::string KilnServer::address() const { return absl::StrCat(state_->host, ":", state_->port); }

void KilnServer::Wait() { state_->server->Wait(); }

int KilnServer::active_tuning_jobs() const { return state_->tuner->active_jobs(); }

void KilnServer::Shutdown() {
  if (state_ && state_->server) {
    state_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
}

}  // namespace kiln::server
