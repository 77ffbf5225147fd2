// The worker's half of the server's whole-model check: whole packages timed
// against each other on this CPU, as a deployment runs them (the runtime's
// session and thread pool, every step of the model back to back, caches as
// warm or cold as the model leaves them), so that a package built from
// per-group winners replaces another only when the model itself got faster.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/v1/worker.pb.h"

namespace kiln::worker {

// Times `packages` (the bytes of task.packages(), in order) on task.threads()
// threads: one session each over the same inputs (zeros for integer inputs,
// so that indices stay in range; small deterministic values for floats),
// warm-up runs, then rounds that run every package once in turn until each
// has min_repeats runs and min_time_ms of them (capped as MeasureSettings
// caps). The result has one PackageTiming per package and, as median_ms etc.,
// the first package's. A package that does not load or run is a
// RUNTIME_ERROR result naming it; a Status error means the task itself is
// malformed.
// CUDA packages run on device `cuda_device` (a GPU worker's device process).
absl::StatusOr<kiln::v1::MeasureResult> TimePackages(const kiln::v1::MeasureTask& task,
                                                     const std::vector<std::string>& packages, int cuda_device = 0);

// TimePackages with a Status error folded into a RUNTIME_ERROR result.
kiln::v1::MeasureResult TimePackagesAsResult(const kiln::v1::MeasureTask& task,
                                             const std::vector<std::string>& packages, int cuda_device = 0);

}  // namespace kiln::worker
