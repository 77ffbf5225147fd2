// Tuning reports from the database: every measurement of a model's workloads
// (or of one tuning job's workload) on a target, in the order stored, with
// what the search predicted, the default and the winner. Read-only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/driver/compile_driver.h"
#include "kiln/v1/report.pb.h"
#include "tuning_db/tuning_db.h"

namespace kiln::server {

// The workloads of `model`'s groups, each once (at its first group), on the
// target in the current schedule-space version.
absl::StatusOr<kiln::v1::TuningReport> ReportModel(tuningdb::TuningDb& db, const PreparedModel& model,
                                                   const std::string& target_key, const Target& target);

// One job's workload on the job's target and space version. `target`, when
// known, gives the space's size and default (else they are left unset).
// NOT_FOUND when there is no such job.
absl::StatusOr<kiln::v1::TuningReport> ReportJob(tuningdb::TuningDb& db, int64_t job_id,
                                                 const std::optional<Target>& target);

}  // namespace kiln::server
