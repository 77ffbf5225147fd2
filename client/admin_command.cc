// `kiln admin`: the AdminService of a kiln-server, for farm operators: list and
// drain workers, list and cancel tuning jobs, collect artifact garbage.
#include <cstdio>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "base/exit_codes.h"
#include "client/commands.h"
#include "client/kiln_client.h"

namespace kiln::client {
namespace {

std::string LocalTime(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

void PrintJob(const kiln::v1::JobStatus& j) {
  std::printf("%-6lld %-9s %4d/%-4d %-12s %-12s %s%s  %s\n", static_cast<long long>(j.job_id()), j.state().c_str(),
              j.measured(), j.trials(), j.workload_key().substr(0, 12).c_str(), j.target_key().substr(0, 12).c_str(),
              LocalTime(j.updated_unix_ms()).c_str(), j.active() ? " (active)" : "", j.message().c_str());
}

// Prints the answer (as JSON with --json, else as `text` says) or the error.
template <typename Response, typename Text>
int Answer(const AdminOptions& o, const absl::StatusOr<Response>& response, Text text) {
  if (!response.ok()) return ReportError(absl::StrCat("admin ", o.action), response.status());
  if (o.json) {
    std::printf("%s\n", ToJson(*response).c_str());
  } else {
    text(*response);
  }
  return kExitOk;
}

}  // namespace

int RunAdmin(const AdminOptions& o) {
  auto connected = ConnectClient(o.server, o.connect_timeout_s);
  if (!connected.ok()) return ReportError(absl::StrCat("admin ", o.action), connected.status());
  KilnClient& client = **connected;
  if (o.action == "workers") {
    return Answer(o, client.ListWorkers(), [](const kiln::v1::ListWorkersResponse& r) {
      std::printf("%d worker(s), %lld task(s) queued\n", r.workers_size(), static_cast<long long>(r.queued_tasks()));
      for (const kiln::v1::WorkerStatus& w : r.workers()) {
        std::printf("%-10s %-20s %-24s leased %d  silent %.1f s%s%s%s\n", w.worker_id().c_str(), w.hostname().c_str(),
                    w.target_key().substr(0, 24).c_str(), w.leased_tasks(), w.silent_seconds(),
                    w.draining() ? "  draining" : "", w.identity().empty() ? "" : "  as ", w.identity().c_str());
      }
    });
  }
  if (o.action == "drain") {
    return Answer(o, client.DrainWorker(o.worker_id), [&o](const kiln::v1::DrainWorkerResponse& r) {
      std::printf("draining %s: it holds %d task(s) and stops once they are reported\n", o.worker_id.c_str(),
                  r.leased_tasks());
    });
  }
  if (o.action == "jobs") {
    kiln::v1::ListJobsRequest request;
    request.set_state(o.state);
    request.set_limit(o.limit);
    return Answer(o, client.ListJobs(request), [](const kiln::v1::ListJobsResponse& r) {
      std::printf("%-6s %-9s %-9s %-12s %-12s %s\n", "JOB", "STATE", "MEASURED", "WORKLOAD", "TARGET", "UPDATED");
      for (const kiln::v1::JobStatus& j : r.jobs()) PrintJob(j);
    });
  }
  if (o.action == "cancel") {
    return Answer(o, client.CancelJob(o.job_id, o.reason),
                  [](const kiln::v1::CancelJobResponse& r) { PrintJob(r.job()); });
  }
  if (o.action == "gc") {
    return Answer(o, client.CollectGarbage(o.max_bytes), [](const kiln::v1::CollectGarbageResponse& r) {
      std::printf("freed %lld bytes; %lld artifact(s), %lld bytes left\n", static_cast<long long>(r.bytes_freed()),
                  static_cast<long long>(r.artifacts_left()), static_cast<long long>(r.artifact_bytes_left()));
    });
  }
  return kExitUsage;
}

}  // namespace kiln::client
