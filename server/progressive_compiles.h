// Progressive delivery: a compile that answered at once with the best package
// the database could give goes on tuning here, in the background. When that
// compile ends, its package replaces the first under the same compile key
// (CompilePipeline::Run stores it), so a later Lookup or compile gets it.
#pragma once

#include <atomic>
#include <functional>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kiln/v1/compile.pb.h"
#include "server/compile_pipeline.h"

namespace kiln::server {

// Thread-safe. Destroying it cancels the background compiles and joins them;
// their tuning jobs stay in the database and resume with the next server
// (the package is rebuilt by the next compile of the model).
class ProgressiveCompiles {
 public:
  explicit ProgressiveCompiles(CompilePipeline* pipeline) : pipeline_(pipeline) {}
  ~ProgressiveCompiles();
  ProgressiveCompiles(const ProgressiveCompiles&) = delete;
  ProgressiveCompiles& operator=(const ProgressiveCompiles&) = delete;

  // Compiles `request` (its progressive flag cleared) in the background
  // unless a background compile for `compile_key` is in flight already.
  // Returns whether it started one. `on_progress` (optional) sees its
  // progress, and is destroyed when it ends: what it holds (the client's
  // admission slot) is held as long as the background compile runs.
  bool Start(const std::string& compile_key, kiln::v1::CompileRequest request,
             std::function<void(const kiln::v1::Progress&)> on_progress = nullptr);
  // Whether a background compile for the key is running.
  bool InFlight(const std::string& compile_key) const;
  int active() const;

 private:
  // Requires mu_. Joins the threads that have finished.
  void ReapLocked();

  CompilePipeline* pipeline_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::set<std::string> in_flight_;      // compile keys
  std::map<int64_t, std::thread> threads_;
  std::vector<int64_t> finished_;        // threads to join
  int64_t next_id_ = 0;
};

}  // namespace kiln::server
