// Metric families of the compile server.
#include "server/metrics.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <map>
#include <system_error>
#include <tuple>
#include <utility>

#include <prometheus/collectable.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/driver/version.h"
#include "server/task_broker.h"
#include "tuning_db/schema.h"

namespace kiln::server {
namespace {

// Compile requests take from a fraction of a second (every schedule in the
// database) to hours (a whole-model budget).
const prometheus::Histogram::BucketBoundaries kCompileBuckets = {0.05, 0.1, 0.25, 0.5, 1,   2.5,  5,    10,
                                                                 30,   60,  120,  300, 600, 1800, 3600, 7200};
// A lease: one candidate built, checked and timed (the worker's task timeout is 60 s).
const prometheus::Histogram::BucketBoundaries kLeaseBuckets = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
// A write transaction: WAL appends in batches; the busy timeout is 5 s.
const prometheus::Histogram::BucketBoundaries kDbWriteBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                                 0.1,    0.25,  0.5,    1,     2.5,  5,     10};

// "ok", "build_error", "wrong_answer", "runtime_error", "timeout": the
// record error names (tuningdb::RecordErrorName) spelled from the wire enum.
std::string ResultLabel(kiln::v1::MeasureError error) {
  if (error == kiln::v1::MEASURE_OK) return "ok";
  std::string name = kiln::v1::MeasureError_Name(error);
  return name.empty() ? "unknown" : absl::AsciiStrToLower(name);
}

std::string OrUnknown(const std::string& s) { return s.empty() ? "unknown" : s; }

prometheus::MetricFamily GaugeFamily(std::string name, std::string help) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = prometheus::MetricType::Gauge;
  return f;
}

void AddSample(prometheus::MetricFamily& family, std::vector<prometheus::ClientMetric::Label> labels, double value) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  family.metric.push_back(std::move(m));
}

}  // namespace

// The collectable the exposer scrapes: the registry's families, then every
// collector's. Collectors run under mu_, so StopExposing (which waits for a
// scrape in progress) and AddCollector never race a scrape.
class ServerMetrics::Scrape : public prometheus::Collectable {
 public:
  explicit Scrape(std::shared_ptr<prometheus::Registry> registry) : registry_(std::move(registry)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> families = registry_->Collect();
    std::lock_guard<std::mutex> lock(mu_);
    for (const Collector& collector : collectors_) {
      for (prometheus::MetricFamily& f : collector()) families.push_back(std::move(f));
    }
    return families;
  }

  void Add(Collector collector) {
    std::lock_guard<std::mutex> lock(mu_);
    collectors_.push_back(std::move(collector));
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  mutable std::mutex mu_;
  std::vector<Collector> collectors_;
};

// Members are references into families the registry owns.
ServerMetrics::ServerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      compiles_(prometheus::BuildCounter()
                    .Name("kiln_compiles_total")
                    .Help("Compile requests by outcome")
                    .Register(*registry_)),
      trials_measured_(prometheus::BuildCounter()
                           .Name("kiln_trials_measured_total")
                           .Help("Candidate schedules measured by workers for compiles")
                           .Register(*registry_)
                           .Add({})),
      compile_seconds_(prometheus::BuildHistogram()
                           .Name("kiln_compile_duration_seconds")
                           .Help("Compile requests from request to result; result: hit (nothing measured), tuned, "
                                 "error")
                           .Register(*registry_)),
      compile_cache_(prometheus::BuildCounter()
                         .Name("kiln_compile_cache_requests_total")
                         .Help("Successful compiles by whether every group's schedule came from the database with "
                               "no trial measured (hit) or not (miss)")
                         .Register(*registry_)),
      lookups_(prometheus::BuildCounter()
                   .Name("kiln_lookups_total")
                   .Help("Package lookups by result (hit: a package was found)")
                   .Register(*registry_)),
      artifacts_fetched_(prometheus::BuildCounter()
                             .Name("kiln_artifacts_fetched_total")
                             .Help("Artifacts streamed to clients")
                             .Register(*registry_)
                             .Add({})),
      tasks_reported_(prometheus::BuildCounter()
                          .Name("kiln_task_results_total")
                          .Help("Measurement results reported by workers and accepted")
                          .Register(*registry_)
                          .Add({})),
      tasks_submitted_(prometheus::BuildCounter()
                           .Name("kiln_tasks_submitted_total")
                           .Help("Measurement tasks queued (identical in-flight tasks count once)")
                           .Register(*registry_)
                           .Add({})),
      measurements_(prometheus::BuildCounter()
                        .Name("kiln_measurements_total")
                        .Help("Measurement results accepted, by worker name, device model and result (ok or the "
                              "record error: build_error, wrong_answer, runtime_error, timeout)")
                        .Register(*registry_)),
      lease_seconds_(prometheus::BuildHistogram()
                         .Name("kiln_lease_duration_seconds")
                         .Help("From lease to accepted result")
                         .Register(*registry_)
                         .Add({}, kLeaseBuckets)),
      leases_lost_(prometheus::BuildCounter()
                       .Name("kiln_leases_lost_total")
                       .Help("Leases taken back and re-queued, by reason: worker_silent, deadline")
                       .Register(*registry_)),
      tasks_abandoned_(prometheus::BuildCounter()
                           .Name("kiln_tasks_abandoned_total")
                           .Help("Tasks recorded as timeout after losing their lease too many times")
                           .Register(*registry_)
                           .Add({})),
      db_write_seconds_(prometheus::BuildHistogram()
                            .Name("kiln_db_write_transaction_seconds")
                            .Help("Write transactions of the tuning database, BEGIN IMMEDIATE (with its wait for "
                                  "the write lock) to COMMIT")
                            .Register(*registry_)
                            .Add({}, kDbWriteBuckets)),
      admission_refused_(prometheus::BuildCounter()
                             .Name("kiln_admission_refused_total")
                             .Help("Requests refused with RESOURCE_EXHAUSTED, by the limit they went over (its "
                                   "kiln-server flag)")
                             .Register(*registry_)),
      scrape_(std::make_shared<Scrape>(registry_)) {
  // Series that exist from the start, so that rates and ratios have a zero.
  compiles_.Add({{"outcome", "ok"}});
  compiles_.Add({{"outcome", "error"}});
  for (const char* result : {"hit", "tuned", "error"}) compile_seconds_.Add({{"result", result}}, kCompileBuckets);
  for (const char* result : {"hit", "miss"}) {
    compile_cache_.Add({{"result", result}});
    lookups_.Add({{"result", result}});
  }
  for (const char* reason : {"worker_silent", "deadline"}) leases_lost_.Add({{"reason", reason}});
  prometheus::BuildGauge()
      .Name("kiln_build_info")
      .Help("Always 1: the server's version, schedule-space version and database schema version")
      .Register(*registry_)
      .Add({{"version", kCompilerVersion},
            {"schedule_space_version", absl::StrCat(kScheduleSpaceVersion)},
            {"db_schema_version", absl::StrCat(tuningdb::kSchemaVersion)}})
      .Set(1);
}

ServerMetrics::~ServerMetrics() { StopExposing(); }

void ServerMetrics::AdmissionRefused(const std::string& limit) { admission_refused_.Add({{"limit", limit}}).Increment(); }

absl::Status ServerMetrics::Expose(const std::string& address) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address);
    exposer_->RegisterCollectable(scrape_);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
}

int ServerMetrics::port() const {
  if (exposer_ == nullptr) return 0;
  std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void ServerMetrics::StopExposing() { exposer_.reset(); }

void ServerMetrics::AddCollector(Collector collector) { scrape_->Add(std::move(collector)); }

void ServerMetrics::CompileFinished(const absl::Status& status, int64_t trials_measured, double seconds) {
  if (!status.ok()) {
    compiles_.Add({{"outcome", "error"}}).Increment();
    compile_seconds_.Add({{"result", "error"}}, kCompileBuckets).Observe(seconds);
    return;
  }
  const bool hit = trials_measured == 0;
  compiles_.Add({{"outcome", "ok"}}).Increment();
  trials_measured_.Increment(static_cast<double>(trials_measured));
  compile_seconds_.Add({{"result", hit ? "hit" : "tuned"}}, kCompileBuckets).Observe(seconds);
  compile_cache_.Add({{"result", hit ? "hit" : "miss"}}).Increment();
}

void ServerMetrics::LookupAnswered(bool found) { lookups_.Add({{"result", found ? "hit" : "miss"}}).Increment(); }

void ServerMetrics::ArtifactFetched() { artifacts_fetched_.Increment(); }

void ServerMetrics::ResultAccepted(const std::string& worker, const std::string& device, kiln::v1::MeasureError error,
                                   double lease_seconds) {
  measurements_.Add({{"worker", OrUnknown(worker)}, {"device", OrUnknown(device)}, {"result", ResultLabel(error)}})
      .Increment();
  lease_seconds_.Observe(lease_seconds);
}

void ServerMetrics::ResultsReported(int accepted) { tasks_reported_.Increment(accepted); }

void ServerMetrics::TaskSubmitted() { tasks_submitted_.Increment(); }

void ServerMetrics::LeaseLost(LeaseLoss reason) {
  leases_lost_.Add({{"reason", reason == LeaseLoss::kWorkerSilent ? "worker_silent" : "deadline"}}).Increment();
}

void ServerMetrics::TaskAbandoned() { tasks_abandoned_.Increment(); }

void ServerMetrics::DbWriteTransaction(double seconds) { db_write_seconds_.Observe(seconds); }

ServerMetrics::Collector FarmCollector(const TaskBroker* broker) {
  return [broker] {
    const TaskBroker::FarmState state = broker->State();
    auto queued = GaugeFamily("kiln_task_queue_depth", "Measurement tasks waiting for a worker, by record target key");
    auto leased = GaugeFamily("kiln_tasks_leased", "Measurement tasks leased to a worker, by record target key");
    auto queue_age = GaugeFamily("kiln_oldest_queued_task_age_seconds",
                                 "Age of the oldest task waiting for a worker (0: none), by record target key");
    auto lease_age = GaugeFamily("kiln_oldest_lease_age_seconds",
                                 "Age of the oldest lease not yet reported (0: none), by record target key");
    for (const auto& [target, q] : state.queues) {
      AddSample(queued, {{"target", target}}, static_cast<double>(q.queued));
      AddSample(leased, {{"target", target}}, static_cast<double>(q.leased));
      AddSample(queue_age, {{"target", target}}, q.oldest_queued_seconds);
      AddSample(lease_age, {{"target", target}}, q.oldest_lease_seconds);
    }
    // Two workers may share a name and a device model (one host, two equal
    // GPUs): their series are merged, as a scrape may not repeat a series.
    std::map<std::tuple<std::string, std::string, std::string>, int> workers;  // target, device, space -> count
    std::map<std::pair<std::string, std::string>, double> silent;              // worker, device -> seconds
    for (const TaskBroker::WorkerState& w : state.workers) {
      const std::string device = OrUnknown(w.view.device.device_model());
      ++workers[{w.view.target_key, device, absl::StrCat(w.view.device.space_version())}];
      double& s = silent[{OrUnknown(w.view.hostname), device}];
      s = std::max(s, w.silent_seconds);
    }
    auto worker_count =
        GaugeFamily("kiln_workers", "Registered workers, by target key, device model and schedule-space version");
    for (const auto& [key, n] : workers) {
      const auto& [target, device, space] = key;
      AddSample(worker_count, {{"target", target}, {"device", device}, {"space_version", space}}, n);
    }
    auto heartbeat = GaugeFamily("kiln_worker_heartbeat_age_seconds",
                                 "Seconds since a registered worker was last heard from, by worker name and device "
                                 "model (the series goes when the server drops the worker)");
    for (const auto& [key, s] : silent) AddSample(heartbeat, {{"worker", key.first}, {"device", key.second}}, s);
    std::vector<prometheus::MetricFamily> out;
    for (auto* f : {&queued, &leased, &queue_age, &lease_age, &worker_count, &heartbeat}) out.push_back(std::move(*f));
    return out;
  };
}

ServerMetrics::Collector StorageCollector(const std::string& db_path, const std::string& artifact_dir) {
  return [db_path, artifact_dir] {
    namespace fs = std::filesystem;
    auto size_of = [](const std::string& path) {
      std::error_code ec;
      const std::uintmax_t n = fs::file_size(path, ec);
      return ec ? 0.0 : static_cast<double>(n);
    };
    auto db = GaugeFamily("kiln_db_size_bytes", "Size of the tuning database's files: db (the file), wal (its log)");
    AddSample(db, {{"file", "db"}}, size_of(db_path));
    AddSample(db, {{"file", "wal"}}, size_of(db_path + "-wal"));

    double bytes = 0, files = 0;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(artifact_dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code fe;
      if (!it->is_regular_file(fe) || fe) continue;
      const std::uintmax_t n = it->file_size(fe);
      if (fe) continue;  // removed by a gc since the iterator listed it
      bytes += static_cast<double>(n);
      files += 1;
    }
    auto store_bytes = GaugeFamily("kiln_artifact_store_bytes", "Bytes of the artifact store's blob files");
    AddSample(store_bytes, {}, bytes);
    auto store_files = GaugeFamily("kiln_artifact_store_files", "Blob files in the artifact store");
    AddSample(store_files, {}, files);

    // The file system that holds the database (and, beside it, the artifacts).
    const fs::path dir = fs::absolute(fs::path(db_path), ec).parent_path();
    const fs::space_info space = fs::space(dir, ec);
    auto free_bytes =
        GaugeFamily("kiln_db_filesystem_free_bytes", "Bytes free to the server on the database's file system");
    auto size_bytes = GaugeFamily("kiln_db_filesystem_size_bytes", "Size of the database's file system");
    if (!ec) {
      AddSample(free_bytes, {}, static_cast<double>(space.available));
      AddSample(size_bytes, {}, static_cast<double>(space.capacity));
    }
    std::vector<prometheus::MetricFamily> out;
    for (auto* f : {&db, &store_bytes, &store_files, &free_bytes, &size_bytes}) {
      if (!f->metric.empty()) out.push_back(std::move(*f));
    }
    return out;
  };
}

}  // namespace kiln::server
