// The shared tuning database: targets, workloads, append-only measurement records
// and their best-record queries, the compile cache (compile key -> package
// digest) and the content-addressed artifact store, in one SQLite file that
// several threads and processes share. Format and rules: docs/tuning-db.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tuning_db/artifact_store.h"
#include "tuning_db/sqlite_connection.h"

namespace kiln::tuningdb {

// A device a schedule was measured on. `key` is canonical and must change
// whenever anything that can change a kernel's speed changes (ISA features,
// device model, driver or toolkit version), e.g. "cpu/x86_64/znver4/<features-hash>".
struct TargetInfo {
  std::string key;
  std::string kind, arch, cpu_name, features, device_model, driver_version, toolkit_version;
};

// A fusion group's canonical form; `key` is a stable hash of canonical_text.
struct WorkloadInfo {
  std::string key;
  std::string canonical_text;
  std::string kind;
  std::string op_summary;
  double flops = 0;
  double bytes = 0;
  // The workload graph, serialized (kiln.v1.Graph): what the cost model lowers
  // to compute a record's features. Empty when not known (rows written before
  // schema 3, imports); an upsert with an empty graph keeps the stored one.
  std::string graph;
};

enum class RecordError { kOk = 0, kBuildError = 1, kWrongAnswer = 2, kRuntimeError = 3, kTimeout = 4 };

// "ok", "build_error", "wrong_answer", "runtime_error", "timeout".
std::string_view RecordErrorName(RecordError error);

// One measurement of one candidate schedule (`config`). A record answers a query
// only when workload_key, target_key and space_version all match and error is
// kOk. created_unix_ms = 0 means "now" when added.
struct Record {
  std::string workload_key, target_key;
  int space_version = 0;
  std::string compiler_version, config;
  double median_ms = 0, p10_ms = 0, p90_ms = 0;
  int repeats = 0;
  RecordError error = RecordError::kOk;
  std::string error_message, worker_id;
  int64_t created_unix_ms = 0;
};

// The record's content key: created_unix_ms as 12 hex digits, '-', then 32 hex
// digits of the SHA-256 of every field (keys, versions, config, times, repeats,
// error, worker, created_unix_ms). It is stored UNIQUE, so adding or importing
// an identical record again adds nothing.
std::string RecordKey(const Record& record);

// A record with the workload and target it belongs to: one line of an export.
// When the database has no row for the workload or target, only its key is set.
struct RecordLine {
  Record record;
  WorkloadInfo workload;
  TargetInfo target;
};

// What ImportRecordLines checks of each line (the record's own checks, keys that
// agree, created_unix_ms > 0, finite flops/bytes); INVALID_ARGUMENT says why.
absl::Status ValidateRecordLine(const RecordLine& line);

struct ImportCounts {
  int64_t records_added = 0, records_present = 0, workloads_added = 0, targets_added = 0;
};

// A tuning job: the search for the best schedule of one workload on one target
// in one schedule-space version. It lives in the database so that a restarted
// server resumes it: the candidates still unmeasured are measured, each result
// recorded as it arrives.
// kCancelled: an admin ended it (AdminService.CancelJob).
enum class JobState { kRunning = 0, kDone = 1, kFailed = 2, kCancelled = 3 };
std::string_view JobStateName(JobState state);  // "running", "done", "failed", "cancelled"

struct JobCandidate {
  std::string config;
  int64_t record_id = 0;  // the record of its measurement; 0 while unmeasured
  // The search's score for it when proposed (the cost model's, higher =
  // faster; see CostModelStore::Score); nullopt when there was no model.
  std::optional<double> predicted;
  bool measured() const { return record_id != 0; }
};

struct TuningJob {
  int64_t id = 0;
  std::string workload_key, target_key;
  int space_version = 0;
  JobState state = JobState::kRunning;
  // Opaque to the database: what the server needs to re-submit a candidate (a
  // serialized kiln.v1.MeasureTask without its schedule_config).
  std::string task_template;
  std::string message;  // why it failed, or a summary when done
  // The goal: the job ends when the triple has `trials` measured schedules (its
  // own and earlier ones) or the space has no more; `strategy` proposes the
  // candidates of each round ("random", "evolutionary"). Candidates grow round
  // by round (AddJobCandidates).
  int trials = 0;
  std::string strategy = "random";
  std::vector<JobCandidate> candidates;
  int64_t created_unix_ms = 0, updated_unix_ms = 0;
};

// Compile cache: compile_key (hash of model + shapes + target + compiler
// version) -> the digest of the package an earlier compile produced, and
// (optionally) what that compile answered, to answer again without compiling.
struct CompileEntry {
  std::string compile_key, package_digest;
  int64_t package_size = 0;
  int64_t created_unix_ms = 0;
  // Opaque to the database (the server's serialized answer); empty: none.
  std::string result;
  // The trials per workload the records behind `result` satisfy.
  int64_t trials = 0;
  // RecordsSeen() of the compile's workloads when `result` was written: the
  // answer holds while RecordsSeen() of the same workloads says the same.
  std::string records_seen;
};

// Thread-safe, and several processes can share one file. Two SQLite connections
// in WAL mode with a 5 s busy timeout: one writer (every write, in batched
// BEGIN IMMEDIATE transactions) and one reader (the queries), each guarded by
// its own mutex, so a query never waits for a write transaction in this
// process and never blocks one in another. Artifact blob files are read and
// written outside the mutexes.
class TuningDb {
 public:
  // Opens or creates the file (and its parent directory), enables WAL and the
  // busy timeout, creates/migrates the schema. A file that is not a SQLite
  // database gives FAILED_PRECONDITION, a corrupt one DATA_LOSS, both naming the
  // path; a file from a newer schema gives FAILED_PRECONDITION.
  static absl::StatusOr<std::unique_ptr<TuningDb>> Open(const std::string& path);

  const std::string& path() const { return conn_->path(); }
  // Where artifact blobs live: path() + ".artifacts".
  const std::string& artifact_dir() const { return blobs_.root(); }

  // Insert, or update every field of the row with the same key.
  absl::Status UpsertTarget(const TargetInfo& target);
  absl::Status UpsertWorkload(const WorkloadInfo& workload);
  absl::StatusOr<std::optional<TargetInfo>> GetTarget(const std::string& key);
  absl::StatusOr<std::optional<WorkloadInfo>> GetWorkload(const std::string& key);
  // Other targets of the same kind and architecture as `key` (another
  // microarchitecture or feature set of the same ISA: a sibling's records are
  // a warm start for a new target), by key. Empty when `key` is not listed.
  absl::StatusOr<std::vector<std::string>> SiblingTargets(const std::string& key);

  // Appends records in one transaction: all or none. Every record is validated
  // first (non-empty keys, space_version >= 0, a known error code, finite
  // non-negative times); a bad one gives INVALID_ARGUMENT naming its index. A
  // record identical to one already stored (same RecordKey, which includes
  // created_unix_ms) is skipped.
  absl::Status AddRecords(const std::vector<Record>& records);

  // Export: calls `fn` for every record, oldest first, with its workload and
  // target, inside one read transaction (a consistent snapshot). Stops at the
  // first error `fn` returns.
  absl::Status ForEachRecordLine(const std::function<absl::Status(const RecordLine&)>& fn);
  // Import, in one transaction: workloads and targets that are not here yet are
  // added (existing rows are kept), records not here yet (by RecordKey) are
  // appended. Importing the same lines twice adds nothing the second time.
  absl::StatusOr<ImportCounts> ImportRecordLines(const std::vector<RecordLine>& lines);

  // Up to k valid (kOk) records with exactly this workload, target and
  // schedule-space version, fastest median first (ties: older first).
  absl::StatusOr<std::vector<Record>> TopK(const std::string& workload_key,
                                           const std::string& target_key, int space_version,
                                           int k);

  // Valid measurements per config for the triple: how often each config was
  // measured and the mean of its medians, fastest mean first (ties: measured
  // first). What the tuner crowns by: a config measured twice is judged by
  // both measurements, so one lucky run does not make a winner.
  struct ConfigStat {
    std::string config;
    int count = 0;
    double mean_ms = 0;
    double p10_ms = 0, p90_ms = 0;  // lowest p10 and highest p90 over its records
  };
  absl::StatusOr<std::vector<ConfigStat>> ConfigStats(const std::string& workload_key, const std::string& target_key,
                                                      int space_version, int k);

  // The evidence behind a config: the RecordKey of each of its valid records
  // for the triple, oldest first, and how many distinct configs of the triple
  // have valid records (the field ConfigStats ranked). One read transaction.
  struct ConfigEvidence {
    std::vector<std::string> record_keys;
    int configs_ranked = 0;
    std::vector<std::string> workers;  // who measured those records, sorted, distinct
  };
  absl::StatusOr<ConfigEvidence> Evidence(const std::string& workload_key, const std::string& target_key,
                                          int space_version, const std::string& config);

  // Why TopK is empty, as one line: "no workload <key>", "workload <key> known
  // but never measured", "workload <key> known but measured only for targets:
  // a, b", "... records only for schedule-space versions: 1", "... only failed
  // records (N): build_error x2, ...". When TopK is not empty: "hit: N valid
  // records ...".
  absl::StatusOr<std::string> ExplainMiss(const std::string& workload_key,
                                          const std::string& target_key, int space_version);

  // Every distinct config with a record (errors included) for the triple:
  // what a search must not propose again.
  absl::StatusOr<std::vector<std::string>> MeasuredConfigs(const std::string& workload_key,
                                                           const std::string& target_key, int space_version);

  // Every valid record of a target and schedule-space version, oldest first:
  // the cost model's training set.
  absl::StatusOr<std::vector<Record>> ValidRecords(const std::string& target_key, int space_version);

  // Every record of the triple (errors included) in the order stored, each
  // with the tuning job that proposed it, if one did, and what its search
  // predicted: the history `kiln report` draws. A config's first record is a
  // trial; later ones are re-measurements.
  struct HistoryEntry {
    Record record;
    int64_t record_id = 0;
    int64_t job_id = 0;     // 0: not measured for a job (a re-measurement, an import)
    std::string strategy;   // the job's; empty when job_id is 0
    std::optional<double> predicted;
  };
  absl::StatusOr<std::vector<HistoryEntry>> TuningHistory(const std::string& workload_key,
                                                          const std::string& target_key, int space_version);

  // Where the records of each workload (errors included) stand on the target
  // and space version: "<workload key> <newest record id>" per line, in the
  // order given, id 0 for none. Records are append-only, so an unchanged
  // answer means no record was added since. One read; no workload twice.
  absl::StatusOr<std::string> RecordsSeen(const std::vector<std::string>& workload_keys,
                                          const std::string& target_key, int space_version);
  // The workload keys of a RecordsSeen() answer, in its order.
  static std::vector<std::string> WorkloadsOfRecordsSeen(std::string_view records_seen);

  // All records (errors included) for the triple; -1 when the database fails.
  int64_t CountRecords(const std::string& workload_key, const std::string& target_key,
                       int space_version);

  // Insert or replace the entry for compile_key. package_digest must be a
  // "sha256:<64 hex>" digest.
  absl::Status PutCompileEntry(const CompileEntry& entry);
  absl::StatusOr<std::optional<CompileEntry>> GetCompileEntry(const std::string& compile_key);

  // Stores `bytes` under their digest ("sha256:<64 hex>", returned). Storing
  // the same bytes again is cheap and marks them used; pin = true pins them
  // (pin = false never unpins: use SetArtifactPinned).
  absl::StatusOr<std::string> PutArtifact(std::string_view bytes, bool pin = false);
  // The bytes, or nullopt when the store has no such artifact. Verifies the
  // digest of what it read: a corrupt or missing blob gives DATA_LOSS and is
  // dropped from the store (so a later PutArtifact repairs it). Marks it used.
  absl::StatusOr<std::optional<std::string>> GetArtifact(const std::string& digest);
  // Whether the store lists the artifact and its blob file exists (no hashing).
  absl::StatusOr<bool> HasArtifact(const std::string& digest);
  // NOT_FOUND when the store has no such artifact.
  absl::Status SetArtifactPinned(const std::string& digest, bool pinned);
  // Evicts unpinned artifacts, least recently used first, until the total size
  // of all artifacts is <= max_bytes (pinned ones count but are never evicted).
  // Returns the bytes freed.
  absl::StatusOr<int64_t> GcArtifacts(int64_t max_bytes);

  // Tuning jobs (see TuningJob). BeginJob records a running job with its
  // candidates in order; when the triple already has a running job (started by
  // another thread or process, or left by a server that stopped), that job is
  // returned instead and `created` is false.
  struct BeginJobResult {
    TuningJob job;
    bool created = false;
  };
  // `trials` and `strategy` are the job's goal (TuningJob); `predicted` as for
  // AddJobCandidates.
  absl::StatusOr<BeginJobResult> BeginJob(const std::string& workload_key,
                                          const std::string& target_key, int space_version,
                                          const std::string& task_template,
                                          const std::vector<std::string>& candidates, int trials = 0,
                                          const std::string& strategy = "random",
                                          const std::vector<double>& predicted = {});
  // Appends candidates to a running job (positions after its last), in one
  // transaction; returns the position of the first. A config the job already
  // lists is INVALID_ARGUMENT, as is a job that is not running. `predicted`,
  // when given, holds each config's predicted score (NaN: none).
  absl::StatusOr<int> AddJobCandidates(int64_t job_id, const std::vector<std::string>& configs,
                                       const std::vector<double>& predicted = {});
  // Appends the record of candidate `position` of a running job and marks the
  // candidate measured, in one transaction. A candidate already measured keeps
  // its first record (FAILED_PRECONDITION); an unknown job or position, or a
  // record for another workload/target/space version, is INVALID_ARGUMENT.
  absl::Status AddJobRecord(int64_t job_id, int position, const Record& record);
  // Ends a running job (state kDone, kFailed or kCancelled) with a message.
  absl::Status FinishJob(int64_t job_id, JobState state, const std::string& message);
  absl::StatusOr<std::optional<TuningJob>> GetJob(int64_t job_id);
  // Jobs in `state` (all jobs when nullopt), oldest first, with candidates.
  absl::StatusOr<std::vector<TuningJob>> ListJobs(std::optional<JobState> state);

  struct Stats {
    int64_t workloads = 0, targets = 0, records = 0, valid_records = 0, artifacts = 0,
            artifact_bytes = 0, compile_entries = 0;
    // Best-record coverage: (workload, target, space version) keys that have
    // records, and how many of them have at least one valid record (a TopK
    // answer); workloads with at least one valid record anywhere.
    int64_t record_keys = 0, answered_keys = 0, workloads_answered = 0;
    int64_t jobs_running = 0, jobs_done = 0, jobs_failed = 0;
  };
  absl::StatusOr<Stats> GetStats();

  // PRAGMA quick_check: OK, or DATA_LOSS with SQLite's findings.
  absl::Status CheckIntegrity();

 private:
  TuningDb(std::unique_ptr<SqliteConnection> conn, std::unique_ptr<SqliteConnection> reader,
           std::string artifact_root)
      : conn_(std::move(conn)), reader_(std::move(reader)), blobs_(std::move(artifact_root)) {}

  static absl::StatusOr<int64_t> CountLocked(SqliteConnection& conn, const std::string& sql,
                                             const std::vector<std::string>& args);
  // Requires mu_ and an open write transaction. Inserts unless present;
  // returns the new row id, or 0 when an identical record is already stored.
  absl::StatusOr<int64_t> InsertRecordLocked(const Record& record, int64_t now);
  absl::StatusOr<std::optional<TuningJob>> ReadJobLocked(SqliteConnection& conn, int64_t job_id);
  // Requires mu_ and an open write transaction.
  absl::Status InsertCandidateLocked(int64_t job_id, int position, const std::string& config,
                                     std::optional<double> predicted);
  // Drops a bad blob and its row; returns `reason` as DATA_LOSS.
  absl::Status DropBrokenArtifact(const std::string& digest, const std::string& reason);

  std::mutex mu_;
  std::unique_ptr<SqliteConnection> conn_;  // the writer, guarded by mu_
  std::mutex read_mu_;
  std::unique_ptr<SqliteConnection> reader_;  // queries only, guarded by read_mu_
  ArtifactBlobDir blobs_;

 public:
  // Calls `observer` with the seconds of every write transaction of this
  // object that commits, from the start of BEGIN IMMEDIATE (its wait for the
  // write lock included) to the end of COMMIT, on the writing thread while it
  // holds the write lock: keep it short. Replaces an earlier observer. For the
  // server's metrics.
  void ObserveWriteTransactions(std::function<void(double seconds)> observer);

 private:
  struct WriteClock;
  std::shared_ptr<WriteClock> write_clock_;  // last: detached before the connections close
};

}  // namespace kiln::tuningdb
