// JSON lines <-> RecordLine through protobuf's JSON mapping of
// kiln.v1.TuningRecordLine.
#include "tuning_db/record_jsonl.h"

#include <google/protobuf/util/json_util.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kiln/v1/tuning_record.pb.h"

namespace kiln::tuningdb {
namespace {

kiln::v1::TuningRecordLine ToProto(const RecordLine& l) {
  kiln::v1::TuningRecordLine p;
  kiln::v1::TuningWorkload* w = p.mutable_workload();
  w->set_key(l.workload.key);
  w->set_canonical_text(l.workload.canonical_text);
  w->set_kind(l.workload.kind);
  w->set_op_summary(l.workload.op_summary);
  w->set_flops(l.workload.flops);
  w->set_bytes(l.workload.bytes);
  kiln::v1::TuningTarget* t = p.mutable_target();
  t->set_key(l.target.key);
  t->set_kind(l.target.kind);
  t->set_arch(l.target.arch);
  t->set_cpu_name(l.target.cpu_name);
  t->set_features(l.target.features);
  t->set_device_model(l.target.device_model);
  t->set_driver_version(l.target.driver_version);
  t->set_toolkit_version(l.target.toolkit_version);
  kiln::v1::TuningRecord* r = p.mutable_record();
  r->set_space_version(l.record.space_version);
  r->set_compiler_version(l.record.compiler_version);
  r->set_config(l.record.config);
  r->set_median_ms(l.record.median_ms);
  r->set_p10_ms(l.record.p10_ms);
  r->set_p90_ms(l.record.p90_ms);
  r->set_repeats(l.record.repeats);
  r->set_error(std::string(RecordErrorName(l.record.error)));
  r->set_error_message(l.record.error_message);
  r->set_worker_id(l.record.worker_id);
  r->set_created_unix_ms(l.record.created_unix_ms);
  return p;
}

}  // namespace

std::string RecordLineToJson(const RecordLine& line) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  // Printing a message without Any fields cannot fail.
  (void)google::protobuf::util::MessageToJsonString(ToProto(line), &json, options);
  return json;
}

absl::StatusOr<RecordLine> RecordLineFromJson(std::string_view json) {
  kiln::v1::TuningRecordLine p;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &p, options);
  if (!status.ok()) return absl::InvalidArgumentError(absl::StrCat("bad JSON: ", status.ToString()));
  if (p.workload().key().empty()) return absl::InvalidArgumentError("workload.key is empty");
  if (p.target().key().empty()) return absl::InvalidArgumentError("target.key is empty");
  RecordLine l;
  l.workload = WorkloadInfo{p.workload().key(),        p.workload().canonical_text(), p.workload().kind(),
                            p.workload().op_summary(), p.workload().flops(),          p.workload().bytes()};
  l.target = TargetInfo{p.target().key(),          p.target().kind(),           p.target().arch(),
                        p.target().cpu_name(),     p.target().features(),       p.target().device_model(),
                        p.target().driver_version(), p.target().toolkit_version()};
  const kiln::v1::TuningRecord& r = p.record();
  l.record.workload_key = l.workload.key;
  l.record.target_key = l.target.key;
  l.record.space_version = r.space_version();
  l.record.compiler_version = r.compiler_version();
  l.record.config = r.config();
  l.record.median_ms = r.median_ms();
  l.record.p10_ms = r.p10_ms();
  l.record.p90_ms = r.p90_ms();
  l.record.repeats = r.repeats();
  bool known = r.error().empty();  // proto3 JSON may omit the default: "ok"
  for (RecordError e : {RecordError::kOk, RecordError::kBuildError, RecordError::kWrongAnswer,
                        RecordError::kRuntimeError, RecordError::kTimeout}) {
    if (r.error() == RecordErrorName(e)) {
      l.record.error = e;
      known = true;
    }
  }
  if (!known) {
    return absl::InvalidArgumentError(absl::StrCat(
        "record.error \"", r.error(), "\" is not one of ok, build_error, wrong_answer, runtime_error, timeout"));
  }
  l.record.error_message = r.error_message();
  l.record.worker_id = r.worker_id();
  l.record.created_unix_ms = r.created_unix_ms();
  return l;
}

absl::StatusOr<int64_t> ExportRecordsJsonl(TuningDb& db, std::ostream& out) {
  int64_t lines = 0;
  RETURN_IF_ERROR(db.ForEachRecordLine([&](const RecordLine& line) -> absl::Status {
    out << RecordLineToJson(line) << '\n';
    if (!out) return absl::UnavailableError("cannot write the export (output closed or full)");
    ++lines;
    return absl::OkStatus();
  }));
  out.flush();
  if (!out) return absl::UnavailableError("cannot write the export (output closed or full)");
  return lines;
}

absl::StatusOr<ImportCounts> ImportRecordsJsonl(TuningDb& db, std::istream& in, const std::string& source,
                                                int batch_size) {
  if (batch_size <= 0) batch_size = 1;
  ImportCounts total;
  std::vector<RecordLine> batch;
  int64_t first_line_of_batch = 1;
  auto flush = [&]() -> absl::Status {
    if (batch.empty()) return absl::OkStatus();
    absl::StatusOr<ImportCounts> counts = db.ImportRecordLines(batch);
    if (!counts.ok()) {
      return absl::Status(counts.status().code(),
                          absl::StrCat(source, ": lines from ", first_line_of_batch, ": ",
                                       counts.status().message()));
    }
    total.records_added += counts->records_added;
    total.records_present += counts->records_present;
    total.workloads_added += counts->workloads_added;
    total.targets_added += counts->targets_added;
    batch.clear();
    return absl::OkStatus();
  };
  std::string text;
  int64_t number = 0;
  while (std::getline(in, text)) {
    ++number;
    if (batch.empty()) first_line_of_batch = number;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    absl::StatusOr<RecordLine> line = RecordLineFromJson(text);
    absl::Status valid = line.ok() ? ValidateRecordLine(*line) : line.status();
    if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(source, ":", number, ": ", valid.message()));
    batch.push_back(std::move(*line));
    if (static_cast<int>(batch.size()) >= batch_size) RETURN_IF_ERROR(flush());
  }
  if (in.bad()) return absl::UnavailableError(absl::StrCat("cannot read ", source));
  RETURN_IF_ERROR(flush());
  return total;
}

}  // namespace kiln::tuningdb
