// The learned cost model: gradient-boosted trees (XGBoost) from schedule
// features (compiler_core/codegen/loop_ir/features.h) to a score, higher for
// faster kernels. The label of a measured schedule is its workload's best
// median over its own (1 for the best, 0.5 for one twice as slow), as in TVM
// MetaSchedule, so that one model learns across workloads of any size and
// predicts for a workload nothing has measured yet.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::server {

// Dense row-major features, `cols` per row; NaN is a missing value.
struct FeatureMatrix {
  int cols = 0;
  std::vector<float> data;
  int64_t rows() const { return cols > 0 ? static_cast<int64_t>(data.size()) / cols : 0; }
  void AddRow(const std::vector<float>& row);  // row.size() must equal cols (set by the first row)
};

// Not thread-safe: one owner (server/search_strategy.h's ModelStore guards it).
class CostModel {
 public:
  struct Options {
    int rounds = 80;       // boosting rounds
    int max_depth = 6;
    double eta = 0.2;      // learning rate
    int threads = 1;       // XGBoost's threads: the farm's CPUs are for measuring
    // "reg:squarederror" (regression on the normalised throughput) or
    // "rank:pairwise" (orders within each group of rows; Train needs groups).
    std::string objective = "reg:squarederror";
  };
  CostModel() : CostModel(Options{}) {}
  explicit CostModel(Options options) : options_(options) {}
  ~CostModel();
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  // Trains a new model on `x` with labels `y` (one per row) and replaces the
  // current one. `groups`: sizes of consecutive row groups (one per workload),
  // summing to the rows, for a ranking objective; may be empty otherwise.
  // INVALID_ARGUMENT when the sizes disagree or there are no rows; INTERNAL
  // with XGBoost's message when it fails.
  absl::Status Train(const FeatureMatrix& x, const std::vector<float>& y,
                     const std::vector<unsigned>& groups = {});

  bool trained() const { return booster_ != nullptr; }
  int64_t trained_rows() const { return trained_rows_; }

  // One score per row of `x`; FAILED_PRECONDITION before the first Train.
  absl::StatusOr<std::vector<float>> Predict(const FeatureMatrix& x) const;

 private:
  Options options_;
  void* booster_ = nullptr;  // BoosterHandle
  int cols_ = 0;
  int64_t trained_rows_ = 0;
};

}  // namespace kiln::server
