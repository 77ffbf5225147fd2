// A row of the records table as a Record: the column list every query of
// records selects, and the reader of such a row (tuning_db.cc, schema.cc's
// migrations).
#pragma once

#include "tuning_db/sqlite_connection.h"
#include "tuning_db/tuning_db.h"

namespace kiln::tuningdb {

// The records table's data columns, in the order ReadRecord reads them.
inline constexpr char kRecordColumns[] =
    "workload_key, target_key, space_version, compiler_version, config, median_ms, p10_ms, "
    "p90_ms, repeats, error, error_message, worker_id, created_unix_ms";

// The Record in columns [first, first + 13) of the current row of `s`.
Record ReadRecord(const SqliteStatement& s, int first = 0);

}  // namespace kiln::tuningdb
