// `kiln compile`: send a model to a Kiln server (or an embedded farm), show
// progress, fetch the package and write it.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "client/commands.h"
#include "client/kiln_client.h"
#include "client/onnx_model_file.h"
#include "client/tuning_report_view.h"

namespace kiln::client {
namespace {

// A one-line progress display on a terminal (the logger's status line: a log
// line never lands inside it); a line per stage change otherwise.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool quiet) : quiet_(quiet), tty_(::isatty(2)) {}
  ~ProgressPrinter() { Finish(); }

  void Update(const kiln::v1::Progress& p) {
    if (quiet_) return;
    std::string line;
    if (p.groups_total() > 0) {
      int width = 24;
      int filled = p.groups_total() ? width * p.groups_done() / p.groups_total() : 0;
      line = absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "] ",
                          p.groups_done(), "/", p.groups_total(), " groups, ", p.trials_measured(),
                          " trials  ");
    }
    absl::StrAppend(&line, p.stage(), ": ", p.message());
    if (p.best_so_far_ms() > 0) absl::StrAppend(&line, " best ", FormatLatency(p.best_so_far_ms()));
    if (tty_) {
      ShowStatusLine(line);
    } else if (p.stage() != last_stage_ || p.message() != last_message_) {
      if (p.stage() != "tune" || p.message().find("trials") == std::string::npos) {
        std::fprintf(stderr, "%s\n", line.c_str());
      }
    }
    last_stage_ = p.stage();
    last_message_ = p.message();
  }
  void Finish() { EndStatusLine(/*keep=*/true); }

 private:
  bool quiet_;
  bool tty_;
  std::string last_stage_, last_message_;
};

}  // namespace

absl::StatusOr<std::pair<int, double>> ParseBudget(const std::string& text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("--budget '", text,
                                                   "': expected a number of trials (500) or a time (90s, 10m, 1h)"));
  };
  if (text.empty()) return bad();
  double scale = 0;  // 0: trials
  std::string digits = text;
  switch (text.back()) {
    case 's': scale = 1; break;
    case 'm': scale = 60; break;
    case 'h': scale = 3600; break;
    default: break;
  }
  if (scale > 0) digits.pop_back();
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return bad();
  const int value = std::stoi(digits);
  if (value <= 0) return bad();
  if (scale == 0) return std::make_pair(value, 0.0);
  return std::make_pair(0, value * scale);
}

absl::StatusOr<kiln::v1::CompileRequest> CompileRequestFor(const CompileOptions& o) {
  ASSIGN_OR_RETURN(std::string model, ReadOnnxModelFile(o.model));
  kiln::v1::CompileRequest request;
  request.set_onnx_model(std::move(model));
  request.set_target(o.target);
  request.set_trials_per_group(o.trials);
  request.set_threads(o.threads);
  request.set_search(o.search);
  if (o.progressive && o.server.empty()) {
    return absl::InvalidArgumentError(
        "--progressive needs --server: an embedded farm stops with the command, and its background tuning with it");
  }
  request.set_progressive(o.progressive);
  if (!o.budget.empty()) {
    ASSIGN_OR_RETURN(auto budget, ParseBudget(o.budget));
    request.set_budget_trials(budget.first);
    request.set_budget_seconds(budget.second);
  }
  request.set_model_name(std::filesystem::path(o.model).stem().string());
  RETURN_IF_ERROR(AddShapeBindings(o.shapes, request.mutable_shapes()));
  return request;
}

absl::StatusOr<kiln::v1::CompileResult> CompileWithProgress(KilnClient& client,
                                                            const kiln::v1::CompileRequest& request, bool quiet,
                                                            const std::string& output, double deadline_s) {
  kiln::v1::CompileResult result;
  {
    ProgressPrinter printer(quiet);
    auto r = client.Compile(
        request, [&](const kiln::v1::Progress& p) { printer.Update(p); },
        deadline_s > 0 ? absl::Seconds(deadline_s) : absl::Hours(12));
    printer.Finish();
    if (!r.ok()) return r.status();
    result = *r;
  }
  if (!output.empty()) {
    ASSIGN_OR_RETURN(std::string bytes, client.FetchArtifact(result.package_digest()));
    RETURN_IF_ERROR(WriteFileAtomic(output, bytes));
  }
  return result;
}

void PrintCompileSummary(const kiln::v1::CompileResult& result, const std::string& output, bool groups) {
  int cached = 0;
  for (const auto& g : result.groups()) cached += g.from_database() ? 1 : 0;
  if (!output.empty()) std::printf("package %s\n", output.c_str());
  std::printf("digest %s\n", result.package_digest().c_str());
  std::printf("size %lld bytes, %d groups (%d from the tuning database), %d trials measured, %.2f s\n",
              static_cast<long long>(result.package_size()), result.groups_size(), cached,
              result.trials_measured(), result.compile_seconds());
  if (result.tuning_in_background()) {
    std::printf("tuning goes on in the background on the server: `kiln lookup` gets the faster package when it "
                "is done\n");
  }
  if (!result.tuning_stop().empty()) {
    std::printf("tuning stopped: %s\n", result.tuning_stop() == "budget"      ? "the budget is spent"
                                        : result.tuning_stop() == "converged" ? "no workload was expected to gain more"
                                                                              : "every schedule space is measured");
  }
  // On stderr, so that -q (which prints nothing of this summary) still shows them.
  for (const std::string& w : result.warnings()) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (result.has_model_check()) {
    // "new 4.81 ms, previous 5.02 ms; replaced it", or why it was not timed.
    std::printf("whole-model check: %s\n", result.model_check().message().c_str());
  }
  if (!groups) return;
  // Each group's schedule and the records behind it (`kiln inspect PKG` lists their keys).
  for (const auto& g : result.groups()) {
    std::string ops;
    for (const auto& op : g.ops()) ops += (ops.empty() ? "" : "+") + op;
    const kiln::v1::ScheduleProvenance& p = g.provenance();
    const std::string from =
        p.source() == kiln::v1::ScheduleProvenance::RECORDS
            ? absl::StrCat(p.record_keys_size(), p.record_keys_size() == 1 ? " record" : " records", ", best of ",
                           p.schedules_ranked(), g.from_database() ? ", from the database" : "")
            : "default schedule";
    std::printf("  group %d %-11s %-26s %-24s %-9s %s\n", g.index(), g.kind().c_str(), ops.c_str(),
                g.schedule_config().c_str(), g.median_ms() > 0 ? FormatLatency(g.median_ms()).c_str() : "untuned",
                from.c_str());
  }
}

int RunCompile(const CompileOptions& o) {
  auto request = CompileRequestFor(o);
  if (!request.ok()) return ReportError("compile", request.status());
  auto farm = FarmConnection::Open(o.server, o.db, /*workers=*/1, /*worker_threads=*/o.threads, o.target);
  if (!farm.ok()) return ReportError("compile", farm.status());
  auto client = (*farm)->Connect(o.connect_timeout_s);
  if (!client.ok()) return ReportError("compile", client.status());
  auto result = CompileWithProgress(**client, *request, o.quiet, o.output, o.deadline_s);
  if (!result.ok()) return ReportError("compile", result.status());
  if (o.json) {
    std::printf("%s\n", ToJson(*result).c_str());
    return 0;
  }
  PrintCompileSummary(*result, o.output, !o.quiet);
  return 0;
}

}  // namespace kiln::client
