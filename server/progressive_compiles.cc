// Background compiles of progressive requests.
#include "server/progressive_compiles.h"

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace kiln::server {

ProgressiveCompiles::~ProgressiveCompiles() {
  stopping_ = true;
  std::map<int64_t, std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (auto& [id, t] : threads) t.join();
}

void ProgressiveCompiles::ReapLocked() {
  for (int64_t id : finished_) {
    auto it = threads_.find(id);
    if (it == threads_.end()) continue;
    it->second.join();
    threads_.erase(it);
  }
  finished_.clear();
}

bool ProgressiveCompiles::Start(const std::string& compile_key, kiln::v1::CompileRequest request,
                                std::function<void(const kiln::v1::Progress&)> on_progress) {
  request.set_progressive(false);
  std::lock_guard<std::mutex> lock(mu_);
  ReapLocked();
  if (stopping_ || !in_flight_.insert(compile_key).second) return false;
  const int64_t id = next_id_++;
  threads_.emplace(id, std::thread([this, id, compile_key, request = std::move(request),
                                    on_progress = std::move(on_progress)]() mutable {
    LogInfo("background tuning started", {{"model", request.model_name()}, {"compile_key", compile_key}});
    auto out = pipeline_->Run(
        request,
        [&](const kiln::v1::Progress& p) {
          if (on_progress) on_progress(p);
        },
        [this] { return stopping_.load(); });
    on_progress = nullptr;
    if (out.ok()) {
      LogInfo("background tuning finished; the package is replaced",
              {{"model", request.model_name()},
               {"digest", out->result.package_digest()},
               {"trials", absl::StrCat(out->result.trials_measured())}});
    } else {
      LogWarn("background tuning ended without a new package",
              {{"model", request.model_name()}, {"error", out.status().ToString()}});
    }
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.erase(compile_key);
    finished_.push_back(id);
  }));
  return true;
}

bool ProgressiveCompiles::InFlight(const std::string& compile_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_.count(compile_key) > 0;
}

int ProgressiveCompiles::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(in_flight_.size());
}

}  // namespace kiln::server
