// The worker daemon loop: register, heartbeat, lease, measure, report.
#include "worker/worker.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/cpu_features.h"
#include "base/log.h"
#include "grpcpp/grpcpp.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "worker/device_info.h"
#include "worker/isolation.h"
#include "worker/measurer.h"
#include "worker/package_timing.h"

namespace kiln::worker {
namespace {

const char* ErrorLabel(kiln::v1::MeasureError e) {
  switch (e) {
    case kiln::v1::MEASURE_OK: return "ok";
    case kiln::v1::BUILD_ERROR: return "build_error";
    case kiln::v1::WRONG_ANSWER: return "wrong_answer";
    case kiln::v1::RUNTIME_ERROR: return "runtime_error";
    case kiln::v1::TIMEOUT: return "timeout";
    default: return "unknown";
  }
}

// Sleeps up to `d`, waking early when *stop is set.
void SleepUnlessStopped(absl::Duration d, const std::atomic<bool>* stop) {
  const absl::Time end = absl::Now() + d;
  while (!stop->load()) {
    absl::Duration left = end - absl::Now();
    if (left <= absl::ZeroDuration()) return;
    absl::SleepFor(std::min(left, absl::Milliseconds(50)));
  }
}

std::string Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

void SetDeadline(grpc::ClientContext* ctx, int ms) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

std::string StatusText(const grpc::Status& s) {
  return absl::StrCat(static_cast<int>(s.error_code()), " ", s.error_message());
}

}  // namespace

Worker::Worker(Options options) : options_(std::move(options)) {
  registry_ = std::make_shared<prometheus::Registry>();
  results_family_ = &prometheus::BuildCounter()
                         .Name("kiln_worker_tasks_total")
                         .Help("Measurement tasks finished, by result")
                         .Register(*registry_);
  for (int e = 0; e < 5; ++e) {
    results_family_->Add({{"result", ErrorLabel(static_cast<kiln::v1::MeasureError>(e))}});
  }
  rpc_errors_family_ = &prometheus::BuildCounter()
                            .Name("kiln_worker_rpc_errors_total")
                            .Help("Failed RPCs to the server, by method")
                            .Register(*registry_);
  measure_seconds_ = &prometheus::BuildCounter()
                          .Name("kiln_worker_measure_seconds_total")
                          .Help("Wall time spent building, checking and timing candidates")
                          .Register(*registry_)
                          .Add({});
  registered_gauge_ = &prometheus::BuildGauge()
                           .Name("kiln_worker_registered")
                           .Help("1 while the worker is registered with a server")
                           .Register(*registry_)
                           .Add({});
}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
  }
  cv_.notify_all();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
}

int64_t Worker::results_with(kiln::v1::MeasureError error) const {
  int e = static_cast<int>(error);
  return e >= 0 && e < 5 ? results_by_error_[e].load() : 0;
}

std::string Worker::worker_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return worker_id_;
}

void Worker::CountResult(const kiln::v1::MeasureResult& result) {
  tasks_measured_.fetch_add(1);
  int e = static_cast<int>(result.error());
  if (e >= 0 && e < 5) results_by_error_[e].fetch_add(1);
  results_family_->Add({{"result", ErrorLabel(result.error())}}).Increment();
}

void Worker::CountRpcError(const std::string& rpc) {
  rpc_errors_.fetch_add(1);
  rpc_errors_family_->Add({{"rpc", rpc}}).Increment();
}

absl::Status Worker::Run(std::atomic<bool>* stop) {
  if (options_.server.empty()) return absl::InvalidArgumentError("no server address given");
  if (absl::StartsWith(options_.device, "cuda") || absl::StartsWith(options_.device, "gpu")) return RunGpu(stop);
  absl::StatusOr<kiln::v1::DeviceInfo> device = DescribeDevice(options_.device);
  if (!device.ok()) return device.status();
  device_ = *std::move(device);
  if (device_.kind() != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat("device ", options_.device, " is neither cpu nor cuda:N"));
  }
  if (options_.threads < 1 || options_.threads > kMaxThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads ", options_.threads, " is out of range 1..", kMaxThreads));
  }
  device_.set_measure_threads(options_.threads);
  target_ = CpuTarget::Host();
  if (!options_.target.empty()) {
    absl::string_view name = options_.target;
    absl::ConsumePrefix(&name, "cpu:");
    absl::StatusOr<CpuTarget> named = CpuTarget::Named(std::string(name));
    if (!named.ok()) return absl::InvalidArgumentError(absl::StrCat("--target: ", named.status().message()));
    std::vector<std::string> missing = MissingHostFeatures(named->features);
    if (!missing.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--target ", options_.target, ": this host (", device_.cpu_name(),
                                                     ") cannot run its code; it lacks ",
                                                     absl::StrJoin(missing, ", ")));
    }
    target_ = *named;
    device_.set_cpu_name(named->cpu);
    device_.clear_features();
    for (absl::string_view f : absl::StrSplit(named->features, ',', absl::SkipEmpty())) {
      if (absl::ConsumePrefix(&f, "+")) device_.add_features(std::string(f));
    }
  }
  Log(LogLevel::kInfo, "device described",
      {{"device", options_.device},
       {"model", device_.device_model()},
       {"cpu", device_.cpu_name()},
       {"features", absl::StrJoin(device_.features(), ",")},
       {"cores", absl::StrCat(device_.cores())},
       {"measure_threads", absl::StrCat(options_.threads)},
       {"target", target_.Key()}});
  return Serve(stop);
}

absl::Status Worker::RunGpu(std::atomic<bool>* stop) {
  if (options_.threads != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--threads ", options_.threads, " applies to CPU workers"));
  }
  if (!options_.target.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--target ", options_.target, " applies to CPU workers"));
  }
  DeviceProcess::Options po;
  po.executable = options_.executable;
  po.device = options_.device;
  if (!options_.ptxas.empty()) po.extra_args = {"--ptxas", options_.ptxas};
  absl::StatusOr<std::unique_ptr<DeviceProcess>> process = DeviceProcess::Start(po);
  if (!process.ok()) return process.status();
  device_process_ = *std::move(process);
  device_ = device_process_->device();
  device_.set_measure_threads(1);
  Log(LogLevel::kInfo, "device described",
      {{"device", options_.device},
       {"model", device_.device_model()},
       {"arch", device_.arch()},
       {"memory_bytes", absl::StrCat(device_.memory_bytes())},
       {"driver", device_.driver_version()},
       {"toolkit", device_.toolkit_version()}});
  return Serve(stop);
}

absl::Status Worker::Serve(std::atomic<bool>* stop) {
  if (options_.metrics_port > 0 && exposer_ == nullptr) {
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(absl::StrCat("0.0.0.0:", options_.metrics_port));
      exposer_->RegisterCollectable(registry_);
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("cannot serve metrics on port ", options_.metrics_port, ": ", e.what()));
    }
    Log(LogLevel::kInfo, "serving metrics", {{"port", absl::StrCat(options_.metrics_port)}});
  }

  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, options_.max_backoff_ms);
  args.SetMaxReceiveMessageSize(256 << 20);
  auto credentials = client::MakeChannelCredentials(options_.security);
  if (!credentials.ok()) return credentials.status();
  auto channel = grpc::CreateCustomChannel(options_.server, *credentials, args);
  stub_ = kiln::v1::WorkerService::NewStub(channel);
  artifacts_ = std::make_unique<client::KilnClient>(channel);

  if (!RegisterUntilDone(stop)) return absl::OkStatus();
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = false;
  }
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });

  absl::Duration backoff = absl::Milliseconds(100);
  while (!stop->load()) {
    if (reregister_.exchange(false)) {
      Log(LogLevel::kWarning, "server forgot this worker; registering again",
          {{"worker", worker_id()}});
      if (!RegisterUntilDone(stop)) break;
    }
    kiln::v1::LeaseTasksRequest req;
    req.set_worker_id(worker_id());
    req.set_max_tasks(1);
    req.set_wait_ms(options_.lease_wait_ms);
    kiln::v1::LeaseTasksResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx, options_.lease_wait_ms + options_.rpc_timeout_ms);
    grpc::Status s = stub_->LeaseTasks(&ctx, req, &resp);
    if (!s.ok()) {
      CountRpcError("LeaseTasks");
      Log(LogLevel::kWarning, "lease failed",
          {{"error", StatusText(s)}, {"retry_in", absl::FormatDuration(backoff)}});
      if (s.error_code() == grpc::StatusCode::NOT_FOUND ||
          s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
          s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
        reregister_ = true;  // the server does not know this worker id
      }
      SleepUnlessStopped(backoff, stop);
      backoff = std::min(backoff * 2, absl::Milliseconds(options_.max_backoff_ms));
      continue;
    }
    backoff = absl::Milliseconds(100);
    for (const kiln::v1::MeasureTask& task : resp.tasks()) {
      if (stop->load()) break;
      HandleTask(task, stop);
    }
    if (resp.draining() && resp.tasks().empty()) {
      // An admin drained it (kiln admin drain): everything it held is reported.
      Log(LogLevel::kInfo, "drained by the server; stopping", {{"worker", worker_id()}});
      break;
    }
  }

  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
  }
  cv_.notify_all();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  registered_gauge_->Set(0);
  Log(LogLevel::kInfo, "worker stopped",
      {{"worker", worker_id()}, {"tasks_measured", absl::StrCat(tasks_measured())}});
  return absl::OkStatus();
}

bool Worker::RegisterUntilDone(std::atomic<bool>* stop) {
  registered_gauge_->Set(0);
  kiln::v1::RegisterRequest req;
  req.set_hostname(options_.name.empty() ? Hostname() : options_.name);
  req.set_pid(static_cast<int32_t>(getpid()));
  *req.mutable_device() = device_;
  absl::Duration backoff = absl::Milliseconds(100);
  while (!stop->load()) {
    kiln::v1::RegisterResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx, options_.rpc_timeout_ms);
    grpc::Status s = stub_->Register(&ctx, req, &resp);
    if (s.ok()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        worker_id_ = resp.worker_id();
        int interval = options_.heartbeat_ms > 0 ? options_.heartbeat_ms
                                                 : resp.heartbeat_interval_ms();
        heartbeat_interval_ms_ = interval > 0 ? interval : 1000;
      }
      cv_.notify_all();
      registrations_.fetch_add(1);
      registered_gauge_->Set(1);
      Log(LogLevel::kInfo, "registered",
          {{"worker", resp.worker_id()},
           {"server", options_.server},
           {"target", resp.target_key()},
           {"heartbeat_ms", absl::StrCat(heartbeat_interval_ms_)},
           {"lease_timeout_ms", absl::StrCat(resp.lease_timeout_ms())}});
      return true;
    }
    CountRpcError("Register");
    Log(LogLevel::kWarning, "register failed",
        {{"server", options_.server},
         {"error", StatusText(s)},
         {"retry_in", absl::FormatDuration(backoff)}});
    SleepUnlessStopped(backoff, stop);
    backoff = std::min(backoff * 2, absl::Milliseconds(options_.max_backoff_ms));
  }
  return false;
}

void Worker::HeartbeatLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shutting_down_) {
    cv_.wait_for(lock, std::chrono::milliseconds(heartbeat_interval_ms_),
                 [this] { return shutting_down_; });
    if (shutting_down_) break;
    kiln::v1::HeartbeatRequest req;
    req.set_worker_id(worker_id_);
    for (const std::string& id : held_task_ids_) req.add_held_task_ids(id);
    lock.unlock();
    kiln::v1::HeartbeatResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx, options_.rpc_timeout_ms);
    grpc::Status s = stub_->Heartbeat(&ctx, req, &resp);
    if (!s.ok()) {
      CountRpcError("Heartbeat");
      Log(LogLevel::kWarning, "heartbeat failed",
          {{"worker", req.worker_id()}, {"error", StatusText(s)}});
    } else if (!resp.known()) {
      reregister_ = true;
    }
    lock.lock();
  }
}

void Worker::HandleTask(const kiln::v1::MeasureTask& task, std::atomic<bool>* stop) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_task_ids_.insert(task.task_id());
  }
  Log(LogLevel::kInfo, "leased task",
      {{"task", task.task_id()},
       {"workload", task.workload_key()},
       {"config", task.schedule_config()}});

  absl::Duration timeout = absl::Milliseconds(options_.task_timeout_ms);
  if (task.deadline_unix_ms() > 0) {
    absl::Duration left = absl::FromUnixMillis(task.deadline_unix_ms()) - absl::Now();
    timeout = std::min(timeout, std::max(left, absl::Seconds(1)));
  }

  const absl::Time start = absl::Now();
  // A whole-model check: its packages are fetched here, before any child is
  // forked (gRPC does not survive a fork).
  std::vector<std::string> packages;
  std::string fetch_error;
  for (const std::string& digest : task.packages()) {
    absl::StatusOr<std::string> bytes = artifacts_->FetchArtifact(digest);
    if (!bytes.ok()) {
      fetch_error = absl::StrCat("cannot fetch package ", digest, ": ", bytes.status().message());
      break;
    }
    packages.push_back(*std::move(bytes));
  }
  auto measure = [&]() -> kiln::v1::MeasureResult {
    if (task.packages_size() == 0) return MeasureAsResult(task, target_);
    return TimePackagesAsResult(task, packages);
  };
  kiln::v1::MeasureResult result;
  if (!fetch_error.empty()) {
    result.set_error(kiln::v1::RUNTIME_ERROR);
    result.set_error_message(fetch_error);
  } else if (device_process_ != nullptr || options_.isolate) {
    absl::StatusOr<kiln::v1::MeasureResult> r;
    if (device_process_ != nullptr) {
      kiln::v1::MeasureTask sent = task;
      for (std::string& bytes : packages) sent.add_package_bytes(std::move(bytes));
      r = device_process_->Measure(sent, timeout, stop);
    } else {
      if (task.packages_size() == 0) {
        // The workload's reference, once, in a child of its own: this and
        // every later candidate's child inherit it instead of running the
        // interpreter again. Failing, the measurement meets it and says so.
        const absl::Time start = absl::Now();
        if (absl::Status s = CacheReferenceIsolated(task, timeout, stop); !s.ok()) {
          LogDebug("no cached reference", {{"task", task.task_id()}, {"error", std::string(s.message())}});
        }
        timeout = std::max(timeout - (absl::Now() - start), absl::Seconds(1));
      }
      r = RunIsolated(task.task_id(), measure, timeout, stop);
    }
    if (!r.ok()) {
      // Cancelled by shutdown, or no child (or device process) could measure
      // it: report nothing; the lease expires and the task is measured again.
      Log(r.status().code() == absl::StatusCode::kCancelled ? LogLevel::kInfo : LogLevel::kError,
          "task abandoned", {{"task", task.task_id()}, {"error", std::string(r.status().message())}});
      std::lock_guard<std::mutex> lock(mu_);
      held_task_ids_.erase(task.task_id());
      return;
    }
    result = *std::move(r);
  } else {
    result = measure();
  }
  result.set_task_id(task.task_id());
  measure_seconds_->Increment(absl::ToDoubleSeconds(absl::Now() - start));
  CountResult(result);

  LogFields fields = {{"task", task.task_id()}, {"result", ErrorLabel(result.error())}};
  if (result.error() == kiln::v1::MEASURE_OK) {
    fields.push_back({"median_ms", absl::StrCat(result.median_ms())});
    fields.push_back({"p10_ms", absl::StrCat(result.p10_ms())});
    fields.push_back({"p90_ms", absl::StrCat(result.p90_ms())});
    fields.push_back({"repeats", absl::StrCat(result.repeats())});
  } else {
    fields.push_back({"error", result.error_message()});
  }
  Log(result.error() == kiln::v1::MEASURE_OK ? LogLevel::kInfo : LogLevel::kWarning,
      "measured task", fields);

  Report(result, stop);
  std::lock_guard<std::mutex> lock(mu_);
  held_task_ids_.erase(task.task_id());
}

void Worker::Report(const kiln::v1::MeasureResult& result, std::atomic<bool>* stop) {
  kiln::v1::ReportResultsRequest req;
  *req.add_results() = result;
  absl::Duration backoff = absl::Milliseconds(100);
  constexpr int kAttempts = 6;
  for (int attempt = 1; attempt <= kAttempts && !stop->load(); ++attempt) {
    req.set_worker_id(worker_id());
    kiln::v1::ReportResultsResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx, options_.rpc_timeout_ms);
    grpc::Status s = stub_->ReportResults(&ctx, req, &resp);
    if (s.ok()) {
      if (resp.rejected() > 0) {
        Log(LogLevel::kWarning, "result rejected: lease no longer held",
            {{"task", result.task_id()}});
      }
      return;
    }
    CountRpcError("ReportResults");
    Log(LogLevel::kWarning, "report failed",
        {{"task", result.task_id()},
         {"attempt", absl::StrCat(attempt)},
         {"error", StatusText(s)}});
    SleepUnlessStopped(backoff, stop);
    backoff = std::min(backoff * 2, absl::Milliseconds(options_.max_backoff_ms));
  }
  Log(LogLevel::kError, "result dropped; the lease will expire", {{"task", result.task_id()}});
}

}  // namespace kiln::worker
