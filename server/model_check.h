// The whole-model check (kiln.v1.ModelCheck): before a compile's package
// replaces the one a compile key names, a worker of the target times both
// whole packages against each other, and the new one wins unless it is
// slower. Per-group measurements pick each group's schedule alone, with its
// inputs warm; the model runs the groups back to back, and only the whole
// model shows what caches and order do to them.
//
// A verdict stands: the checker remembers, per pair of packages, a check
// that kept the previous one, and gives it again without timing. Two
// compiles from the same records then answer the same package (a lookup, a
// waiting compile, a progressive one), where timing the pair again could
// flip on noise when the two are within the tolerance.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kiln/v1/compile.pb.h"
#include "server/task_broker.h"

namespace kiln::server {

class ModelChecker {
 public:
  struct Options {
    // The new package replaces the previous one unless its median is more
    // than this fraction slower (the spread of two whole-model medians on a
    // quiet machine is about 1%).
    double tolerance = 0.02;
    // How long the check waits for its result (queueing included) before the
    // new package replaces the old unchecked.
    std::chrono::milliseconds timeout{120000};
  };
  ModelChecker(TaskBroker* broker, Options options) : broker_(broker), options_(options) {}

  // Times `previous_digest` and `new_digest` (both in the artifact store) on a
  // worker that serves `record_key`, on that key's threads. Never fails: an
  // unchecked outcome (checked = false) says why in `message`, and then the
  // new package is to replace the previous one. A pair whose check kept the
  // previous package before gets that check again (its message says so).
  kiln::v1::ModelCheck Compare(const std::string& record_key, const std::string& previous_digest,
                               const std::string& new_digest, const std::function<bool()>& cancelled) const;

 private:
  kiln::v1::ModelCheck Time(const std::string& record_key, const std::string& previous_digest,
                            const std::string& new_digest, const std::function<bool()>& cancelled) const;

  // Verdicts that kept the previous package, per (record key, previous
  // digest, new digest); past kMaxVerdicts the oldest goes.
  static constexpr size_t kMaxVerdicts = 4096;
  using PairKey = std::pair<std::string, std::pair<std::string, std::string>>;

  TaskBroker* broker_;
  Options options_;
  mutable std::mutex mu_;
  mutable std::map<PairKey, kiln::v1::ModelCheck> kept_;  // guarded by mu_
  mutable std::map<uint64_t, PairKey> kept_order_;        // guarded by mu_: insertion order
  mutable uint64_t next_order_ = 0;                       // guarded by mu_
};

}  // namespace kiln::server
