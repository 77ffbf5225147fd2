// Whole-model checks through the broker.
#include "server/model_check.h"

#include <future>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "compiler_core/codegen/schedule_space.h"

namespace kiln::server {
namespace {

std::string Ms(double ms) { return absl::StrCat(static_cast<int64_t>(ms * 1000.0 + 0.5) / 1000.0, " ms"); }

}  // namespace

kiln::v1::ModelCheck ModelChecker::Compare(const std::string& record_key, const std::string& previous_digest,
                                           const std::string& new_digest,
                                           const std::function<bool()>& cancelled) const {
  const PairKey key{record_key, {previous_digest, new_digest}};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = kept_.find(key); it != kept_.end()) {
      kiln::v1::ModelCheck check = it->second;
      check.set_message(absl::StrCat("checked earlier: ", check.message()));
      return check;
    }
  }
  kiln::v1::ModelCheck check = Time(record_key, previous_digest, new_digest, cancelled);
  if (check.kept_previous()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (kept_.emplace(key, check).second) {
      kept_order_[next_order_++] = key;
      if (kept_order_.size() > kMaxVerdicts) {
        kept_.erase(kept_order_.begin()->second);
        kept_order_.erase(kept_order_.begin());
      }
    }
  }
  return check;
}

kiln::v1::ModelCheck ModelChecker::Time(const std::string& record_key, const std::string& previous_digest,
                                        const std::string& new_digest, const std::function<bool()>& cancelled) const {
  kiln::v1::ModelCheck check;
  check.set_previous_digest(previous_digest);
  if (!broker_->HasLiveWorker(record_key, kScheduleSpaceVersion)) {
    check.set_message(absl::StrCat("not checked: no worker serves ", record_key));
    return check;
  }
  kiln::v1::MeasureTask task;
  // The broker measures identical in-flight tasks once: two compiles checking
  // the same pair share one check.
  task.set_workload_key("whole-model-check");
  task.set_schedule_config(absl::StrCat(previous_digest, ",", new_digest));
  task.set_space_version(kScheduleSpaceVersion);
  task.add_packages(previous_digest);
  task.add_packages(new_digest);
  task.mutable_options()->set_warmup_runs(2);
  task.mutable_options()->set_min_repeats(10);
  task.mutable_options()->set_min_time_ms(200);
  std::shared_future<TaskOutcome> outcome = broker_->Submit(record_key, std::move(task));

  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  while (outcome.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
    if (cancelled()) {
      check.set_message("not checked: the compile was cancelled");
      return check;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      check.set_message(absl::StrCat("not checked: no result within ", options_.timeout.count() / 1000, " s"));
      return check;
    }
  }
  const kiln::v1::MeasureResult& r = outcome.get().result;
  if (r.error() != kiln::v1::MEASURE_OK || r.package_timings_size() != 2) {
    check.set_message(absl::StrCat("not checked: ", r.error_message().empty() ? "no timings" : r.error_message()));
    LogWarn("whole-model check failed", {{"target", record_key}, {"error", check.message()}});
    return check;
  }
  check.set_checked(true);
  check.set_previous_ms(r.package_timings(0).median_ms());
  check.set_new_ms(r.package_timings(1).median_ms());
  check.set_kept_previous(check.new_ms() > check.previous_ms() * (1.0 + options_.tolerance));
  check.set_message(absl::StrCat("new ", Ms(check.new_ms()), ", previous ", Ms(check.previous_ms()),
                                 check.kept_previous() ? "; kept the previous package" : "; replaced it"));
  LogInfo("whole-model check", {{"target", record_key},
                                {"previous", previous_digest},
                                {"new", new_digest},
                                {"previous_ms", absl::StrCat(check.previous_ms())},
                                {"new_ms", absl::StrCat(check.new_ms())},
                                {"kept_previous", check.kept_previous() ? "true" : "false"}});
  return check;
}

}  // namespace kiln::server
