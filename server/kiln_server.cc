// Wiring of the compile server: database, broker, tuner, pipeline, services.
#include "server/kiln_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <limits>

#include "absl/strings/str_cat.h"
#include "base/file.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "server/admin_service.h"
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
  // The scrape-time collectors read the broker and the database: stop
  // serving /metrics before they go.
  ~State() {
    if (metrics) metrics->StopExposing();
    if (db) db->ObserveWriteTransactions(nullptr);
  }

  std::unique_ptr<tuningdb::TuningDb> db;
  std::unique_ptr<ServerMetrics> metrics;
  std::unique_ptr<TaskBroker> broker;
  // Outlives the background compiles holding its slots, and the tuner's jobs
  // charging the clients whose compiles left them (Tuner::Tune).
  std::unique_ptr<AdmissionControl> admission;
  std::unique_ptr<Tuner> tuner;
  std::unique_ptr<ModelChecker> checker;
  std::unique_ptr<CompilePipeline> pipeline;
  std::unique_ptr<ProgressiveCompiles> progressive;  // destroyed before the pipeline and tuner it uses
  std::unique_ptr<CompileServiceImpl> compile_service;
  std::unique_ptr<WorkerServiceImpl> worker_service;
  std::unique_ptr<LookupServiceImpl> lookup_service;
  std::unique_ptr<AdminServiceImpl> admin_service;
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
  ServerMetrics* metrics = state->metrics.get();
  state->db->ObserveWriteTransactions([metrics](double seconds) { metrics->DbWriteTransaction(seconds); });
  TaskBroker::Options bopts;
  bopts.heartbeat_interval = options.heartbeat_interval;
  bopts.worker_timeout = options.worker_timeout;
  state->broker = std::make_unique<TaskBroker>(bopts, metrics);
  metrics->AddCollector(FarmCollector(state->broker.get()));
  metrics->AddCollector(StorageCollector(state->db->path(), state->db->artifact_dir()));
  if (!options.metrics_address.empty()) RETURN_IF_ERROR(metrics->Expose(options.metrics_address));
  state->tuner = std::make_unique<Tuner>(state->db.get(), state->broker.get(),
                                         Tuner::Options{options.worker_wait});
  state->checker = std::make_unique<ModelChecker>(state->broker.get(), ModelChecker::Options{});
  state->pipeline = std::make_unique<CompilePipeline>(state->db.get(), state->tuner.get(), state->checker.get(),
                                                      options.model_limits, options.ptxas);
  state->admission = std::make_unique<AdmissionControl>(options.admission);
  metrics->AddCollector(state->admission->Collector());
  state->progressive = std::make_unique<ProgressiveCompiles>(state->pipeline.get());
  state->compile_service = std::make_unique<CompileServiceImpl>(state->pipeline.get(), state->progressive.get(),
                                                                state->db.get(), state->metrics.get(),
                                                                state->admission.get());
  state->worker_service = std::make_unique<WorkerServiceImpl>(state->broker.get(), state->metrics.get(),
                                                              state->db.get());
  state->lookup_service =
      std::make_unique<LookupServiceImpl>(state->pipeline.get(), state->db.get(), state->progressive.get(), metrics);
  state->admin_service = std::make_unique<AdminServiceImpl>(state->broker.get(), state->tuner.get(), state->db.get(),
                                                            state->worker_service.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  std::shared_ptr<AuthFile> auth;
  if (!options.auth_file.empty()) {
    ASSIGN_OR_RETURN(auth, AuthFile::Open(options.auth_file));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   MakeServerCredentials(options.tls, std::move(auth)));
  builder.AddListeningPort(options.listen, credentials, &state->port);
  // No SO_REUSEPORT: a second server on a port in use must fail, not share it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (options.max_request_bytes <= 0 || options.max_request_bytes > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("--max-request-mb must be 1 to ",
                                                   std::numeric_limits<int>::max() >> 20, ", not ",
                                                   options.max_request_bytes >> 20));
  }
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_request_bytes));
  builder.SetMaxSendMessageSize(64 << 20);
  builder.RegisterService(state->compile_service.get());
  builder.RegisterService(state->worker_service.get());
  builder.RegisterService(state->lookup_service.get());
  builder.RegisterService(state->admin_service.get());
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

int KilnServer::metrics_port() const { return state_->metrics->port(); }

std::string KilnServer::address() const { return absl::StrCat(state_->host, ":", state_->port); }

void KilnServer::Wait() { state_->server->Wait(); }

int KilnServer::active_tuning_jobs() const { return state_->tuner->active_jobs(); }

AdmissionControl& KilnServer::admission() { return *state_->admission; }

void KilnServer::Shutdown() {
  if (state_ && state_->server) {
    state_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
}

}  // namespace kiln::server
