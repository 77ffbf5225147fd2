// Cost-model accuracy on a real tuning database: for every workload with at
// least --min-records measured schedules, a model is trained on every *other*
// workload's valid records of the target (as for a workload the farm has never
// measured) and asked to rank this one's schedules. Reported per kind and
// overall: pairwise ranking accuracy (0.5 is chance), the regret of the
// predicted best (its measured median over the measured best; 1 is perfect),
// and the same regret for the heuristic default and for a random pick (the
// mean over the workload's schedules), so that the model is judged against
// what the search would do without it.
// Usage: kiln_bench_cost_model --db PATH [--target KEY] [--min-records N] [--max-workloads N]
//                              [--rounds N] [--depth N] [--eta X] [--objective reg:squarederror|rank:pairwise]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler_core/codegen/loop_ir/features.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/graph_proto.h"
#include "server/cost_model.h"
#include "server/farm_target.h"
#include "tuning_db/tuning_db.h"

namespace {

struct Measured {
  std::string config;
  double ms = 0;
  std::vector<float> features;
};

struct WorkloadData {
  std::string key, kind;
  std::string default_config;
  std::vector<Measured> schedules;  // one per config, fastest median of its records
};

struct Totals {
  int workloads = 0;
  double pairs = 0, agree = 0;
  double log_regret_model = 0, log_regret_default = 0, log_regret_random = 0;
};

void Print(const std::string& name, const Totals& t) {
  if (t.workloads == 0) return;
  std::printf("%-16s %9d %9.3f %12.3f %14.3f %13.3f\n", name.c_str(), t.workloads, t.pairs > 0 ? t.agree / t.pairs : 0,
              std::exp(t.log_regret_model / t.workloads), std::exp(t.log_regret_default / t.workloads),
              std::exp(t.log_regret_random / t.workloads));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln;
  std::string db_path, target_key;
  int min_records = 4, max_workloads = 400;
  server::CostModel::Options options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--db") db_path = next();
    else if (a == "--target") target_key = next();
    else if (a == "--min-records") min_records = std::atoi(next().c_str());
    else if (a == "--max-workloads") max_workloads = std::atoi(next().c_str());
    else if (a == "--rounds") options.rounds = std::atoi(next().c_str());
    else if (a == "--depth") options.max_depth = std::atoi(next().c_str());
    else if (a == "--eta") options.eta = std::atof(next().c_str());
    else if (a == "--objective") options.objective = next();
    else {
      std::fprintf(stderr, "usage: kiln_bench_cost_model --db PATH [--target KEY] [--min-records N] [--max-workloads N]\n");
      return 2;
    }
  }
  if (db_path.empty()) {
    std::fprintf(stderr, "--db is required\n");
    return 2;
  }
  auto db = tuningdb::TuningDb::Open(db_path);
  if (!db.ok()) {
    std::fprintf(stderr, "%s\n", db.status().ToString().c_str());
    return 1;
  }
  const CpuTarget target = server::HostFarmTarget();
  if (target_key.empty()) target_key = target.Key();
  auto records = (*db)->ValidRecords(target_key, kScheduleSpaceVersion);
  if (!records.ok()) {
    std::fprintf(stderr, "%s\n", records.status().ToString().c_str());
    return 1;
  }
  std::map<std::string, std::map<std::string, double>> best;  // workload -> config -> fastest median
  for (const auto& r : *records) {
    auto [it, added] = best[r.workload_key].emplace(r.config, r.median_ms);
    if (!added) it->second = std::min(it->second, r.median_ms);
  }
  std::vector<WorkloadData> data;
  for (const auto& [key, configs] : best) {
    auto info = (*db)->GetWorkload(key);
    if (!info.ok() || !*info || (*info)->graph.empty()) continue;
    kiln::v1::Graph proto;
    if (!proto.ParseFromString((*info)->graph)) continue;
    auto graph = GraphFromProto(proto);
    if (!graph.ok()) continue;
    WorkloadData w{key, (*info)->kind, DefaultSchedule(**graph, target).ToString(), {}};
    for (const auto& [config, ms] : configs) {
      auto c = ScheduleConfig::Parse(config);
      if (!c.ok() || !(ms > 0)) continue;
      auto f = loop_ir::ScheduleFeatures(**graph, *c, target);
      if (f.ok()) w.schedules.push_back(Measured{config, ms, std::move(*f)});
    }
    if (!w.schedules.empty()) data.push_back(std::move(w));
  }
  std::printf("database %s, target %s: %zu records, %zu workloads with features\n", db_path.c_str(),
              target_key.c_str(), records->size(), data.size());

  std::map<std::string, Totals> by_kind;
  Totals all;
  int evaluated = 0;
  for (size_t held = 0; held < data.size() && evaluated < max_workloads; ++held) {
    const WorkloadData& test = data[held];
    if (static_cast<int>(test.schedules.size()) < min_records) continue;
    // Train on every other workload with two or more schedules.
    server::FeatureMatrix x;
    std::vector<float> y;
    std::vector<unsigned> groups;
    for (size_t j = 0; j < data.size(); ++j) {
      if (j == held || data[j].schedules.size() < 2) continue;
      double b = 1e300;
      for (const Measured& m : data[j].schedules) b = std::min(b, m.ms);
      for (const Measured& m : data[j].schedules) {
        x.AddRow(m.features);
        y.push_back(static_cast<float>(b / m.ms));
      }
      groups.push_back(static_cast<unsigned>(data[j].schedules.size()));
    }
    if (x.rows() < 2) continue;
    server::CostModel model(options);
    if (!model.Train(x, y, options.objective == "rank:pairwise" ? groups : std::vector<unsigned>{}).ok()) continue;
    server::FeatureMatrix tx;
    for (const Measured& m : test.schedules) tx.AddRow(m.features);
    auto predicted = model.Predict(tx);
    if (!predicted.ok()) continue;
    ++evaluated;
    double measured_best = 1e300, mean = 0, default_ms = 0;
    size_t pick = 0;
    for (size_t i = 0; i < test.schedules.size(); ++i) {
      measured_best = std::min(measured_best, test.schedules[i].ms);
      mean += test.schedules[i].ms / static_cast<double>(test.schedules.size());
      if ((*predicted)[i] > (*predicted)[pick]) pick = i;
      if (test.schedules[i].config == test.default_config) default_ms = test.schedules[i].ms;
    }
    Totals* totals[] = {&all, &by_kind[test.kind]};
    for (Totals* t : totals) {
      t->workloads += 1;
      for (size_t i = 0; i < test.schedules.size(); ++i) {
        for (size_t j = i + 1; j < test.schedules.size(); ++j) {
          const double a = test.schedules[i].ms, b = test.schedules[j].ms;
          if (std::abs(a - b) < 0.02 * std::min(a, b)) continue;  // within noise: no order to learn
          t->pairs += 1;
          t->agree += ((a < b) == ((*predicted)[i] > (*predicted)[j])) ? 1 : 0;
        }
      }
      t->log_regret_model += std::log(test.schedules[pick].ms / measured_best);
      t->log_regret_default += std::log((default_ms > 0 ? default_ms : mean) / measured_best);
      t->log_regret_random += std::log(mean / measured_best);
    }
  }
  std::printf("\nleave-one-workload-out (trained on every other workload's records):\n");
  std::printf("%-16s %9s %9s %12s %14s %13s\n", "kind", "workloads", "pairwise", "model pick", "default pick",
              "random pick");
  for (const auto& [kind, t] : by_kind) Print(kind, t);
  Print("all", all);
  std::printf("\npairwise: share of schedule pairs (differing by > 2%%) the model orders as measured (0.5: "
              "chance)\n<x> pick: geometric mean over workloads of (measured median of the pick / measured best)\n");
  return 0;
}
