// The tuning database's schema and its migrations. The file's schema version
// lives in the one-row table schema_version; Migrate() brings a file from any
// older version (0 = empty file) up to kSchemaVersion inside one write
// transaction, and refuses a file written by a newer build.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tuning_db/sqlite_connection.h"

namespace kiln::tuningdb {

// 1: targets, workloads, records, compile entries, artifacts.
// 2: records.record_key (content hash, UNIQUE: idempotent import), tuning jobs.
// 3: workloads.graph (the workload itself, for the cost model's features);
//    tuning_jobs.trials and .strategy (jobs that grow round by round).
inline constexpr int kSchemaVersion = 5;

// Creates or upgrades the schema. Safe when several processes open the same
// new file at once: the version is re-read under the write lock.
absl::Status MigrateSchema(SqliteConnection& conn);

// Like MigrateSchema but stops at `version` (<= kSchemaVersion). Tests use it to
// create a genuine file of an older version with that version's exact DDL.
absl::Status MigrateSchemaTo(SqliteConnection& conn, int version);

// The version recorded in the file (0 when it has no schema_version table).
absl::StatusOr<int> ReadSchemaVersion(SqliteConnection& conn);

}  // namespace kiln::tuningdb
