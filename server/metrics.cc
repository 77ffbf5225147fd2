// Metric families of the compile server.
#include "server/metrics.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace kiln::server {
// Members are references into families the registry owns.
ServerMetrics::ServerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      compiles_ok(prometheus::BuildCounter()
                      .Name("kiln_compiles_total")
                      .Help("Compile requests by outcome")
                      .Register(*registry_)
                      .Add({{"outcome", "ok"}})),
      compiles_failed(prometheus::BuildCounter()
                          .Name("kiln_compiles_total")
                          .Help("Compile requests by outcome")
                          .Register(*registry_)
                          .Add({{"outcome", "error"}})),
      trials_measured(prometheus::BuildCounter()
                          .Name("kiln_trials_measured_total")
                          .Help("Candidate schedules measured by workers")
                          .Register(*registry_)
                          .Add({})),
      tasks_reported(prometheus::BuildCounter()
                         .Name("kiln_task_results_total")
                         .Help("Measurement results reported by workers")
                         .Register(*registry_)
                         .Add({})),
      artifacts_fetched(prometheus::BuildCounter()
                            .Name("kiln_artifacts_fetched_total")
                            .Help("Artifacts streamed to clients")
                            .Register(*registry_)
                            .Add({})),
      workers(prometheus::BuildGauge()
                  .Name("kiln_workers")
                  .Help("Registered workers")
                  .Register(*registry_)
                  .Add({})) {}

absl::Status ServerMetrics::Expose(const std::string& address) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address);
    exposer_->RegisterCollectable(registry_);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
}

}  // namespace kiln::server
