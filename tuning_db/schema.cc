// Schema DDL per version; see docs/tuning-db.md for the meaning of each column.
// Old migrations are never edited: a file of version N is upgraded by running
// migrations N, N+1, ... in order.
#include "tuning_db/schema.h"

#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tuning_db/record_row.h"
#include "tuning_db/tuning_db.h"

namespace kiln::tuningdb {
namespace {

// Migration i takes the schema from version i to version i + 1: its SQL, then
// (optionally) a step in C++ for what SQL cannot compute.
struct Migration {
  std::string sql;
  std::function<absl::Status(SqliteConnection&)> step;
};

// 1 -> 2: every record gets its content key (RecordKey), so that importing the
// same record twice adds it once. Records are append-only, so the backfill
// lifts the update trigger for its duration (inside the migration transaction).
absl::Status BackfillRecordKeys(SqliteConnection& conn) {
  RETURN_IF_ERROR(conn.Exec("DROP TRIGGER records_no_update"));
  std::vector<std::pair<int64_t, std::string>> keys;
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     conn.Prepare(absl::StrCat("SELECT id, ", kRecordColumns, " FROM records ORDER BY id")));
    std::unordered_set<std::string> seen;
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      const Record r = ReadRecord(s, /*first=*/1);
      std::string key = RecordKey(r);
      // An exact duplicate already in a v1 file keeps its row under a distinct key.
      if (!seen.insert(key).second) key = absl::StrCat(key, "#", s.ColumnInt(0));
      keys.emplace_back(s.ColumnInt(0), std::move(key));
    }
  }
  for (const auto& [id, key] : keys) {
    ASSIGN_OR_RETURN(SqliteStatement u, conn.Prepare("UPDATE records SET record_key = ?1 WHERE id = ?2"));
    u.Bind(1, key).Bind(2, id);
    RETURN_IF_ERROR(u.Run());
  }
  return conn.Exec(R"sql(
CREATE UNIQUE INDEX records_by_key ON records (record_key);
CREATE TRIGGER records_no_update BEFORE UPDATE ON records
  BEGIN SELECT RAISE(ABORT, 'records are append-only'); END;
)sql");
}

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> kMigrations = {
      // 0 -> 1: the initial schema.
      {R"sql(
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
       nullptr},
      // 1 -> 2: record content keys and persistent tuning jobs.
      {R"sql(
ALTER TABLE records ADD COLUMN record_key TEXT;

CREATE TABLE tuning_jobs (
  id INTEGER PRIMARY KEY,
  workload_key TEXT NOT NULL,
  target_key TEXT NOT NULL,
  space_version INTEGER NOT NULL,
  state INTEGER NOT NULL,
  task_template BLOB NOT NULL,
  message TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL,
  updated_unix_ms INTEGER NOT NULL
);
CREATE UNIQUE INDEX tuning_jobs_one_running
  ON tuning_jobs (workload_key, target_key, space_version) WHERE state = 0;
CREATE INDEX tuning_jobs_by_state ON tuning_jobs (state);

CREATE TABLE tuning_job_candidates (
  job_id INTEGER NOT NULL REFERENCES tuning_jobs (id),
  position INTEGER NOT NULL,
  config TEXT NOT NULL,
  record_id INTEGER,
  PRIMARY KEY (job_id, position)
) WITHOUT ROWID;
)sql",
       BackfillRecordKeys},
      // 2 -> 3: the workload graph (a serialized kiln.v1.Graph; empty when
      // unknown), and a job's goal: measured schedules in total, and how the
      // next ones are proposed.
      {R"sql(
ALTER TABLE workloads ADD COLUMN graph BLOB NOT NULL DEFAULT x'';
ALTER TABLE tuning_jobs ADD COLUMN trials INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tuning_jobs ADD COLUMN strategy TEXT NOT NULL DEFAULT 'random';
)sql",
       nullptr},
      // 3 -> 4: what the search predicted for each candidate it proposed (the
      // cost model's score, higher = faster; NULL when it had no model), for
      // reports of predicted against measured.
      {R"sql(
ALTER TABLE tuning_job_candidates ADD COLUMN predicted REAL;
)sql",
       nullptr},
      // 4 -> 5: what a compile answered, for the compile cache to answer again
      // without compiling while the records behind it are unchanged: the
      // result (an opaque serialized message; empty: none), the trials per
      // workload its records satisfy, and RecordsSeen() when it was written.
      {R"sql(
ALTER TABLE compile_entries ADD COLUMN result BLOB NOT NULL DEFAULT x'';
ALTER TABLE compile_entries ADD COLUMN trials INTEGER NOT NULL DEFAULT 0;
ALTER TABLE compile_entries ADD COLUMN records_seen TEXT NOT NULL DEFAULT '';
)sql",
       nullptr},
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

absl::Status MigrateSchema(SqliteConnection& conn) { return MigrateSchemaTo(conn, kSchemaVersion); }

absl::Status MigrateSchemaTo(SqliteConnection& conn, int target_version) {
  if (target_version < 0 || target_version > kSchemaVersion) {
    return absl::InvalidArgumentError(absl::StrCat("no schema version ", target_version));
  }
  // Fast path without the write lock: most opens find an up-to-date file.
  ASSIGN_OR_RETURN(int version, ReadSchemaVersion(conn));
  if (version == target_version) return absl::OkStatus();
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
  const std::vector<Migration>& migrations = Migrations();
  for (int v = version; v < target_version; ++v) {
    RETURN_IF_ERROR(conn.Exec(migrations[v].sql));
    if (migrations[v].step) RETURN_IF_ERROR(migrations[v].step(conn));
    RETURN_IF_ERROR(conn.Exec(absl::StrCat("UPDATE schema_version SET version = ", v + 1)));
  }
  return txn.Commit();
}

}  // namespace kiln::tuningdb
