// Training sets from the database, models per target, cached features.
#include "server/cost_model_store.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "compiler_core/codegen/loop_ir/features.h"
#include "compiler_core/frontend/graph_proto.h"

namespace kiln::server {

const std::vector<float>* CostModelStore::FeaturesLocked(const std::string& target_key,
                                                         const std::string& workload_key, const Graph& workload,
                                                         const std::string& config_text, const Target& target) {
  std::string key = absl::StrCat(target_key, "|", workload_key, "|", config_text);
  auto it = features_.find(key);
  if (it == features_.end()) {
    std::optional<std::vector<float>> value;
    if (auto config = ScheduleConfig::Parse(config_text); config.ok()) {
      if (auto f = loop_ir::ScheduleFeatures(workload, *config, target); f.ok()) value = std::move(*f);
    }
    it = features_.emplace(std::move(key), std::move(value)).first;
  }
  return it->second ? &*it->second : nullptr;
}

const Graph* CostModelStore::GraphLocked(const std::string& workload_key) {
  auto it = graphs_.find(workload_key);
  if (it != graphs_.end()) return it->second.get();
  std::unique_ptr<Graph> graph;
  if (auto info = db_->GetWorkload(workload_key); info.ok() && *info && !(*info)->graph.empty()) {
    kiln::v1::Graph proto;
    if (proto.ParseFromString((*info)->graph)) {
      if (auto g = GraphFromProto(proto); g.ok()) graph = std::move(*g);
    }
  }
  return graphs_.emplace(workload_key, std::move(graph)).first->second.get();
}

void CostModelStore::RefreshLocked(const std::string& target_key, const Target& target, int space_version) {
  TargetModel& tm = models_[absl::StrCat(target_key, "|", space_version)];
  auto records = db_->ValidRecords(target_key, space_version);
  if (!records.ok()) {
    LogWarn("cost model: cannot read the training records", {{"error", records.status().ToString()}});
    return;
  }
  const int64_t count = static_cast<int64_t>(records->size());
  if (tm.records_seen >= 0 &&
      count < tm.records_seen + std::max<int64_t>(kRetrainAfter, static_cast<int64_t>(kRetrainGrowth * tm.records_seen))) {
    return;
  }
  auto start = std::chrono::steady_clock::now();
  // Warm start: while the target has few records of its own, its siblings'
  // (same ISA, another CPU) teach the model which schedules are fast.
  int64_t sibling_records = 0;
  if (count < kWarmStartBelow) {
    if (auto siblings = db_->SiblingTargets(target_key); siblings.ok()) {
      for (const std::string& sibling : *siblings) {
        auto more = db_->ValidRecords(sibling, space_version);
        if (!more.ok()) continue;
        sibling_records += static_cast<int64_t>(more->size());
        records->insert(records->end(), more->begin(), more->end());
      }
    }
  }

  // The fastest median of each (target, workload, config); then the best of
  // each (target, workload): labels compare schedules measured on one CPU.
  std::map<std::pair<std::string, std::string>, std::map<std::string, double>> by_workload;
  for (const tuningdb::Record& r : *records) {
    if (!(r.median_ms > 0)) continue;
    auto [it, added] = by_workload[{r.target_key, r.workload_key}].emplace(r.config, r.median_ms);
    if (!added) it->second = std::min(it->second, r.median_ms);
  }
  FeatureMatrix x;
  std::vector<float> y;
  for (const auto& [key, configs] : by_workload) {
    const std::string& workload_key = key.second;
    if (configs.size() < 2) continue;  // one measurement says nothing about order
    const Graph* graph = GraphLocked(workload_key);
    if (graph == nullptr) continue;
    double best = configs.begin()->second;
    for (const auto& [config, ms] : configs) best = std::min(best, ms);
    for (const auto& [config, ms] : configs) {
      const std::vector<float>* f = FeaturesLocked(target_key, workload_key, *graph, config, target);
      if (f == nullptr) continue;
      x.AddRow(*f);
      y.push_back(static_cast<float>(best / ms));
    }
  }
  tm.records_seen = count;
  if (x.rows() < 2) return;
  if (absl::Status s = tm.model.Train(x, y); !s.ok()) {
    LogWarn("cost model: training failed", {{"target", target_key}, {"error", s.ToString()}});
    return;
  }
  ++trainings_;
  tm.sibling_records = sibling_records;
  last_train_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::optional<std::vector<float>> CostModelStore::Score(const std::string& workload_key, const Graph& workload,
                                                        const std::string& target_key, const Target& target,
                                                        int space_version,
                                                        const std::vector<ScheduleConfig>& configs) {
  std::lock_guard<std::mutex> lock(mu_);
  RefreshLocked(target_key, target, space_version);
  TargetModel& tm = models_[absl::StrCat(target_key, "|", space_version)];
  if (!tm.model.trained()) return std::nullopt;
  FeatureMatrix x;
  std::vector<int> rows;  // configs[i] -> row, or -1 when it does not lower
  for (const ScheduleConfig& c : configs) {
    const std::vector<float>* f = FeaturesLocked(target_key, workload_key, workload, c.ToString(), target);
    if (f == nullptr) {
      rows.push_back(-1);
      continue;
    }
    rows.push_back(static_cast<int>(x.rows()));
    x.AddRow(*f);
  }
  std::vector<float> scores(configs.size(), -1.0f);
  if (x.rows() == 0) return scores;
  auto predicted = tm.model.Predict(x);
  if (!predicted.ok()) {
    LogWarn("cost model: prediction failed", {{"target", target_key}, {"error", predicted.status().ToString()}});
    return std::nullopt;
  }
  for (size_t i = 0; i < configs.size(); ++i) {
    if (rows[i] >= 0) scores[i] = (*predicted)[rows[i]];
  }
  return scores;
}

CostModelStore::Stats CostModelStore::stats(const std::string& target_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  s.trainings = trainings_;
  s.last_train_ms = last_train_ms_;
  for (const auto& [key, tm] : models_) {
    if (key.rfind(target_key + "|", 0) == 0 && tm.model.trained_rows() >= s.trained_rows) {
      s.trained_rows = tm.model.trained_rows();
      s.sibling_records = tm.sibling_records;
    }
  }
  return s;
}

}  // namespace kiln::server
