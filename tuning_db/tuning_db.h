// The shared tuning database: targets, workloads, append-only measurement records
// and their best-record queries, the compile cache (compile key -> package
// digest) and the content-addressed artifact store, in one SQLite file that
// several threads and processes share. Format and rules: docs/tuning-db.md.
#pragma once

#include <cstdint>
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

// Compile cache: compile_key (hash of model + shapes + target + compiler
// version) -> the digest of the package an earlier compile produced.
struct CompileEntry {
  std::string compile_key, package_digest;
  int64_t package_size = 0;
  int64_t created_unix_ms = 0;
};

// Thread-safe: one SQLite connection guarded by a mutex (WAL mode, 5 s busy
// timeout, write transactions take the write lock up front), so several server
// threads and several processes can share one file. Artifact blob files are
// read and written outside the mutex.
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

  // Appends records in one transaction: all or none. Every record is validated
  // first (non-empty keys, space_version >= 0, a known error code, finite
  // non-negative times); a bad one gives INVALID_ARGUMENT naming its index.
  absl::Status AddRecords(const std::vector<Record>& records);

  // Up to k valid (kOk) records with exactly this workload, target and
  // schedule-space version, fastest median first (ties: older first).
  absl::StatusOr<std::vector<Record>> TopK(const std::string& workload_key,
                                           const std::string& target_key, int space_version,
                                           int k);

  // Why TopK is empty, as one line: "no workload <key>", "workload <key> known
  // but never measured", "workload <key> known but measured only for targets:
  // a, b", "... records only for schedule-space versions: 1", "... only failed
  // records (N): build_error x2, ...". When TopK is not empty: "hit: N valid
  // records ...".
  absl::StatusOr<std::string> ExplainMiss(const std::string& workload_key,
                                          const std::string& target_key, int space_version);

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

  struct Stats {
    int64_t workloads = 0, targets = 0, records = 0, valid_records = 0, artifacts = 0,
            artifact_bytes = 0, compile_entries = 0;
  };
  absl::StatusOr<Stats> GetStats();

  // PRAGMA quick_check: OK, or DATA_LOSS with SQLite's findings.
  absl::Status CheckIntegrity();

 private:
  TuningDb(std::unique_ptr<SqliteConnection> conn, std::string artifact_root)
      : conn_(std::move(conn)), blobs_(std::move(artifact_root)) {}

  absl::StatusOr<int64_t> CountLocked(const std::string& sql, const std::vector<std::string>& args);
  // Drops a bad blob and its row; returns `reason` as DATA_LOSS.
  absl::Status DropBrokenArtifact(const std::string& digest, const std::string& reason);

  std::mutex mu_;
  std::unique_ptr<SqliteConnection> conn_;  // guarded by mu_
  ArtifactBlobDir blobs_;
};

}  // namespace kiln::tuningdb
