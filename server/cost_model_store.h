// One learned cost model per target, trained on every valid record of that
// target in the tuning database (any workload, any compile, imports too) and
// retrained when new records arrive. Features are computed once per
// (workload, schedule) and kept; workload graphs come from the database
// (workloads.graph) or from the tuner, which registers the ones it tunes.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/schedule_config.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/ir/graph.h"
#include "server/cost_model.h"
#include "tuning_db/tuning_db.h"

namespace kiln::server {

class CostModelStore {
 public:
  // Retrain when the valid records of the target grew by at least
  // kRetrainAfter and by kRetrainGrowth of those of the last training (or the
  // model has none yet): a training takes ~0.35 s per 2,700 records on one
  // thread, and a farm writes records by the thousand.
  static constexpr int kRetrainAfter = 4;
  static constexpr double kRetrainGrowth = 0.25;
  // A target with fewer valid records than this trains on its sibling
  // targets' records as well (TuningDb::SiblingTargets), as features of its
  // own CPU: a new machine starts from what the farm learnt on similar ones.
  static constexpr int64_t kWarmStartBelow = 500;

  explicit CostModelStore(tuningdb::TuningDb* db) : db_(db) {}

  // Scores for `configs` of the workload on the target (higher = faster),
  // from a model retrained first if the database has new records; nullopt when
  // no model can be trained yet (no workload of this target has two valid
  // records with a known graph). Thread-safe; training is serialised.
  std::optional<std::vector<float>> Score(const std::string& workload_key, const Graph& workload,
                                          const std::string& target_key, const Target& target,
                                          int space_version, const std::vector<ScheduleConfig>& configs);

  struct Stats {
    int64_t trained_rows = 0;     // rows of the current model (0: none)
    int64_t trainings = 0;        // models trained so far, all targets
    double last_train_ms = 0;
    int64_t sibling_records = 0;  // sibling targets' records in the current model's training set
  };
  Stats stats(const std::string& target_key) const;

 private:
  struct TargetModel {
    CostModel model;
    int64_t records_seen = -1;  // valid records when last trained
    int64_t sibling_records = 0;  // of sibling targets, in the last training
  };
  // Requires mu_. Features of a schedule, cached; nullopt when it does not lower.
  const std::vector<float>* FeaturesLocked(const std::string& target_key, const std::string& workload_key,
                                           const Graph& workload, const std::string& config_text,
                                           const Target& target);
  // Requires mu_. The workload's graph from the database, cached; nullptr when unknown.
  const Graph* GraphLocked(const std::string& workload_key);
  // Requires mu_.
  void RefreshLocked(const std::string& target_key, const Target& target, int space_version);

  tuningdb::TuningDb* db_;
  mutable std::mutex mu_;
  std::map<std::string, TargetModel> models_;  // by target key + space version
  std::map<std::string, std::unique_ptr<Graph>> graphs_;     // by workload key; null = unknown
  // By "target|workload|config".
  std::map<std::string, std::optional<std::vector<float>>> features_;
  int64_t trainings_ = 0;
  double last_train_ms_ = 0;
};

}  // namespace kiln::server
