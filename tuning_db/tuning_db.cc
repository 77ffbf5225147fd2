// TuningDb: queries and transactions over the schema in schema.cc, plus the
// bookkeeping that keeps artifact rows and blob files consistent.
#include "tuning_db/tuning_db.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/digest.h"
#include "base/status_macros.h"
#include "tuning_db/record_row.h"
#include "tuning_db/schema.h"

namespace kiln::tuningdb {
namespace {

constexpr int kBusyTimeoutMs = 5000;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::Status CheckDigest(const std::string& digest) {
  if (IsValidContentDigest(digest)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("artifact digest \"", digest, "\" is not \"sha256:\" followed by 64 lower-case hex digits"));
}

absl::Status ValidateRecord(const Record& r, size_t index) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("record ", index, " (workload ", r.workload_key,
                                                   ", target ", r.target_key, "): ", std::string(why)));
  };
  if (r.workload_key.empty()) return bad("empty workload_key");
  if (r.target_key.empty()) return bad("empty target_key");
  if (r.space_version < 0) return bad(absl::StrCat("negative space_version ", r.space_version));
  int error = static_cast<int>(r.error);
  if (error < 0 || error > static_cast<int>(RecordError::kTimeout)) {
    return bad(absl::StrCat("unknown error code ", error));
  }
  for (auto [name, value] : {std::pair<const char*, double>{"median_ms", r.median_ms},
                             {"p10_ms", r.p10_ms},
                             {"p90_ms", r.p90_ms}}) {
    if (!std::isfinite(value) || value < 0) return bad(absl::StrCat(name, " is ", value));
  }
  if (r.repeats < 0) return bad(absl::StrCat("negative repeats ", r.repeats));
  return absl::OkStatus();
}

// Bumps the artifact's recency: the next use_seq is one more than any so far,
// so least-recently-used order is exact even within one millisecond.
constexpr char kTouchArtifactSql[] =
    "UPDATE artifacts SET last_used_unix_ms = ?1, "
    "use_seq = (SELECT COALESCE(MAX(use_seq), 0) + 1 FROM artifacts) WHERE digest = ?2";

// The first column of every row, as text.
absl::StatusOr<std::vector<std::string>> ReadFirstColumns(SqliteStatement& s) {
  std::vector<std::string> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(s.ColumnText(0));
  }
  return out;
}

// A candidate's predicted score from the caller's parallel vector: none when
// the vector is short or holds NaN there.
std::optional<double> PredictedAt(const std::vector<double>& predicted, size_t i) {
  if (i < predicted.size() && std::isfinite(predicted[i])) return predicted[i];
  return std::nullopt;
}

// Every row of a query that selects kRecordColumns.
absl::StatusOr<std::vector<Record>> ReadAllRecords(SqliteStatement& s) {
  std::vector<Record> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadRecord(s));
  }
  return out;
}

}  // namespace

std::string_view RecordErrorName(RecordError error) {
  switch (error) {
    case RecordError::kOk: return "ok";
    case RecordError::kBuildError: return "build_error";
    case RecordError::kWrongAnswer: return "wrong_answer";
    case RecordError::kRuntimeError: return "runtime_error";
    case RecordError::kTimeout: return "timeout";
  }
  return "unknown_error";
}

std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kRunning: return "running";
    case JobState::kDone: return "done";
    case JobState::kFailed: return "failed";
    case JobState::kCancelled: return "cancelled";
  }
  return "unknown";
}

std::string RecordKey(const Record& r) {
  // Length-prefixed strings and round-trip number formats: no two different
  // records serialise alike.
  std::string text;
  auto add_text = [&text](std::string_view field) {
    absl::StrAppend(&text, field.size(), ":", std::string(field), ";");
  };
  auto add_double = [&text](double value) {
    char buf[40];
    snprintf(buf, sizeof(buf), "%.17g;", value);
    text += buf;
  };
  add_text(r.workload_key);
  add_text(r.target_key);
  absl::StrAppend(&text, r.space_version, ";");
  add_text(r.compiler_version);
  add_text(r.config);
  add_double(r.median_ms);
  add_double(r.p10_ms);
  add_double(r.p90_ms);
  absl::StrAppend(&text, r.repeats, ";", static_cast<int>(r.error), ";");
  add_text(r.error_message);
  add_text(r.worker_id);
  absl::StrAppend(&text, r.created_unix_ms, ";");
  // The creation time leads, so the UNIQUE index on the key grows at its right
  // edge as records arrive (no random page writes); 32 hex digits of the hash follow.
  char prefix[24];
  snprintf(prefix, sizeof(prefix), "%012llx-",
           static_cast<unsigned long long>(std::max<int64_t>(0, r.created_unix_ms)));
  return absl::StrCat(prefix, Sha256Hex(text).substr(0, 32));
}

absl::StatusOr<std::unique_ptr<TuningDb>> TuningDb::Open(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("tuning db path is empty");
  if (path == ":memory:" || path.rfind("file:", 0) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tuning db path \"", path, "\" must be a plain file path (artifacts live beside it)"));
  }
  std::error_code ec;
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);  // Open reports failures.

  ASSIGN_OR_RETURN(std::unique_ptr<SqliteConnection> conn, SqliteConnection::Open(path, kBusyTimeoutMs));
  RETURN_IF_ERROR(MigrateSchema(*conn));
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteConnection> reader, SqliteConnection::Open(path, kBusyTimeoutMs));
  return std::unique_ptr<TuningDb>(new TuningDb(std::move(conn), std::move(reader), path + ".artifacts"));
}

absl::Status TuningDb::UpsertTarget(const TargetInfo& t) {
  if (t.key.empty()) return absl::InvalidArgumentError("target key is empty");
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = NowUnixMs();
  ASSIGN_OR_RETURN(SqliteStatement s,
                   conn_->Prepare(
                       "INSERT INTO targets (key, kind, arch, cpu_name, features, device_model, "
                       "driver_version, toolkit_version, created_unix_ms, updated_unix_ms) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9) "
                       "ON CONFLICT (key) DO UPDATE SET kind = excluded.kind, arch = excluded.arch, "
                       "cpu_name = excluded.cpu_name, features = excluded.features, "
                       "device_model = excluded.device_model, driver_version = excluded.driver_version, "
                       "toolkit_version = excluded.toolkit_version, "
                       "updated_unix_ms = excluded.updated_unix_ms"));
  s.Bind(1, t.key).Bind(2, t.kind).Bind(3, t.arch).Bind(4, t.cpu_name).Bind(5, t.features);
  s.Bind(6, t.device_model).Bind(7, t.driver_version).Bind(8, t.toolkit_version).Bind(9, now);
  return s.Run();
}

absl::Status TuningDb::UpsertWorkload(const WorkloadInfo& w) {
  if (w.key.empty()) return absl::InvalidArgumentError("workload key is empty");
  if (!std::isfinite(w.flops) || w.flops < 0 || !std::isfinite(w.bytes) || w.bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("workload ", w.key, ": flops (", w.flops,
                                                   ") and bytes (", w.bytes,
                                                   ") must be finite and non-negative"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = NowUnixMs();
  ASSIGN_OR_RETURN(SqliteStatement s,
                   conn_->Prepare(
                       "INSERT INTO workloads (key, canonical_text, kind, op_summary, flops, bytes, "
                       "created_unix_ms, updated_unix_ms, graph) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8) "
                       "ON CONFLICT (key) DO UPDATE SET canonical_text = excluded.canonical_text, "
                       "kind = excluded.kind, op_summary = excluded.op_summary, "
                       "flops = excluded.flops, bytes = excluded.bytes, "
                       "updated_unix_ms = excluded.updated_unix_ms, "
                       "graph = CASE WHEN length(excluded.graph) > 0 THEN excluded.graph ELSE graph END"));
  s.Bind(1, w.key).Bind(2, w.canonical_text).Bind(3, w.kind).Bind(4, w.op_summary);
  s.Bind(5, w.flops).Bind(6, w.bytes).Bind(7, now).BindBlob(8, w.graph);
  return s.Run();
}

absl::StatusOr<std::vector<std::string>> TuningDb::SiblingTargets(const std::string& key) {
  std::lock_guard<std::mutex> lock(read_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   reader_->Prepare("SELECT o.key FROM targets t JOIN targets o ON o.kind = t.kind AND "
                                    "o.arch = t.arch AND o.key != t.key WHERE t.key = ?1 ORDER BY o.key"));
  s.Bind(1, key);
  return ReadFirstColumns(s);
}

absl::StatusOr<std::optional<TargetInfo>> TuningDb::GetTarget(const std::string& key) {
  std::lock_guard<std::mutex> lock(read_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   reader_->Prepare("SELECT key, kind, arch, cpu_name, features, device_model, "
                                  "driver_version, toolkit_version FROM targets WHERE key = ?1"));
  s.Bind(1, key);
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::nullopt;
  return TargetInfo{s.ColumnText(0), s.ColumnText(1), s.ColumnText(2), s.ColumnText(3),
                    s.ColumnText(4), s.ColumnText(5), s.ColumnText(6), s.ColumnText(7)};
}

absl::StatusOr<std::optional<WorkloadInfo>> TuningDb::GetWorkload(const std::string& key) {
  std::lock_guard<std::mutex> lock(read_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   reader_->Prepare("SELECT key, canonical_text, kind, op_summary, flops, bytes, graph "
                                  "FROM workloads WHERE key = ?1"));
  s.Bind(1, key);
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::nullopt;
  return WorkloadInfo{s.ColumnText(0),     s.ColumnText(1),     s.ColumnText(2), s.ColumnText(3),
                      s.ColumnDouble(4),   s.ColumnDouble(5),   s.ColumnBlob(6)};
}

absl::Status TuningDb::AddRecords(const std::vector<Record>& records) {
  for (size_t i = 0; i < records.size(); ++i) RETURN_IF_ERROR(ValidateRecord(records[i], i));
  if (records.empty()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = NowUnixMs();
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::BeginImmediate(*conn_));
  for (const Record& r : records) {
    ASSIGN_OR_RETURN(int64_t id, InsertRecordLocked(r, now));
    (void)id;
  }
  return txn.Commit();
}

absl::StatusOr<int64_t> TuningDb::InsertRecordLocked(const Record& record, int64_t now) {
  Record r = record;
  if (r.created_unix_ms == 0) r.created_unix_ms = now;
  ASSIGN_OR_RETURN(SqliteStatement s,
                   conn_->Prepare(absl::StrCat("INSERT INTO records (", kRecordColumns,
                                               ", record_key) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                                               "?9, ?10, ?11, ?12, ?13, ?14) "
                                               "ON CONFLICT (record_key) DO NOTHING")));
  s.Bind(1, r.workload_key).Bind(2, r.target_key).Bind(3, r.space_version);
  s.Bind(4, r.compiler_version).Bind(5, r.config).Bind(6, r.median_ms).Bind(7, r.p10_ms);
  s.Bind(8, r.p90_ms).Bind(9, r.repeats).Bind(10, static_cast<int>(r.error));
  s.Bind(11, r.error_message).Bind(12, r.worker_id).Bind(13, r.created_unix_ms);
  s.Bind(14, RecordKey(r));
  RETURN_IF_ERROR(s.Run());
  if (sqlite3_changes(conn_->raw()) == 0) return 0;
  return sqlite3_last_insert_rowid(conn_->raw());
}

absl::StatusOr<std::vector<Record>> TuningDb::TopK(const std::string& workload_key,
                                                   const std::string& target_key, int space_version,
                                                   int k) {
  if (k < 0) return absl::InvalidArgumentError(absl::StrCat("top-k query with negative k ", k));
  std::lock_guard<std::mutex> lock(read_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   reader_->Prepare(absl::StrCat(
                       "SELECT ", kRecordColumns,
                       " FROM records WHERE workload_key = ?1 AND target_key = ?2 AND "
                       "space_version = ?3 AND error = 0 ORDER BY median_ms ASC, id ASC LIMIT ?4")));
  s.Bind(1, workload_key).Bind(2, target_key).Bind(3, space_version).Bind(4, k);
  return ReadAllRecords(s);
}

absl::StatusOr<std::string> TuningDb::ExplainMiss(const std::string& workload_key,
                                                  const std::string& target_key,
                                                  int space_version) {
  std::lock_guard<std::mutex> lock(read_mu_);
  std::string where = absl::StrCat("target ", target_key, ", schedule-space version ", space_version);

  // Error counts for the exact triple.
  ASSIGN_OR_RETURN(SqliteStatement by_error,
                   reader_->Prepare("SELECT error, COUNT(*) FROM records WHERE workload_key = ?1 AND "
                                  "target_key = ?2 AND space_version = ?3 GROUP BY error ORDER BY error"));
  by_error.Bind(1, workload_key).Bind(2, target_key).Bind(3, space_version);
  std::map<int, int64_t> counts;
  int64_t failed = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool row, by_error.Step());
    if (!row) break;
    counts[static_cast<int>(by_error.ColumnInt(0))] = by_error.ColumnInt(1);
    if (by_error.ColumnInt(0) != 0) failed += by_error.ColumnInt(1);
  }
  if (counts.count(0)) {
    return absl::StrCat("hit: ", counts[0], " valid records for workload ", workload_key, " on ", where);
  }
  if (!counts.empty()) {
    std::vector<std::string> parts;
    for (const auto& [error, n] : counts) {
      parts.push_back(absl::StrCat(std::string(RecordErrorName(static_cast<RecordError>(error))), " x", n));
    }
    return absl::StrCat("only failed records (", failed, ") for workload ", workload_key, " on ", where,
                        ": ", absl::StrJoin(parts, ", "));
  }

  // Other schedule-space versions for the same workload and target.
  ASSIGN_OR_RETURN(SqliteStatement versions,
                   reader_->Prepare("SELECT DISTINCT space_version FROM records WHERE workload_key = ?1 "
                                  "AND target_key = ?2 ORDER BY space_version"));
  versions.Bind(1, workload_key).Bind(2, target_key);
  std::vector<std::string> version_list;
  while (true) {
    ASSIGN_OR_RETURN(bool row, versions.Step());
    if (!row) break;
    version_list.push_back(absl::StrCat(versions.ColumnInt(0)));
  }
  if (!version_list.empty()) {
    return absl::StrCat("workload ", workload_key, " on target ", target_key,
                        " has records only for schedule-space versions: ",
                        absl::StrJoin(version_list, ", "), " (wanted ", space_version, ")");
  }

  // Other targets for the same workload.
  ASSIGN_OR_RETURN(SqliteStatement targets,
                   reader_->Prepare("SELECT DISTINCT target_key FROM records WHERE workload_key = ?1 "
                                  "ORDER BY target_key"));
  targets.Bind(1, workload_key);
  ASSIGN_OR_RETURN(std::vector<std::string> target_list, ReadFirstColumns(targets));
  if (!target_list.empty()) {
    return absl::StrCat("workload ", workload_key, " known but measured only for targets: ",
                        absl::StrJoin(target_list, ", "), " (wanted ", target_key, ")");
  }

  ASSIGN_OR_RETURN(SqliteStatement workload, reader_->Prepare("SELECT 1 FROM workloads WHERE key = ?1"));
  workload.Bind(1, workload_key);
  ASSIGN_OR_RETURN(bool known, workload.Step());
  if (known) return absl::StrCat("workload ", workload_key, " known but never measured");
  return absl::StrCat("no workload ", workload_key);
}

absl::StatusOr<int64_t> TuningDb::CountLocked(SqliteConnection& conn, const std::string& sql,
                                              const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(SqliteStatement s, conn.Prepare(sql));
  for (size_t i = 0; i < args.size(); ++i) s.Bind(static_cast<int>(i) + 1, args[i]);
  ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.ColumnInt(0) : 0;
}

absl::StatusOr<std::vector<std::string>> TuningDb::MeasuredConfigs(const std::string& workload_key,
                                                                   const std::string& target_key,
                                                                   int space_version) {
  std::lock_guard<std::mutex> lock(read_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   reader_->Prepare("SELECT DISTINCT config FROM records WHERE workload_key = ?1 AND "
                                    "target_key = ?2 AND space_version = ?3 ORDER BY config"));
  s.Bind(1, workload_key).Bind(2, target_key).Bind(3, space_version);
  return ReadFirstColumns(s);
}

absl::StatusOr<std::vector<TuningDb::ConfigStat>> TuningDb::ConfigStats(const std::string& workload_key,
                                                                       const std::string& target_key,
                                                                       int space_version, int k) {
  if (k < 0) return absl::InvalidArgumentError(absl::StrCat("config stats query with negative k ", k));
  std::lock_guard<std::mutex> lock(read_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   reader_->Prepare("SELECT config, COUNT(*), AVG(median_ms), MIN(p10_ms), MAX(p90_ms) "
                                    "FROM records WHERE workload_key = ?1 AND target_key = ?2 AND "
                                    "space_version = ?3 AND error = 0 GROUP BY config "
                                    "ORDER BY AVG(median_ms) ASC, MIN(id) ASC LIMIT ?4"));
  s.Bind(1, workload_key).Bind(2, target_key).Bind(3, space_version).Bind(4, k);
  std::vector<ConfigStat> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ConfigStat{s.ColumnText(0), static_cast<int>(s.ColumnInt(1)), s.ColumnDouble(2),
                             s.ColumnDouble(3), s.ColumnDouble(4)});
  }
  return out;
}

absl::StatusOr<TuningDb::ConfigEvidence> TuningDb::Evidence(const std::string& workload_key,
                                                           const std::string& target_key, int space_version,
                                                           const std::string& config) {
  std::lock_guard<std::mutex> lock(read_mu_);
  // One read transaction: the keys and the count describe the same snapshot.
  RETURN_IF_ERROR(reader_->Exec("BEGIN"));
  absl::StatusOr<ConfigEvidence> out = [&]() -> absl::StatusOr<ConfigEvidence> {
    ConfigEvidence evidence;
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       reader_->Prepare("SELECT record_key, worker_id FROM records WHERE workload_key = ?1 AND "
                                        "target_key = ?2 AND space_version = ?3 AND error = 0 AND "
                                        "config = ?4 ORDER BY id"));
      s.Bind(1, workload_key).Bind(2, target_key).Bind(3, space_version).Bind(4, config);
      std::set<std::string> workers;
      while (true) {
        ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        evidence.record_keys.push_back(s.ColumnText(0));
        if (std::string w = s.ColumnText(1); !w.empty()) workers.insert(std::move(w));
      }
      evidence.workers.assign(workers.begin(), workers.end());
    }
    ASSIGN_OR_RETURN(SqliteStatement s,
                     reader_->Prepare("SELECT COUNT(DISTINCT config) FROM records WHERE workload_key = ?1 AND "
                                      "target_key = ?2 AND space_version = ?3 AND error = 0"));
    s.Bind(1, workload_key).Bind(2, target_key).Bind(3, space_version);
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) evidence.configs_ranked = static_cast<int>(s.ColumnInt(0));
    return evidence;
  }();
  (void)reader_->Exec("COMMIT");
  return out;
}

absl::StatusOr<std::vector<Record>> TuningDb::ValidRecords(const std::string& target_key, int space_version) {
  std::lock_guard<std::mutex> lock(read_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   reader_->Prepare(absl::StrCat("SELECT ", kRecordColumns,
                                                 " FROM records WHERE target_key = ?1 AND space_version = ?2 "
                                                 "AND error = 0 ORDER BY id")));
  s.Bind(1, target_key).Bind(2, space_version);
  return ReadAllRecords(s);
}

absl::StatusOr<std::vector<TuningDb::HistoryEntry>> TuningDb::TuningHistory(const std::string& workload_key,
                                                                            const std::string& target_key,
                                                                            int space_version) {
  std::lock_guard<std::mutex> lock(read_mu_);
  // Two statements: a record stored between them has no job yet (records are
  // append-only, so nothing else can change).
  std::vector<HistoryEntry> out;
  std::map<int64_t, size_t> index;  // record id -> its entry
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     reader_->Prepare(absl::StrCat("SELECT id, ", kRecordColumns,
                                                   " FROM records WHERE workload_key = ?1 AND target_key = ?2 "
                                                   "AND space_version = ?3 ORDER BY id")));
    s.Bind(1, workload_key).Bind(2, target_key).Bind(3, space_version);
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      HistoryEntry e;
      e.record_id = s.ColumnInt(0);
      e.record = ReadRecord(s, /*first=*/1);
      index[e.record_id] = out.size();
      out.push_back(std::move(e));
    }
  }
  ASSIGN_OR_RETURN(SqliteStatement c,
                   reader_->Prepare("SELECT c.record_id, c.job_id, j.strategy, c.predicted FROM "
                                    "tuning_job_candidates c JOIN tuning_jobs j ON j.id = c.job_id WHERE "
                                    "j.workload_key = ?1 AND j.target_key = ?2 AND j.space_version = ?3 AND "
                                    "c.record_id IS NOT NULL"));
  c.Bind(1, workload_key).Bind(2, target_key).Bind(3, space_version);
  while (true) {
    ASSIGN_OR_RETURN(bool row, c.Step());
    if (!row) break;
    auto it = index.find(c.ColumnInt(0));
    if (it == index.end()) continue;
    HistoryEntry& e = out[it->second];
    e.job_id = c.ColumnInt(1);
    e.strategy = c.ColumnText(2);
    if (!c.ColumnIsNull(3)) e.predicted = c.ColumnDouble(3);
  }
  return out;
}

int64_t TuningDb::CountRecords(const std::string& workload_key, const std::string& target_key,
                               int space_version) {
  std::lock_guard<std::mutex> lock(read_mu_);
  absl::StatusOr<SqliteStatement> s =
      reader_->Prepare("SELECT COUNT(*) FROM records WHERE workload_key = ?1 AND target_key = ?2 AND "
                     "space_version = ?3");
  if (!s.ok()) return -1;
  s->Bind(1, workload_key).Bind(2, target_key).Bind(3, space_version);
  absl::StatusOr<bool> row = s->Step();
  if (!row.ok()) return -1;
  return *row ? s->ColumnInt(0) : 0;
}

absl::Status TuningDb::PutCompileEntry(const CompileEntry& e) {
  if (e.compile_key.empty()) return absl::InvalidArgumentError("compile key is empty");
  RETURN_IF_ERROR(CheckDigest(e.package_digest));
  if (e.package_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("compile entry ", e.compile_key, ": negative package size ", e.package_size));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   conn_->Prepare("INSERT INTO compile_entries (compile_key, package_digest, "
                                  "package_size, created_unix_ms, result, trials, records_seen) "
                                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                                  "ON CONFLICT (compile_key) DO UPDATE SET "
                                  "package_digest = excluded.package_digest, "
                                  "package_size = excluded.package_size, "
                                  "created_unix_ms = excluded.created_unix_ms, "
                                  "result = excluded.result, trials = excluded.trials, "
                                  "records_seen = excluded.records_seen"));
  s.Bind(1, e.compile_key).Bind(2, e.package_digest).Bind(3, e.package_size);
  s.Bind(4, e.created_unix_ms != 0 ? e.created_unix_ms : NowUnixMs());
  s.BindBlob(5, e.result).Bind(6, e.trials).Bind(7, e.records_seen);
  return s.Run();
}

absl::StatusOr<std::optional<CompileEntry>> TuningDb::GetCompileEntry(const std::string& compile_key) {
  std::lock_guard<std::mutex> lock(read_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   reader_->Prepare("SELECT compile_key, package_digest, package_size, created_unix_ms, "
                                    "result, trials, records_seen FROM compile_entries WHERE compile_key = ?1"));
  s.Bind(1, compile_key);
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::nullopt;
  return CompileEntry{s.ColumnText(0), s.ColumnText(1), s.ColumnInt(2), s.ColumnInt(3),
                      s.ColumnBlob(4), s.ColumnInt(5), s.ColumnText(6)};
}

absl::StatusOr<std::string> TuningDb::RecordsSeen(const std::vector<std::string>& workload_keys,
                                                  const std::string& target_key, int space_version) {
  // The keys as a JSON array, read back by json_each in their order: one
  // statement (one snapshot) whose correlated MAX is a short range scan of
  // records_by_query per workload.
  std::string keys = "[";
  for (const std::string& key : workload_keys) {
    if (key.find_first_of("\"\\\n ") != std::string::npos || key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("workload key '", key, "' is not a key"));
    }
    absl::StrAppend(&keys, keys.size() > 1 ? "," : "", "\"", key, "\"");
  }
  keys += "]";
  std::lock_guard<std::mutex> lock(read_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   reader_->Prepare("SELECT j.value, (SELECT COALESCE(MAX(r.id), 0) FROM records r "
                                    "WHERE r.workload_key = j.value AND r.target_key = ?2 AND "
                                    "r.space_version = ?3) FROM json_each(?1) j ORDER BY j.key"));
  s.Bind(1, keys).Bind(2, target_key).Bind(3, space_version);
  std::string out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    absl::StrAppend(&out, s.ColumnText(0), " ", s.ColumnInt(1), "\n");
  }
  return out;
}

std::vector<std::string> TuningDb::WorkloadsOfRecordsSeen(std::string_view records_seen) {
  std::vector<std::string> keys;
  for (absl::string_view line : absl::StrSplit(absl::string_view(records_seen.data(), records_seen.size()), '\n',
                                               absl::SkipEmpty())) {
    keys.emplace_back(line.substr(0, line.find(' ')));
  }
  return keys;
}

absl::StatusOr<std::string> TuningDb::PutArtifact(std::string_view bytes, bool pin) {
  std::string digest = ContentDigest(bytes);
  int64_t size = static_cast<int64_t>(bytes.size());
  // The blob is written outside the mutex (it may be large); an existing file of
  // the right size is kept (GetArtifact catches a corrupt one).
  ASSIGN_OR_RETURN(std::optional<int64_t> on_disk, blobs_.FileSize(digest));
  if (on_disk != size) RETURN_IF_ERROR(blobs_.Write(digest, bytes));

  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = NowUnixMs();
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::BeginImmediate(*conn_));
  ASSIGN_OR_RETURN(SqliteStatement s,
                   conn_->Prepare("INSERT INTO artifacts (digest, size, created_unix_ms, "
                                  "last_used_unix_ms, use_seq, pinned) VALUES (?1, ?2, ?3, ?3, "
                                  "(SELECT COALESCE(MAX(use_seq), 0) + 1 FROM artifacts), ?4) "
                                  "ON CONFLICT (digest) DO UPDATE SET "
                                  "last_used_unix_ms = excluded.last_used_unix_ms, "
                                  "use_seq = excluded.use_seq, "
                                  "pinned = MAX(pinned, excluded.pinned)"));
  s.Bind(1, digest).Bind(2, size).Bind(3, now).Bind(4, pin ? 1 : 0);
  RETURN_IF_ERROR(s.Run());
  // A GC (in this or another process) may have removed the file between the
  // write above and this transaction; under the write lock no GC can run.
  ASSIGN_OR_RETURN(on_disk, blobs_.FileSize(digest));
  if (on_disk != size) RETURN_IF_ERROR(blobs_.Write(digest, bytes));
  RETURN_IF_ERROR(txn.Commit());
  return digest;
}

absl::Status TuningDb::DropBrokenArtifact(const std::string& digest, const std::string& reason) {
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::BeginImmediate(*conn_));
  ASSIGN_OR_RETURN(SqliteStatement del, conn_->Prepare("DELETE FROM artifacts WHERE digest = ?1"));
  del.Bind(1, digest);
  RETURN_IF_ERROR(del.Run());
  RETURN_IF_ERROR(blobs_.Remove(digest));
  RETURN_IF_ERROR(txn.Commit());
  return absl::DataLossError(reason);
}

absl::StatusOr<std::optional<std::string>> TuningDb::GetArtifact(const std::string& digest) {
  RETURN_IF_ERROR(CheckDigest(digest));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(int64_t listed,
                     CountLocked(*conn_, "SELECT COUNT(*) FROM artifacts WHERE digest = ?1", {digest}));
    if (listed == 0) return std::nullopt;
  }
  // Read and hash outside the mutex.
  ASSIGN_OR_RETURN(std::optional<std::string> bytes, blobs_.Read(digest));
  std::string actual = bytes ? ContentDigest(*bytes) : "";

  std::lock_guard<std::mutex> lock(mu_);
  if (!bytes) {
    // Re-check under the write lock: a concurrent GC may have evicted it.
    ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::BeginImmediate(*conn_));
    ASSIGN_OR_RETURN(int64_t listed,
                     CountLocked(*conn_, "SELECT COUNT(*) FROM artifacts WHERE digest = ?1", {digest}));
    ASSIGN_OR_RETURN(std::optional<int64_t> on_disk, blobs_.FileSize(digest));
    RETURN_IF_ERROR(txn.Commit());
    if (listed == 0) return std::nullopt;
    if (!on_disk) {
      return DropBrokenArtifact(digest, absl::StrCat("artifact ", digest, " is listed but its blob ",
                                                     blobs_.BlobPath(digest),
                                                     " is missing; dropped it from the store"));
    }
    // Re-written meanwhile: read it again under the lock.
    ASSIGN_OR_RETURN(bytes, blobs_.Read(digest));
    if (!bytes) return absl::UnavailableError(absl::StrCat("artifact ", digest, ": blob vanished while reading"));
    actual = ContentDigest(*bytes);
  }
  if (actual != digest) {
    return DropBrokenArtifact(digest, absl::StrCat("artifact ", digest, ": blob ", blobs_.BlobPath(digest),
                                                   " is corrupt (its content hashes to ", actual,
                                                   "); dropped it from the store"));
  }
  ASSIGN_OR_RETURN(SqliteStatement touch, conn_->Prepare(kTouchArtifactSql));
  touch.Bind(1, NowUnixMs()).Bind(2, digest);
  RETURN_IF_ERROR(touch.Run());
  return bytes;
}

absl::StatusOr<bool> TuningDb::HasArtifact(const std::string& digest) {
  RETURN_IF_ERROR(CheckDigest(digest));
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(int64_t listed,
                   CountLocked(*conn_, "SELECT COUNT(*) FROM artifacts WHERE digest = ?1", {digest}));
  if (listed == 0) return false;
  ASSIGN_OR_RETURN(std::optional<int64_t> on_disk, blobs_.FileSize(digest));
  return on_disk.has_value();
}

absl::Status TuningDb::SetArtifactPinned(const std::string& digest, bool pinned) {
  RETURN_IF_ERROR(CheckDigest(digest));
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(SqliteStatement s, conn_->Prepare("UPDATE artifacts SET pinned = ?1 WHERE digest = ?2"));
  s.Bind(1, pinned ? 1 : 0).Bind(2, digest);
  RETURN_IF_ERROR(s.Run());
  if (sqlite3_changes(conn_->raw()) == 0) {
    return absl::NotFoundError(absl::StrCat("no artifact ", digest));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> TuningDb::GcArtifacts(int64_t max_bytes) {
  if (max_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("artifact gc with negative byte limit ", max_bytes));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::BeginImmediate(*conn_));
  ASSIGN_OR_RETURN(int64_t total, CountLocked(*conn_, "SELECT COALESCE(SUM(size), 0) FROM artifacts", {}));
  if (total <= max_bytes) return 0;

  std::vector<std::pair<std::string, int64_t>> victims;
  {
    ASSIGN_OR_RETURN(SqliteStatement lru,
                     conn_->Prepare("SELECT digest, size FROM artifacts WHERE pinned = 0 "
                                    "ORDER BY use_seq ASC, id ASC"));
    int64_t remaining = total;
    while (remaining > max_bytes) {
      ASSIGN_OR_RETURN(bool row, lru.Step());
      if (!row) break;
      victims.emplace_back(lru.ColumnText(0), lru.ColumnInt(1));
      remaining -= lru.ColumnInt(1);
    }
  }
  int64_t freed = 0;
  for (const auto& [digest, size] : victims) {
    ASSIGN_OR_RETURN(SqliteStatement del, conn_->Prepare("DELETE FROM artifacts WHERE digest = ?1"));
    del.Bind(1, digest);
    RETURN_IF_ERROR(del.Run());
    // Files go while the write lock is held, so no PutArtifact can re-list one
    // in between without re-checking its file.
    RETURN_IF_ERROR(blobs_.Remove(digest));
    freed += size;
  }
  RETURN_IF_ERROR(txn.Commit());
  return freed;
}

absl::StatusOr<TuningDb::Stats> TuningDb::GetStats() {
  std::lock_guard<std::mutex> lock(read_mu_);
  SqliteConnection& c = *reader_;
  // One read transaction: all counts describe the same snapshot.
  RETURN_IF_ERROR(c.Exec("BEGIN"));
  auto end = [&c] { (void)c.Exec("COMMIT"); };
  auto count = [&](const char* sql) { return CountLocked(c, sql, {}); };
  Stats stats;
  absl::Status status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(stats.workloads, count("SELECT COUNT(*) FROM workloads"));
    ASSIGN_OR_RETURN(stats.targets, count("SELECT COUNT(*) FROM targets"));
    ASSIGN_OR_RETURN(stats.records, count("SELECT COUNT(*) FROM records"));
    ASSIGN_OR_RETURN(stats.valid_records, count("SELECT COUNT(*) FROM records WHERE error = 0"));
    ASSIGN_OR_RETURN(stats.artifacts, count("SELECT COUNT(*) FROM artifacts"));
    ASSIGN_OR_RETURN(stats.artifact_bytes, count("SELECT COALESCE(SUM(size), 0) FROM artifacts"));
    ASSIGN_OR_RETURN(stats.compile_entries, count("SELECT COUNT(*) FROM compile_entries"));
    ASSIGN_OR_RETURN(stats.record_keys,
                     count("SELECT COUNT(*) FROM (SELECT DISTINCT workload_key, target_key, "
                           "space_version FROM records)"));
    ASSIGN_OR_RETURN(stats.answered_keys,
                     count("SELECT COUNT(*) FROM (SELECT DISTINCT workload_key, target_key, "
                           "space_version FROM records WHERE error = 0)"));
    ASSIGN_OR_RETURN(stats.workloads_answered,
                     count("SELECT COUNT(DISTINCT workload_key) FROM records WHERE error = 0"));
    ASSIGN_OR_RETURN(stats.jobs_running, count("SELECT COUNT(*) FROM tuning_jobs WHERE state = 0"));
    ASSIGN_OR_RETURN(stats.jobs_done, count("SELECT COUNT(*) FROM tuning_jobs WHERE state = 1"));
    ASSIGN_OR_RETURN(stats.jobs_failed, count("SELECT COUNT(*) FROM tuning_jobs WHERE state = 2"));
    return absl::OkStatus();
  }();
  end();
  RETURN_IF_ERROR(status);
  return stats;
}

absl::Status TuningDb::CheckIntegrity() {
  std::lock_guard<std::mutex> lock(read_mu_);
  ASSIGN_OR_RETURN(SqliteStatement s, reader_->Prepare("PRAGMA quick_check"));
  std::vector<std::string> problems;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    std::string line = s.ColumnText(0);
    if (line != "ok" && problems.size() < 5) problems.push_back(line);
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("tuning db ", reader_->path(), " failed its integrity check: ",
                                          absl::StrJoin(problems, "; ")));
}

absl::Status TuningDb::ForEachRecordLine(const std::function<absl::Status(const RecordLine&)>& fn) {
  std::lock_guard<std::mutex> lock(read_mu_);
  ASSIGN_OR_RETURN(
      SqliteStatement s,
      reader_->Prepare(absl::StrCat(
          "SELECT r.workload_key, r.target_key, r.space_version, r.compiler_version, r.config, "
          "r.median_ms, r.p10_ms, r.p90_ms, r.repeats, r.error, r.error_message, r.worker_id, "
          "r.created_unix_ms, "
          "w.key IS NOT NULL, w.canonical_text, w.kind, w.op_summary, w.flops, w.bytes, "
          "t.key IS NOT NULL, t.kind, t.arch, t.cpu_name, t.features, t.device_model, "
          "t.driver_version, t.toolkit_version "
          "FROM records r LEFT JOIN workloads w ON w.key = r.workload_key "
          "LEFT JOIN targets t ON t.key = r.target_key ORDER BY r.id")));
  // One statement is one read transaction: the export is a consistent snapshot.
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    RecordLine line;
    line.record = ReadRecord(s);
    line.workload.key = line.record.workload_key;
    if (s.ColumnInt(13) != 0) {
      line.workload.canonical_text = s.ColumnText(14);
      line.workload.kind = s.ColumnText(15);
      line.workload.op_summary = s.ColumnText(16);
      line.workload.flops = s.ColumnDouble(17);
      line.workload.bytes = s.ColumnDouble(18);
    }
    line.target.key = line.record.target_key;
    if (s.ColumnInt(19) != 0) {
      line.target.kind = s.ColumnText(20);
      line.target.arch = s.ColumnText(21);
      line.target.cpu_name = s.ColumnText(22);
      line.target.features = s.ColumnText(23);
      line.target.device_model = s.ColumnText(24);
      line.target.driver_version = s.ColumnText(25);
      line.target.toolkit_version = s.ColumnText(26);
    }
    RETURN_IF_ERROR(fn(line));
  }
  return absl::OkStatus();
}

absl::Status ValidateRecordLine(const RecordLine& l) {
  if (absl::Status s = ValidateRecord(l.record, 0); !s.ok()) {
    return absl::InvalidArgumentError(s.message().substr(s.message().find(": ") + 2));
  }
  if (l.workload.key != l.record.workload_key || l.target.key != l.record.target_key) {
    return absl::InvalidArgumentError(
        absl::StrCat("the record's workload/target keys (", l.record.workload_key, ", ",
                     l.record.target_key, ") differ from its workload/target (", l.workload.key, ", ",
                     l.target.key, ")"));
  }
  if (l.record.created_unix_ms <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("record of workload ", l.record.workload_key,
                                                   " has no created_unix_ms (part of its identity)"));
  }
  if (!std::isfinite(l.workload.flops) || l.workload.flops < 0 || !std::isfinite(l.workload.bytes) ||
      l.workload.bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("workload ", l.workload.key, " has bad flops or bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ImportCounts> TuningDb::ImportRecordLines(const std::vector<RecordLine>& lines) {
  for (size_t i = 0; i < lines.size(); ++i) {
    if (absl::Status s = ValidateRecordLine(lines[i]); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("line ", i, ": ", s.message()));
    }
  }
  ImportCounts counts;
  if (lines.empty()) return counts;
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = NowUnixMs();
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::BeginImmediate(*conn_));
  for (const RecordLine& l : lines) {
    ASSIGN_OR_RETURN(SqliteStatement w,
                     conn_->Prepare("INSERT INTO workloads (key, canonical_text, kind, op_summary, "
                                    "flops, bytes, created_unix_ms, updated_unix_ms) VALUES "
                                    "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7) ON CONFLICT (key) DO NOTHING"));
    w.Bind(1, l.workload.key).Bind(2, l.workload.canonical_text).Bind(3, l.workload.kind);
    w.Bind(4, l.workload.op_summary).Bind(5, l.workload.flops).Bind(6, l.workload.bytes).Bind(7, now);
    RETURN_IF_ERROR(w.Run());
    counts.workloads_added += sqlite3_changes(conn_->raw());
    ASSIGN_OR_RETURN(SqliteStatement t,
                     conn_->Prepare("INSERT INTO targets (key, kind, arch, cpu_name, features, "
                                    "device_model, driver_version, toolkit_version, "
                                    "created_unix_ms, updated_unix_ms) VALUES "
                                    "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9) "
                                    "ON CONFLICT (key) DO NOTHING"));
    t.Bind(1, l.target.key).Bind(2, l.target.kind).Bind(3, l.target.arch).Bind(4, l.target.cpu_name);
    t.Bind(5, l.target.features).Bind(6, l.target.device_model).Bind(7, l.target.driver_version);
    t.Bind(8, l.target.toolkit_version).Bind(9, now);
    RETURN_IF_ERROR(t.Run());
    counts.targets_added += sqlite3_changes(conn_->raw());
    ASSIGN_OR_RETURN(int64_t id, InsertRecordLocked(l.record, now));
    if (id != 0) {
      ++counts.records_added;
    } else {
      ++counts.records_present;
    }
  }
  RETURN_IF_ERROR(txn.Commit());
  return counts;
}

absl::StatusOr<std::optional<TuningJob>> TuningDb::ReadJobLocked(SqliteConnection& conn, int64_t job_id) {
  std::optional<TuningJob> job;
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     conn.Prepare("SELECT id, workload_key, target_key, space_version, state, "
                                  "task_template, message, created_unix_ms, updated_unix_ms, trials, "
                                  "strategy FROM tuning_jobs WHERE id = ?1"));
    s.Bind(1, job_id);
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return std::nullopt;
    job.emplace();
    job->id = s.ColumnInt(0);
    job->workload_key = s.ColumnText(1);
    job->target_key = s.ColumnText(2);
    job->space_version = static_cast<int>(s.ColumnInt(3));
    job->state = static_cast<JobState>(s.ColumnInt(4));
    job->task_template = s.ColumnBlob(5);
    job->message = s.ColumnText(6);
    job->created_unix_ms = s.ColumnInt(7);
    job->updated_unix_ms = s.ColumnInt(8);
    job->trials = static_cast<int>(s.ColumnInt(9));
    job->strategy = s.ColumnText(10);
  }
  ASSIGN_OR_RETURN(SqliteStatement c,
                   conn.Prepare("SELECT config, COALESCE(record_id, 0), predicted FROM tuning_job_candidates "
                                "WHERE job_id = ?1 ORDER BY position"));
  c.Bind(1, job_id);
  while (true) {
    ASSIGN_OR_RETURN(bool row, c.Step());
    if (!row) break;
    JobCandidate candidate{c.ColumnText(0), c.ColumnInt(1), std::nullopt};
    if (!c.ColumnIsNull(2)) candidate.predicted = c.ColumnDouble(2);
    job->candidates.push_back(std::move(candidate));
  }
  return job;
}

absl::StatusOr<TuningDb::BeginJobResult> TuningDb::BeginJob(const std::string& workload_key,
                                                            const std::string& target_key,
                                                            int space_version,
                                                            const std::string& task_template,
                                                            const std::vector<std::string>& candidates,
                                                            int trials, const std::string& strategy,
                                                            const std::vector<double>& predicted) {
  if (workload_key.empty() || target_key.empty() || space_version < 0) {
    return absl::InvalidArgumentError(absl::StrCat("tuning job needs a workload key, a target key and a "
                                                   "non-negative space version (got \"", workload_key,
                                                   "\", \"", target_key, "\", ", space_version, ")"));
  }
  if (candidates.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tuning job for workload ", workload_key, " has no candidate schedules"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = NowUnixMs();
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::BeginImmediate(*conn_));
  int64_t existing = 0;
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     conn_->Prepare("SELECT id FROM tuning_jobs WHERE workload_key = ?1 AND "
                                    "target_key = ?2 AND space_version = ?3 AND state = 0"));
    s.Bind(1, workload_key).Bind(2, target_key).Bind(3, space_version);
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) existing = s.ColumnInt(0);
  }
  BeginJobResult result;
  if (existing != 0) {
    ASSIGN_OR_RETURN(std::optional<TuningJob> job, ReadJobLocked(*conn_, existing));
    RETURN_IF_ERROR(txn.Commit());
    if (!job) return absl::InternalError("running tuning job vanished inside its transaction");
    result.job = std::move(*job);
    return result;
  }
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     conn_->Prepare("INSERT INTO tuning_jobs (workload_key, target_key, space_version, "
                                    "state, task_template, message, created_unix_ms, updated_unix_ms, "
                                    "trials, strategy) VALUES (?1, ?2, ?3, 0, ?4, '', ?5, ?5, ?6, ?7)"));
    s.Bind(1, workload_key).Bind(2, target_key).Bind(3, space_version).BindBlob(4, task_template).Bind(5, now);
    s.Bind(6, static_cast<int64_t>(trials)).Bind(7, strategy);
    RETURN_IF_ERROR(s.Run());
  }
  int64_t id = sqlite3_last_insert_rowid(conn_->raw());
  for (size_t i = 0; i < candidates.size(); ++i) {
    RETURN_IF_ERROR(InsertCandidateLocked(id, static_cast<int>(i), candidates[i], PredictedAt(predicted, i)));
  }
  RETURN_IF_ERROR(txn.Commit());
  result.created = true;
  result.job.id = id;
  result.job.workload_key = workload_key;
  result.job.target_key = target_key;
  result.job.space_version = space_version;
  result.job.task_template = task_template;
  result.job.trials = trials;
  result.job.strategy = strategy;
  result.job.created_unix_ms = result.job.updated_unix_ms = now;
  for (size_t i = 0; i < candidates.size(); ++i) {
    result.job.candidates.push_back(JobCandidate{candidates[i], 0, PredictedAt(predicted, i)});
  }
  return result;
}

absl::Status TuningDb::InsertCandidateLocked(int64_t job_id, int position, const std::string& config,
                                             std::optional<double> predicted) {
  ASSIGN_OR_RETURN(SqliteStatement s,
                   conn_->Prepare("INSERT INTO tuning_job_candidates (job_id, position, config, predicted) "
                                  "VALUES (?1, ?2, ?3, ?4)"));
  s.Bind(1, job_id).Bind(2, position).Bind(3, config);
  if (predicted) {
    s.Bind(4, *predicted);
  } else {
    s.BindNull(4);
  }
  return s.Run();
}

absl::StatusOr<int> TuningDb::AddJobCandidates(int64_t job_id, const std::vector<std::string>& configs,
                                               const std::vector<double>& predicted) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::BeginImmediate(*conn_));
  ASSIGN_OR_RETURN(std::optional<TuningJob> job, ReadJobLocked(*conn_, job_id));
  if (!job) return absl::InvalidArgumentError(absl::StrCat("no tuning job ", job_id));
  if (job->state != JobState::kRunning) {
    return absl::InvalidArgumentError(absl::StrCat("tuning job ", job_id, " is ", std::string(JobStateName(job->state)),
                                                   ", not running: it takes no more candidates"));
  }
  std::set<std::string> listed;
  for (const JobCandidate& c : job->candidates) listed.insert(c.config);
  const int first = static_cast<int>(job->candidates.size());
  int position = first;
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string& config = configs[i];
    if (!listed.insert(config).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tuning job ", job_id, " already lists candidate '", config, "'"));
    }
    RETURN_IF_ERROR(InsertCandidateLocked(job_id, position++, config, PredictedAt(predicted, i)));
  }
  ASSIGN_OR_RETURN(SqliteStatement u, conn_->Prepare("UPDATE tuning_jobs SET updated_unix_ms = ?1 WHERE id = ?2"));
  u.Bind(1, NowUnixMs()).Bind(2, job_id);
  RETURN_IF_ERROR(u.Run());
  RETURN_IF_ERROR(txn.Commit());
  return first;
}

absl::Status TuningDb::AddJobRecord(int64_t job_id, int position, const Record& record) {
  RETURN_IF_ERROR(ValidateRecord(record, 0));
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = NowUnixMs();
  ASSIGN_OR_RETURN(SqliteTransaction txn, SqliteTransaction::BeginImmediate(*conn_));
  {
    ASSIGN_OR_RETURN(SqliteStatement s,
                     conn_->Prepare("SELECT j.workload_key, j.target_key, j.space_version, j.state, "
                                    "c.config, COALESCE(c.record_id, 0) FROM tuning_jobs j JOIN "
                                    "tuning_job_candidates c ON c.job_id = j.id "
                                    "WHERE j.id = ?1 AND c.position = ?2"));
    s.Bind(1, job_id).Bind(2, position);
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) {
      return absl::InvalidArgumentError(
          absl::StrCat("tuning job ", job_id, " has no candidate ", position));
    }
    if (s.ColumnText(0) != record.workload_key || s.ColumnText(1) != record.target_key ||
        s.ColumnInt(2) != record.space_version || s.ColumnText(4) != record.config) {
      return absl::InvalidArgumentError(absl::StrCat(
          "record for workload ", record.workload_key, ", target ", record.target_key, ", config ",
          record.config, " does not belong to candidate ", position, " of tuning job ", job_id));
    }
    if (s.ColumnInt(5) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("candidate ", position, " of tuning job ", job_id, " is already measured"));
    }
  }
  ASSIGN_OR_RETURN(int64_t record_id, InsertRecordLocked(record, now));
  if (record_id == 0) {
    // An identical record exists already: point the candidate at it.
    Record r = record;
    if (r.created_unix_ms == 0) r.created_unix_ms = now;
    ASSIGN_OR_RETURN(SqliteStatement find, conn_->Prepare("SELECT id FROM records WHERE record_key = ?1"));
    find.Bind(1, RecordKey(r));
    ASSIGN_OR_RETURN(bool row, find.Step());
    if (!row) return absl::InternalError("record neither inserted nor present");
    record_id = find.ColumnInt(0);
  }
  {
    ASSIGN_OR_RETURN(SqliteStatement u,
                     conn_->Prepare("UPDATE tuning_job_candidates SET record_id = ?1 "
                                    "WHERE job_id = ?2 AND position = ?3"));
    u.Bind(1, record_id).Bind(2, job_id).Bind(3, position);
    RETURN_IF_ERROR(u.Run());
  }
  {
    ASSIGN_OR_RETURN(SqliteStatement u,
                     conn_->Prepare("UPDATE tuning_jobs SET updated_unix_ms = ?1 WHERE id = ?2"));
    u.Bind(1, now).Bind(2, job_id);
    RETURN_IF_ERROR(u.Run());
  }
  return txn.Commit();
}

absl::Status TuningDb::FinishJob(int64_t job_id, JobState state, const std::string& message) {
  if (state == JobState::kRunning) {
    return absl::InvalidArgumentError(absl::StrCat("tuning job ", job_id, " cannot finish as running"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(SqliteStatement s,
                   conn_->Prepare("UPDATE tuning_jobs SET state = ?1, message = ?2, updated_unix_ms = ?3 "
                                  "WHERE id = ?4 AND state = 0"));
  s.Bind(1, static_cast<int>(state)).Bind(2, message).Bind(3, NowUnixMs()).Bind(4, job_id);
  RETURN_IF_ERROR(s.Run());
  if (sqlite3_changes(conn_->raw()) == 0) {
    return absl::FailedPreconditionError(absl::StrCat("no running tuning job ", job_id));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<TuningJob>> TuningDb::GetJob(int64_t job_id) {
  std::lock_guard<std::mutex> lock(read_mu_);
  RETURN_IF_ERROR(reader_->Exec("BEGIN"));
  absl::StatusOr<std::optional<TuningJob>> job = ReadJobLocked(*reader_, job_id);
  (void)reader_->Exec("COMMIT");
  return job;
}

absl::StatusOr<std::vector<TuningJob>> TuningDb::ListJobs(std::optional<JobState> state) {
  std::lock_guard<std::mutex> lock(read_mu_);
  RETURN_IF_ERROR(reader_->Exec("BEGIN"));
  absl::StatusOr<std::vector<TuningJob>> jobs = [&]() -> absl::StatusOr<std::vector<TuningJob>> {
    std::vector<int64_t> ids;
    {
      ASSIGN_OR_RETURN(SqliteStatement s,
                       reader_->Prepare("SELECT id FROM tuning_jobs WHERE ?1 < 0 OR state = ?1 ORDER BY id"));
      s.Bind(1, state ? static_cast<int>(*state) : -1);
      while (true) {
        ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        ids.push_back(s.ColumnInt(0));
      }
    }
    std::vector<TuningJob> out;
    for (int64_t id : ids) {
      ASSIGN_OR_RETURN(std::optional<TuningJob> job, ReadJobLocked(*reader_, id));
      if (job) out.push_back(std::move(*job));
    }
    return out;
  }();
  (void)reader_->Exec("COMMIT");
  return jobs;
}

}  // namespace kiln::tuningdb

namespace kiln::tuningdb {

// Times the writer connection's transactions from SQLite's statement profile
// (sqlite3_trace_v2): a statement's end less its run time is its start.
struct TuningDb::WriteClock {
  sqlite3* db = nullptr;
  std::function<void(double)> observer;
  std::optional<std::chrono::steady_clock::time_point> began;  // of the open BEGIN IMMEDIATE
  ~WriteClock() { sqlite3_trace_v2(db, 0, nullptr, nullptr); }

  static int OnStatement(unsigned /*type*/, void* context, void* statement, void* nanoseconds) {
    auto* clock = static_cast<WriteClock*>(context);
    const std::string_view sql = sqlite3_sql(static_cast<sqlite3_stmt*>(statement));
    const auto now = std::chrono::steady_clock::now();
    if (sql == "BEGIN IMMEDIATE") {
      clock->began = now - std::chrono::nanoseconds(*static_cast<sqlite3_int64*>(nanoseconds));
    } else if (sql == "COMMIT" && clock->began) {
      clock->observer(std::chrono::duration<double>(now - *clock->began).count());
      clock->began.reset();
    } else if (sql == "ROLLBACK") {
      clock->began.reset();
    }
    return 0;
  }
};

void TuningDb::ObserveWriteTransactions(std::function<void(double seconds)> observer) {
  std::lock_guard<std::mutex> lock(mu_);
  write_clock_.reset();
  if (!observer) return;
  write_clock_ = std::make_shared<WriteClock>();
  write_clock_->db = conn_->raw();
  write_clock_->observer = std::move(observer);
  sqlite3_trace_v2(conn_->raw(), SQLITE_TRACE_PROFILE, &WriteClock::OnStatement, write_clock_.get());
}

}  // namespace kiln::tuningdb
