// `kiln db export|import|stats|gc`: maintenance of a tuning database file
// (JSON-lines export and idempotent import, statistics, artifact GC).
#include <cstdio>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
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

int Import(tuningdb::TuningDb& db, const std::string& file) {
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
  std::printf("imported %lld records (%lld already present), %lld new workloads, %lld new targets\n",
              static_cast<long long>(counts->records_added), static_cast<long long>(counts->records_present),
              static_cast<long long>(counts->workloads_added), static_cast<long long>(counts->targets_added));
  return 0;
}

std::string JsonEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out;
}

int Stats(tuningdb::TuningDb& db, bool json) {
  absl::StatusOr<tuningdb::TuningDb::Stats> s = db.GetStats();
  if (!s.ok()) return ReportError("db stats", s.status());
  auto ll = [](int64_t v) { return static_cast<long long>(v); };
  double coverage = s->record_keys == 0 ? 0.0 : static_cast<double>(s->answered_keys) / s->record_keys;
  if (json) {
    std::printf(
        "{\"db\":\"%s\",\"workloads\":%lld,\"targets\":%lld,\"records\":%lld,\"valid_records\":%lld,"
        "\"record_keys\":%lld,\"answered_keys\":%lld,\"best_record_coverage\":%.4f,"
        "\"workloads_answered\":%lld,\"artifacts\":%lld,\"artifact_bytes\":%lld,"
        "\"compile_entries\":%lld,\"jobs_running\":%lld,\"jobs_done\":%lld,\"jobs_failed\":%lld}\n",
        JsonEscape(db.path()).c_str(), ll(s->workloads), ll(s->targets), ll(s->records), ll(s->valid_records),
        ll(s->record_keys), ll(s->answered_keys), coverage, ll(s->workloads_answered), ll(s->artifacts),
        ll(s->artifact_bytes), ll(s->compile_entries), ll(s->jobs_running), ll(s->jobs_done),
        ll(s->jobs_failed));
    return 0;
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

int Gc(tuningdb::TuningDb& db, int64_t max_bytes) {
  if (max_bytes < 0) return ReportError("db gc", absl::InvalidArgumentError("--max-bytes N is required (N >= 0)"));
  absl::StatusOr<int64_t> freed = db.GcArtifacts(max_bytes);
  if (!freed.ok()) return ReportError("db gc", freed.status());
  absl::StatusOr<tuningdb::TuningDb::Stats> s = db.GetStats();
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
  if (options.action == "import") return Import(**db, options.file);
  if (options.action == "stats") return Stats(**db, options.json);
  if (options.action == "gc") return Gc(**db, options.max_bytes);
  return ReportError("db", absl::InvalidArgumentError(absl::StrCat("unknown action '", options.action, "'")));
}

}  // namespace kiln::client
