// Prometheus metrics of the compile server. One registry per server; an
// Exposer serves it on --metrics when that is set. Events are counted where
// they happen (the compile and lookup services, the task broker, the
// database's write transactions); the state others own (queues, leases,
// workers, database and artifact files) is sampled by collectors at scrape
// time, so a gauge is never stale. Every name, unit and label:
// docs/operations.md ("Metrics").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include "absl/status/status.h"
#include "kiln/v1/worker.pb.h"

namespace kiln::server {

class TaskBroker;

// Why the broker took a lease back (kiln_leases_lost_total{reason}).
enum class LeaseLoss { kWorkerSilent, kDeadline };

class ServerMetrics {
  // Declared first: the metric references below are initialised from it.
  std::shared_ptr<prometheus::Registry> registry_;

 public:
  // Families computed at scrape time, on the exposer's thread.
  using Collector = std::function<std::vector<prometheus::MetricFamily>()>;

  ServerMetrics();
  ~ServerMetrics();
  // Serves /metrics on `address` ("127.0.0.1:9464"; port 0 picks a free
  // port). Throws nothing; UNAVAILABLE naming the address and the reason when
  // it cannot bind it (a port in use).
  absl::Status Expose(const std::string& address);
  // The port /metrics is served on; 0 when not exposed.
  int port() const;
  // Stops serving /metrics, waiting for a scrape in progress. Call it before
  // anything a collector reads goes away.
  void StopExposing();
  // Adds families to every scrape: gauges of state that something else owns.
  void AddCollector(Collector collector);
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // A compile request ended: `seconds` from request to result. A successful
  // compile that measured nothing (every group's schedule from the database
  // or a default) is a cache hit.
  void CompileFinished(const absl::Status& status, int64_t trials_measured, double seconds);
  void LookupAnswered(bool found);
  void ArtifactFetched();
  // The broker accepted a result from the worker holding the task: `worker` is
  // the name it registered with, `device` its device model, `lease_seconds`
  // from lease to result.
  void ResultAccepted(const std::string& worker, const std::string& device, kiln::v1::MeasureError error,
                      double lease_seconds);
  void ResultsReported(int accepted);
  void TaskSubmitted();
  void LeaseLost(LeaseLoss reason);
  // A task recorded as TIMEOUT by the broker after losing its lease too often.
  void TaskAbandoned();
  // One write transaction of the tuning database, BEGIN IMMEDIATE to COMMIT.
  void DbWriteTransaction(double seconds);
  // A request refused for going over a limit, named by its kiln-server flag
  // ("max-compiles-per-client"; server/admission.h).
  void AdmissionRefused(const std::string& limit);

 private:
  prometheus::Family<prometheus::Counter>& compiles_;
  prometheus::Counter& trials_measured_;
  prometheus::Family<prometheus::Histogram>& compile_seconds_;
  prometheus::Family<prometheus::Counter>& compile_cache_;
  prometheus::Family<prometheus::Counter>& lookups_;
  prometheus::Counter& artifacts_fetched_;
  prometheus::Counter& tasks_reported_;
  prometheus::Counter& tasks_submitted_;
  prometheus::Family<prometheus::Counter>& measurements_;
  prometheus::Histogram& lease_seconds_;
  prometheus::Family<prometheus::Counter>& leases_lost_;
  prometheus::Counter& tasks_abandoned_;
  prometheus::Histogram& db_write_seconds_;
  prometheus::Family<prometheus::Counter>& admission_refused_;

  // The scrape's view: the registry followed by every collector's families.
  class Scrape;
  std::shared_ptr<Scrape> scrape_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

// kiln_task_queue_depth, kiln_tasks_leased, kiln_oldest_lease_age_seconds,
// kiln_oldest_queued_task_age_seconds (per record target key), kiln_workers
// and kiln_worker_heartbeat_age_seconds, from the broker at scrape time.
ServerMetrics::Collector FarmCollector(const TaskBroker* broker);

// kiln_db_size_bytes{file="db|wal"}, kiln_artifact_store_bytes and _files,
// kiln_db_filesystem_free_bytes and _size_bytes, from the files at scrape
// time (a walk of the artifact folder: one stat per blob).
ServerMetrics::Collector StorageCollector(const std::string& db_path, const std::string& artifact_dir);

}  // namespace kiln::server
