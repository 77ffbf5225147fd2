// `kiln db export|import|stats|gc`: maintenance of a tuning database file
// (JSON-lines export and idempotent import, statistics, artifact GC).
#include <cstdio>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "base/exit_codes.h"
#include "client/commands.h"
#include "client/json_output.h"
#include "tuning_db/record_jsonl.h"
#include "tuning_db/tuning_db.h"

namespace kiln::client {
namespace {

int Export(tuningdb::TuningDb& db) {
  std::ios::sync_with_stdio(false);
  absl::StatusOr<int64_t> lines = tuningdb::ExportRecordsJsonl(db, std::cout);
  if (!lines.ok()) return ReportError("db export", lines.status());
  std::fprintf(stderr, "kiln db export: %lld records from %s\n", static_cast<long long>(*lines),
               db.path().c_str());
  return 0;
}

int Import(tuningdb::TuningDb& db, const std::string& file, bool json) {
  if (file.empty()) {
    return ReportError("db import", absl::InvalidArgumentError("name the file to import (or - for stdin)"));
  }
  absl::StatusOr<tuningdb::ImportCounts> counts;
  if (file == "-") {
    counts = tuningdb::ImportRecordsJsonl(db, std::cin, "<stdin>");
  } else {
    std::ifstream in(file);
    if (!in) return ReportError("db import", absl::NotFoundError(absl::StrCat("cannot open '", file, "'")));
    counts = tuningdb::ImportRecordsJsonl(db, in, file);
  }
  if (!counts.ok()) return ReportError("db import", counts.status());
  if (json) {
    std::printf("%s\n", JsonObject()
                            .Add("db", db.path())
                            .Add("records_added", counts->records_added)
                            .Add("records_present", counts->records_present)
                            .Add("workloads_added", counts->workloads_added)
                            .Add("targets_added", counts->targets_added)
                            .str()
                            .c_str());
    return kExitOk;
  }
  std::printf("imported %lld records (%lld already present), %lld new workloads, %lld new targets\n",
              static_cast<long long>(counts->records_added), static_cast<long long>(counts->records_present),
              static_cast<long long>(counts->workloads_added), static_cast<long long>(counts->targets_added));
  return 0;
}

int Stats(tuningdb::TuningDb& db, bool json) {
  absl::StatusOr<tuningdb::TuningDb::Stats> s = db.GetStats();
  if (!s.ok()) return ReportError("db stats", s.status());
  auto ll = [](int64_t v) { return static_cast<long long>(v); };
  double coverage = s->record_keys == 0 ? 0.0 : static_cast<double>(s->answered_keys) / s->record_keys;
  if (json) {
    std::printf("%s\n", JsonObject()
                            .Add("db", db.path())
                            .Add("workloads", s->workloads)
                            .Add("targets", s->targets)
                            .Add("records", s->records)
                            .Add("valid_records", s->valid_records)
                            .Add("record_keys", s->record_keys)
                            .Add("answered_keys", s->answered_keys)
                            .Add("best_record_coverage", coverage)
                            .Add("workloads_answered", s->workloads_answered)
                            .Add("artifacts", s->artifacts)
                            .Add("artifact_bytes", s->artifact_bytes)
                            .Add("compile_entries", s->compile_entries)
                            .Add("jobs_running", s->jobs_running)
                            .Add("jobs_done", s->jobs_done)
                            .Add("jobs_failed", s->jobs_failed)
                            .str()
                            .c_str());
    return kExitOk;
  }
  std::printf("database       %s\n", db.path().c_str());
  std::printf("workloads      %lld (%lld with a best record)\n", ll(s->workloads), ll(s->workloads_answered));
  std::printf("targets        %lld\n", ll(s->targets));
  std::printf("records        %lld (%lld valid)\n", ll(s->records), ll(s->valid_records));
  std::printf("best records   %lld of %lld (workload, target, space version) keys answered (%.1f%%)\n",
              ll(s->answered_keys), ll(s->record_keys), 100.0 * coverage);
  std::printf("artifacts      %lld (%lld bytes)\n", ll(s->artifacts), ll(s->artifact_bytes));
  std::printf("compile cache  %lld entries\n", ll(s->compile_entries));
  std::printf("tuning jobs    %lld running, %lld done, %lld failed\n", ll(s->jobs_running), ll(s->jobs_done),
              ll(s->jobs_failed));
  return 0;
}

int Gc(tuningdb::TuningDb& db, int64_t max_bytes, bool json) {
  if (max_bytes < 0) return ReportError("db gc", absl::InvalidArgumentError("--max-bytes N is required (N >= 0)"));
  absl::StatusOr<int64_t> freed = db.GcArtifacts(max_bytes);
  if (!freed.ok()) return ReportError("db gc", freed.status());
  absl::StatusOr<tuningdb::TuningDb::Stats> s = db.GetStats();
  if (!s.ok()) return ReportError("db gc", s.status());
  if (json) {
    std::printf("%s\n", JsonObject()
                            .Add("db", db.path())
                            .Add("freed_bytes", *freed)
                            .Add("artifacts", s->artifacts)
                            .Add("artifact_bytes", s->artifact_bytes)
                            .str()
                            .c_str());
    return kExitOk;
  }
  std::printf("freed %lld bytes; %lld artifacts (%lld bytes) remain\n", static_cast<long long>(*freed),
              s.ok() ? static_cast<long long>(s->artifacts) : -1LL,
              s.ok() ? static_cast<long long>(s->artifact_bytes) : -1LL);
  return 0;
}

}  // namespace

int RunDb(const DbOptions& options) {
  std::string path = options.db.empty() ? DefaultKilnHome() + "/tuning.db" : options.db;
  std::string command = "db " + options.action;
  absl::StatusOr<std::unique_ptr<tuningdb::TuningDb>> db = tuningdb::TuningDb::Open(path);
  if (!db.ok()) return ReportError(command, db.status());
  if (options.action == "export") return Export(**db);
  if (options.action == "import") return Import(**db, options.file, options.json);
  if (options.action == "stats") return Stats(**db, options.json);
  if (options.action == "gc") return Gc(**db, options.max_bytes, options.json);
  return ReportError("db", absl::InvalidArgumentError(absl::StrCat("unknown action '", options.action, "'")));
}

}  // namespace kiln::client
