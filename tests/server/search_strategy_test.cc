// The learned cost model (XGBoost) and the search strategies, on real
// workloads, real schedule spaces and a real tuning database; the
// "measurements" are a known function of the knobs, so that what the search
// should learn is known.
#include "server/search_strategy.h"

#include <cmath>
#include <random>
#include <set>

#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/graph_proto.h"
#include "gtest/gtest.h"
#include "server/cost_model.h"
#include "server/cost_model_store.h"
#include "server/task_broker.h"
#include "server/tuner.h"
#include "tests/tuning_db/temp_db_dir.h"

namespace kiln::server {
namespace {

using tuningdb::testing_util::TempDbDir;

std::unique_ptr<Graph> MatMul(int64_t m, int64_t k, int64_t n) {
  auto g = std::make_unique<Graph>();
  Value* a = *g->AddInput("a", TensorType::Static(DType::kFloat32, {m, k}));
  Value* b = *g->AddInput("b", TensorType::Static(DType::kFloat32, {k, n}));
  Value* y = *g->AddValue("y", TensorType::Static(DType::kFloat32, {m, n}));
  EXPECT_TRUE(g->AddNode("MatMul", "mm", {a, b}, {y}).ok());
  g->AddOutput(y);
  return g;
}

// The "measured" time of a schedule: fastest at mr=4, nr=2 (whatever else).
double SyntheticMs(const ScheduleConfig& c) {
  return 1.0 + std::abs(c.Get("mr", 1) - 4) + 2.0 * std::abs(c.Get("nr", 1) - 2);
}

SearchInput InputFor(const std::string& key, const Graph& g, const std::set<std::string>& measured = {}) {
  SearchInput in;
  in.workload_key = key;
  in.workload = &g;
  in.target = CpuTarget::Host();
  in.target_key = in.target.Key();
  in.space_version = kScheduleSpaceVersion;
  in.space = EnumerateSchedules(g, in.target);
  in.default_config = DefaultSchedule(g, in.target);
  in.measured = measured;
  return in;
}

// Every proposal is a distinct, unmeasured point of the space.
void ExpectSound(const SearchInput& in, const std::vector<ScheduleConfig>& out) {
  std::set<ScheduleConfig> space(in.space.begin(), in.space.end());
  std::set<std::string> seen;
  for (const ScheduleConfig& c : out) {
    EXPECT_TRUE(space.count(c)) << c.ToString() << " is not in the space";
    EXPECT_FALSE(in.measured.count(c.ToString())) << c.ToString() << " was measured before";
    EXPECT_TRUE(seen.insert(c.ToString()).second) << c.ToString() << " proposed twice";
  }
}

// The share of pairs (differing by more than 0.02) that `scores` orders as `truth` does.
double ShareOrderedAsTruth(const std::vector<float>& truth, const std::vector<float>& scores) {
  int agree = 0, pairs = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    for (size_t j = i + 1; j < truth.size(); ++j) {
      if (std::abs(truth[i] - truth[j]) < 0.02f) continue;
      ++pairs;
      agree += ((truth[i] > truth[j]) == (scores[i] > scores[j])) ? 1 : 0;
    }
  }
  return pairs > 0 ? static_cast<double>(agree) / pairs : 0;
}

// Workloads "w-a" (MatMul 48x192x256) and "w-b" (80x192x256), every point of
// their spaces on this CPU recorded for `target_key`, timed by SyntheticMs.
absl::Status MeasureTwoWorkloads(tuningdb::TuningDb& db, const std::string& target_key) {
  for (auto [key, m] : {std::pair<std::string, int64_t>{"w-a", 48}, {"w-b", 80}}) {
    auto g = MatMul(m, 192, 256);
    kiln::v1::Graph proto;
    GraphToProto(*g, &proto);
    if (absl::Status s = db.UpsertWorkload({key, key, "matmul", "MatMul", 1, 1, proto.SerializeAsString()}); !s.ok()) {
      return s;
    }
    std::vector<tuningdb::Record> records;
    for (const ScheduleConfig& c : EnumerateSchedules(*g, CpuTarget::Host())) {
      tuningdb::Record r;
      r.workload_key = key;
      r.target_key = target_key;
      r.space_version = kScheduleSpaceVersion;
      r.config = c.ToString();
      r.median_ms = SyntheticMs(c);
      r.worker_id = "test";
      records.push_back(r);
    }
    if (absl::Status s = db.AddRecords(records); !s.ok()) return s;
  }
  return absl::OkStatus();
}

TEST(CostModelTest, LearnsAnOrderFromFeaturesAndRefusesBadInput) {
  CostModel model;
  FeatureMatrix empty;
  EXPECT_EQ(model.Predict(empty).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(model.Train(empty, {}).code(), absl::StatusCode::kInvalidArgument);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0, 8);
  auto label = [](const std::vector<float>& r) { return 1.0f / (1.0f + std::abs(r[0] - 3) + 0.5f * r[1]); };
  FeatureMatrix train;
  std::vector<float> y;
  for (int i = 0; i < 400; ++i) {
    std::vector<float> r = {u(rng), u(rng), u(rng)};  // the third is noise
    train.AddRow(r);
    y.push_back(label(r));
  }
  EXPECT_EQ(model.Train(train, std::vector<float>(3, 1.0f)).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(model.Train(train, y).ok());
  EXPECT_EQ(model.trained_rows(), 400);
  FeatureMatrix test;
  std::vector<float> truth;
  for (int i = 0; i < 100; ++i) {
    std::vector<float> r = {u(rng), u(rng), u(rng)};
    test.AddRow(r);
    truth.push_back(label(r));
  }
  auto predicted = model.Predict(test);
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  EXPECT_GT(ShareOrderedAsTruth(truth, *predicted), 0.9);
  FeatureMatrix narrow;
  narrow.AddRow({1, 2});
  EXPECT_EQ(model.Predict(narrow).status().code(), absl::StatusCode::kInvalidArgument);

  // The ranking objective orders within groups of rows; groups must cover the rows.
  CostModel::Options rank_options;
  rank_options.objective = "rank:pairwise";
  CostModel ranker(rank_options);
  EXPECT_EQ(ranker.Train(train, y, {100, 100}).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(ranker.Train(train, y, {100, 100, 100, 100}).ok());
  auto ranked = ranker.Predict(test);
  ASSERT_TRUE(ranked.ok()) << ranked.status();
  EXPECT_GT(ShareOrderedAsTruth(truth, *ranked), 0.9);
}

TEST(SearchStrategyTest, UnknownNameIsInvalidArgument) {
  auto s = MakeSearchStrategy("annealing", nullptr);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.status().message()).find("random, evolutionary"), std::string::npos);
}

TEST(SearchStrategyTest, RandomStartsWithTheDefaultAndWalksOneShuffle) {
  auto g = MatMul(64, 256, 256);
  auto random = MakeSearchStrategy("random", nullptr);
  ASSERT_TRUE(random.ok());
  SearchInput in = InputFor("w-random", *g);
  ASSERT_GT(in.space.size(), 12u);
  std::vector<ScheduleConfig> first = (*random)->Propose(in, 6);
  ASSERT_EQ(first.size(), 6u);
  EXPECT_EQ(first[0], in.default_config);
  ExpectSound(in, first);
  EXPECT_EQ((*random)->Propose(in, 6), first);  // deterministic
  // Deepening: with the first round measured, the next round is the next six
  // of the same shuffle, as one job of twelve would have measured.
  std::vector<ScheduleConfig> twelve = (*random)->Propose(in, 12);
  for (const ScheduleConfig& c : first) in.measured.insert(c.ToString());
  std::vector<ScheduleConfig> second = (*random)->Propose(in, 6);
  ExpectSound(in, second);
  EXPECT_EQ(std::vector<ScheduleConfig>(twelve.begin() + 6, twelve.end()), second);
  // What is left, when less than asked for.
  for (const ScheduleConfig& c : in.space) in.measured.insert(c.ToString());
  in.measured.erase(in.space.back().ToString());
  EXPECT_EQ((*random)->Propose(in, 6), std::vector<ScheduleConfig>{in.space.back()});
}

TEST(SearchStrategyTest, EvolutionaryWithoutAModelProposesSoundRandomPoints) {
  TempDbDir dir;
  auto db = tuningdb::TuningDb::Open(dir.Path());
  ASSERT_TRUE(db.ok());
  CostModelStore store(db->get());
  auto evo = MakeSearchStrategy("evolutionary", &store);
  ASSERT_TRUE(evo.ok());
  auto g = MatMul(64, 256, 256);
  SearchInput in = InputFor("w-cold", *g);
  std::vector<ScheduleConfig> out = (*evo)->Propose(in, 8);
  ASSERT_EQ(out.size(), 8u);
  EXPECT_EQ(out[0], in.default_config);
  ExpectSound(in, out);
  EXPECT_EQ(store.stats(in.target_key).trained_rows, 0);
}

TEST(SearchStrategyTest, EvolutionaryRanksANewWorkloadByWhatTheDatabaseTaught) {
  TempDbDir dir;
  auto db = tuningdb::TuningDb::Open(dir.Path());
  ASSERT_TRUE(db.ok());
  const CpuTarget target = CpuTarget::Host();
  // Two measured workloads: every schedule of their spaces, timed by SyntheticMs.
  ASSERT_TRUE(MeasureTwoWorkloads(**db, target.Key()).ok());
  CostModelStore store(db->get());
  auto evo = MakeSearchStrategy("evolutionary", &store);
  auto random = MakeSearchStrategy("random", nullptr);
  ASSERT_TRUE(evo.ok() && random.ok());
  // A workload nothing measured: the model's first proposals beat a random
  // round of the same size on the function the database taught.
  auto g = MatMul(64, 256, 256);
  SearchInput in = InputFor("w-new", *g);
  in.measured.insert(in.default_config.ToString());
  std::vector<ScheduleConfig> learned = (*evo)->Propose(in, 8);
  std::vector<ScheduleConfig> shuffled = (*random)->Propose(in, 8);
  ExpectSound(in, learned);
  ASSERT_EQ(learned.size(), 8u);
  ASSERT_EQ(shuffled.size(), 8u);
  EXPECT_GT(store.stats(in.target_key).trained_rows, 0);
  double best_learned = 1e9, best_random = 1e9, sum_learned = 0, sum_random = 0;
  for (size_t i = 0; i < 8; ++i) {
    best_learned = std::min(best_learned, SyntheticMs(learned[i]));
    best_random = std::min(best_random, SyntheticMs(shuffled[i]));
    sum_learned += SyntheticMs(learned[i]);
    sum_random += SyntheticMs(shuffled[i]);
  }
  double best_possible = 1e9;
  for (const ScheduleConfig& c : in.space) {
    if (!in.measured.count(c.ToString())) best_possible = std::min(best_possible, SyntheticMs(c));
  }
  EXPECT_EQ(best_learned, best_possible) << "first proposal " << learned[0].ToString();
  EXPECT_LT(sum_learned, sum_random);
  EXPECT_LE(best_learned, best_random);
}

TEST(SearchStrategyTest, ANewTargetStartsFromItsSiblingsRecords) {
  TempDbDir dir;
  auto db = tuningdb::TuningDb::Open(dir.Path());
  ASSERT_TRUE(db.ok());
  const CpuTarget target = CpuTarget::Host();
  const std::string sibling = "cpu/x86_64/another-cpu/0badcafe";
  ASSERT_TRUE((*db)->UpsertTarget({target.Key(), "cpu", "x86_64", target.cpu, target.features, "", "", ""}).ok());
  ASSERT_TRUE((*db)->UpsertTarget({sibling, "cpu", "x86_64", "another-cpu", "+avx2", "", "", ""}).ok());
  ASSERT_TRUE((*db)->UpsertTarget({"cpu/aarch64/neoverse-v2/12345678", "cpu", "aarch64", "neoverse-v2", "", "", "",
                                   ""}).ok());
  auto siblings = (*db)->SiblingTargets(target.Key());
  ASSERT_TRUE(siblings.ok()) << siblings.status();
  EXPECT_EQ(*siblings, std::vector<std::string>{sibling});
  EXPECT_TRUE((*db)->SiblingTargets("cpu/x86_64/unlisted/00000000")->empty());

  // Only the sibling has measured: two workloads' whole spaces, by SyntheticMs.
  auto measured_graph = MatMul(48, 192, 256);
  ASSERT_TRUE(MeasureTwoWorkloads(**db, sibling).ok());

  // The cost model of the new target trains on them.
  CostModelStore store(db->get());
  auto g = MatMul(64, 256, 256);
  SearchInput in = InputFor("w-new", *g);
  auto scores = store.Score("w-new", *g, in.target_key, in.target, kScheduleSpaceVersion, in.space);
  ASSERT_TRUE(scores.has_value()) << "no model from the sibling's records";
  EXPECT_GT(store.stats(in.target_key).sibling_records, 0);

  // The tuner seeds a workload the sibling measured with the sibling's best.
  TaskBroker broker(TaskBroker::Options{});
  Tuner tuner(db->get(), &broker, Tuner::Options{});
  std::vector<ScheduleConfig> seeds = tuner.SiblingSeeds("w-a", target.Key());
  ASSERT_EQ(seeds.size(), static_cast<size_t>(Tuner::kSeedsPerSibling));
  EXPECT_EQ(SyntheticMs(seeds[0]), 1.0);  // the best the sibling measured
  EXPECT_TRUE(tuner.SiblingSeeds("w-unknown", target.Key()).empty());

  // The evolutionary search proposes the seeds that are points of the space
  // right after the default, up to half of the round.
  auto evo = MakeSearchStrategy("evolutionary", &store);
  ASSERT_TRUE(evo.ok());
  SearchInput seeded = InputFor("w-a", *measured_graph);
  std::vector<ScheduleConfig> others;
  for (const ScheduleConfig& c : seeded.space) {
    if (c != seeded.default_config) others.push_back(c);
  }
  ASSERT_GE(others.size(), 4u);
  ScheduleConfig outside;
  outside.knobs["no-such-knob"] = 3;
  seeded.seeds = {others[3], outside, others[1], others[2], others[0]};
  std::vector<ScheduleConfig> out = (*evo)->Propose(seeded, 6);
  ExpectSound(seeded, out);
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[0], seeded.default_config);
  EXPECT_EQ(out[1], others[3]);
  EXPECT_EQ(out[2], others[1]);
  EXPECT_EQ(out[3], others[2]);
}

}  // namespace
}  // namespace kiln::server
