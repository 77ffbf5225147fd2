// Prometheus metrics of the compile server. One registry per server; an
// Exposer serves it on --metrics-port when that is set.
#pragma once

#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/status/status.h"

namespace kiln::server {

class ServerMetrics {
  // Declared first: the metric references below are initialised from it.
  std::shared_ptr<prometheus::Registry> registry_;

 public:
  ServerMetrics();
  // Serves /metrics on `address` ("127.0.0.1:9464"). Throws nothing;
  // UNAVAILABLE naming the address and the reason when it cannot bind it (a
  // port in use).
  absl::Status Expose(const std::string& address);
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  prometheus::Counter& compiles_ok;
  prometheus::Counter& compiles_failed;
  prometheus::Counter& trials_measured;
  prometheus::Counter& tasks_reported;
  prometheus::Counter& artifacts_fetched;
  prometheus::Gauge& workers;

 private:
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace kiln::server
