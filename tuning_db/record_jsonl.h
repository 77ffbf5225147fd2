// Export and import of tuning records as JSON lines, one kiln.v1.TuningRecordLine
// (a record with its workload and target) per line, so teams can ship tuned
// records between databases. Format: docs/tuning-db.md.
#pragma once

#include <cstdint>
#include <istream>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "tuning_db/tuning_db.h"

namespace kiln::tuningdb {

// One line (no trailing newline) for `line`.
std::string RecordLineToJson(const RecordLine& line);
// Parses one line; INVALID_ARGUMENT for malformed JSON, unknown fields, an
// unknown error name or a missing key. A missing field takes its default
// (a missing "error" is "ok").
absl::StatusOr<RecordLine> RecordLineFromJson(std::string_view json);

// Writes every record of `db`, oldest first, one line each. Returns the number
// of lines written.
absl::StatusOr<int64_t> ExportRecordsJsonl(TuningDb& db, std::ostream& out);

// Reads lines from `in` (`source` names it in errors; blank lines are skipped)
// and imports them in transactions of `batch_size` lines. Idempotent: a record
// already present is counted in records_present, not added. A bad line stops the
// import with INVALID_ARGUMENT naming source and line number; the batches before
// it stay imported (running the fixed file again adds only the rest).
absl::StatusOr<ImportCounts> ImportRecordsJsonl(TuningDb& db, std::istream& in, const std::string& source,
                                                int batch_size = 5000);

}  // namespace kiln::tuningdb
