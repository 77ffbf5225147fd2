// `kiln tune MODEL --budget ...`: spends a whole-model tuning budget where it
// lowers the model's latency most, continuing from the records already in the
// database, then writes the package (with -o) and a tuning report.
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/kiln_client.h"
#include "client/tuning_report_view.h"

namespace kiln::client {

int RunTune(const TuneOptions& o) {
  CompileOptions compile = o.compile;
  if (compile.budget.empty()) compile.budget = "10m";
  auto request = CompileRequestFor(compile);
  if (!request.ok()) return ReportError("tune", request.status());
  const std::string report_path =
      o.report.empty() ? absl::StrCat(std::filesystem::path(compile.model).stem().string(), ".tuning.html") : o.report;

  auto farm = FarmConnection::Open(compile.server, compile.db, /*workers=*/1, /*worker_threads=*/compile.threads,
                                   compile.target);
  if (!farm.ok()) return ReportError("tune", farm.status());
  auto connected = (*farm)->Connect(compile.connect_timeout_s);
  if (!connected.ok()) return ReportError("tune", connected.status());
  KilnClient& client = **connected;
  auto result = CompileWithProgress(client, *request, compile.quiet, compile.output, compile.deadline_s);
  if (!result.ok()) return ReportError("tune", result.status());

  kiln::v1::ReportRequest report_request;
  report_request.set_onnx_model(request->onnx_model());
  *report_request.mutable_shapes() = request->shapes();
  report_request.set_target(request->target());
  report_request.set_threads(request->threads());
  report_request.set_model_name(request->model_name());
  auto report = client.Report(report_request);
  if (!report.ok()) return ReportError("tune", report.status());
  if (absl::Status s = WriteTuningReport(*report, report_path); !s.ok()) return ReportError("tune", s);

  if (compile.json) {
    std::printf("{\"compile\":%s,\"report\":%s}\n", ToJson(*result).c_str(), ToJson(*report).c_str());
    return 0;
  }
  PrintCompileSummary(*result, compile.output, /*groups=*/false);
  std::printf("%s", ReportText(*report).c_str());
  std::printf("report %s\n", report_path.c_str());
  return 0;
}

}  // namespace kiln::client
