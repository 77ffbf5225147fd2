// Schema DDL per version; see docs/tuning-db.md for the meaning of each column.
#include "tuning_db/schema.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/status_macros.h"

namespace kiln::tuningdb {
namespace {

// migrations[i] takes the schema from version i to version i + 1.
const std::vector<std::string>& Migrations() {
  static const std::vector<std::string> kMigrations = {
      // 0 -> 1: the initial schema.
      R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (0);

CREATE TABLE targets (
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  arch TEXT NOT NULL,
  cpu_name TEXT NOT NULL,
  features TEXT NOT NULL,
  device_model TEXT NOT NULL,
  driver_version TEXT NOT NULL,
  toolkit_version TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL,
  updated_unix_ms INTEGER NOT NULL
);

CREATE TABLE workloads (
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  canonical_text TEXT NOT NULL,
  kind TEXT NOT NULL,
  op_summary TEXT NOT NULL,
  flops REAL NOT NULL,
  bytes REAL NOT NULL,
  created_unix_ms INTEGER NOT NULL,
  updated_unix_ms INTEGER NOT NULL
);

CREATE TABLE records (
  id INTEGER PRIMARY KEY,
  workload_key TEXT NOT NULL,
  target_key TEXT NOT NULL,
  space_version INTEGER NOT NULL,
  compiler_version TEXT NOT NULL,
  config TEXT NOT NULL,
  median_ms REAL NOT NULL,
  p10_ms REAL NOT NULL,
  p90_ms REAL NOT NULL,
  repeats INTEGER NOT NULL,
  error INTEGER NOT NULL,
  error_message TEXT NOT NULL,
  worker_id TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL
);
CREATE INDEX records_by_query
  ON records (workload_key, target_key, space_version, error, median_ms);
CREATE TRIGGER records_no_update BEFORE UPDATE ON records
  BEGIN SELECT RAISE(ABORT, 'records are append-only'); END;
CREATE TRIGGER records_no_delete BEFORE DELETE ON records
  BEGIN SELECT RAISE(ABORT, 'records are append-only'); END;

CREATE TABLE compile_entries (
  id INTEGER PRIMARY KEY,
  compile_key TEXT NOT NULL UNIQUE,
  package_digest TEXT NOT NULL,
  package_size INTEGER NOT NULL,
  created_unix_ms INTEGER NOT NULL
);

CREATE TABLE artifacts (
  id INTEGER PRIMARY KEY,
  digest TEXT NOT NULL UNIQUE,
  size INTEGER NOT NULL,
  created_unix_ms INTEGER NOT NULL,
  last_used_unix_ms INTEGER NOT NULL,
  use_seq INTEGER NOT NULL,
  pinned INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX artifacts_by_use ON artifacts (use_seq);
)sql",
  };
  return kMigrations;
}

}  // namespace

absl::StatusOr<int> ReadSchemaVersion(SqliteConnection& conn) {
  ASSIGN_OR_RETURN(SqliteStatement has_table,
                   conn.Prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                "name = 'schema_version'"));
  ASSIGN_OR_RETURN(bool exists, has_table.Step());
  if (!exists) return 0;
  ASSIGN_OR_RETURN(SqliteStatement version, conn.Prepare("SELECT MAX(version) FROM schema_version"));
  ASSIGN_OR_RETURN(bool row, version.Step());
  return row ? static_cast<int>(version.ColumnInt(0)) : 0;
}

absl::Status MigrateSchema(SqliteConnection& conn) {
  // Fast path without the write lock: most opens find an up-to-date file.
  ASSIGN_OR_RETURN(int version, ReadSchemaVersion(conn));
  if (version == kSchemaVersion) return absl::OkStatus();
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("tuning db ", conn.path(), " has schema version ", version,
                     ", newer than this build supports (", kSchemaVersion, ")"));
  }
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::BeginImmediate(conn));
  // Another process may have migrated between the read above and the lock.
  ASSIGN_OR_RETURN(version, ReadSchemaVersion(conn));
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("tuning db ", conn.path(), " has schema version ", version,
                     ", newer than this build supports (", kSchemaVersion, ")"));
  }
  const std::vector<std::string>& migrations = Migrations();
  for (int v = version; v < kSchemaVersion; ++v) {
    RETURN_IF_ERROR(conn.Exec(migrations[v]));
    RETURN_IF_ERROR(conn.Exec(absl::StrCat("UPDATE schema_version SET version = ", v + 1)));
  }
  return txn.Commit();
}

}  // namespace kiln::tuningdb
