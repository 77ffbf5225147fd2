// `kiln report MODEL|JOB`: what the tuning database holds on tuning a model
// (its workloads as a compile partitions it) or one tuning job, as a terminal
// summary, an HTML page with SVG charts, or JSON.
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/commands.h"
#include "client/kiln_client.h"
#include "client/onnx_model_file.h"
#include "client/tuning_report_view.h"

namespace kiln::client {
namespace {

// A subject of digits that names no file is a job id.
bool IsJobId(const std::string& subject) {
  return !subject.empty() && subject.size() <= 18 && subject.find_first_not_of("0123456789") == std::string::npos &&
         !std::filesystem::exists(subject);
}

absl::StatusOr<kiln::v1::ReportRequest> ReportRequestFor(const ReportOptions& o) {
  kiln::v1::ReportRequest request;
  if (IsJobId(o.subject)) {
    request.set_job_id(std::stoll(o.subject));
    return request;
  }
  ASSIGN_OR_RETURN(std::string model, ReadOnnxModelFile(o.subject));
  request.set_onnx_model(std::move(model));
  request.set_target(o.target);
  request.set_threads(o.threads);
  request.set_model_name(std::filesystem::path(o.subject).stem().string());
  RETURN_IF_ERROR(AddShapeBindings(o.shapes, request.mutable_shapes()));
  return request;
}

}  // namespace

absl::Status WriteTuningReport(const kiln::v1::TuningReport& report, const std::string& html_path) {
  return WriteFileAtomic(html_path, ReportHtml(report));
}

int RunReport(const ReportOptions& o) {
  auto request = ReportRequestFor(o);
  if (!request.ok()) return ReportError("report", request.status());
  auto farm = FarmConnection::Open(o.server, o.db, /*workers=*/0);
  if (!farm.ok()) return ReportError("report", farm.status());
  auto connected = (*farm)->Connect(o.connect_timeout_s);
  if (!connected.ok()) return ReportError("report", connected.status());
  KilnClient& client = **connected;
  auto report = client.Report(*request);
  if (!report.ok()) return ReportError("report", report.status());
  if (!o.output.empty()) {
    if (absl::Status s = WriteTuningReport(*report, o.output); !s.ok()) return ReportError("report", s);
  }
  if (o.json) {
    std::printf("%s\n", ToJson(*report).c_str());
    return 0;
  }
  std::printf("%s", ReportText(*report).c_str());
  if (!o.output.empty()) std::printf("report %s\n", o.output.c_str());
  return 0;
}

}  // namespace kiln::client
