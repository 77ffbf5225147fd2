// Random and evolutionary search over a workload's enumerated schedule space.
#include "server/search_strategy.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"

namespace kiln::server {
namespace {

// Deterministic per workload and progress: a rerun of the same job proposes
// the same rounds.
std::mt19937_64 Rng(const SearchInput& in, uint64_t salt) {
  std::string seed_text = absl::StrCat(in.workload_key, "|", salt);
  std::seed_seq seed(seed_text.begin(), seed_text.end());
  return std::mt19937_64(seed);
}

class RandomSearch : public SearchStrategy {
 public:
  std::string name() const override { return "random"; }

  std::vector<ScheduleConfig> Propose(const SearchInput& in, int count) override {
    std::vector<ScheduleConfig> out;
    if (count <= 0) return out;
    if (!in.measured.count(in.default_config.ToString())) out.push_back(in.default_config);
    std::vector<ScheduleConfig> rest;
    for (const ScheduleConfig& c : in.space) {
      if (c != in.default_config) rest.push_back(c);
    }
    // One shuffle per workload, walked in order: the same sequence as a single
    // job with all the trials would measure.
    std::mt19937_64 rng = Rng(in, 0);
    std::shuffle(rest.begin(), rest.end(), rng);
    for (const ScheduleConfig& c : rest) {
      if (static_cast<int>(out.size()) >= count) break;
      if (!in.measured.count(c.ToString())) out.push_back(c);
    }
    return out;
  }
};

class EvolutionarySearch : public SearchStrategy {
 public:
  // TVM MetaSchedule's settings, scaled to Kiln's spaces (tens to hundreds of
  // points: a space no larger than the population is ranked whole).
  static constexpr int kPopulation = 512;
  static constexpr int kGenerations = 4;
  static constexpr int kParents = 32;
  static constexpr double kMutationProbability = 0.85;
  static constexpr double kEpsilon = 0.05;

  explicit EvolutionarySearch(CostModelStore* models) : models_(models) {}
  std::string name() const override { return "evolutionary"; }

  std::vector<ScheduleConfig> Propose(const SearchInput& in, int count) override {
    std::vector<ScheduleConfig> out;
    if (count <= 0) return out;
    std::set<std::string> taken = in.measured;
    auto take = [&](const ScheduleConfig& c) {
      if (static_cast<int>(out.size()) < count && taken.insert(c.ToString()).second) out.push_back(c);
    };
    take(in.default_config);
    // Warm start: what won on sibling targets, up to half of the round.
    const size_t seed_end = out.size() + std::max(1, count / 2);
    const std::set<ScheduleConfig> space(in.space.begin(), in.space.end());
    for (const ScheduleConfig& c : in.seeds) {
      if (out.size() >= seed_end) break;
      if (space.count(c)) take(c);
    }

    std::mt19937_64 rng = Rng(in, in.measured.size());
    std::vector<ScheduleConfig> pool = Pool(in, rng);
    std::vector<float> scores;
    if (auto s = Score(in, pool)) scores = std::move(*s);
    std::vector<size_t> order(pool.size());
    std::iota(order.begin(), order.end(), 0);
    if (scores.empty()) {
      std::shuffle(order.begin(), order.end(), rng);
    } else {
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
    }
    // Epsilon-greedy: each slot is, with probability epsilon, a random
    // unmeasured point of the space instead of the next best predicted one.
    std::vector<ScheduleConfig> unmeasured;
    for (const ScheduleConfig& c : in.space) {
      if (!in.measured.count(c.ToString())) unmeasured.push_back(c);
    }
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    size_t next = 0;
    while (static_cast<int>(out.size()) < count) {
      if (!unmeasured.empty() && coin(rng) < kEpsilon) {
        take(unmeasured[std::uniform_int_distribution<size_t>(0, unmeasured.size() - 1)(rng)]);
        continue;
      }
      if (next < order.size()) {
        take(pool[order[next++]]);
        continue;
      }
      // The pool is spent: whatever of the space is left, in order.
      size_t before = out.size();
      for (const ScheduleConfig& c : unmeasured) take(c);
      if (out.size() == before) break;
    }
    return out;
  }

 private:
  std::optional<std::vector<float>> Score(const SearchInput& in, const std::vector<ScheduleConfig>& configs) {
    if (models_ == nullptr || configs.empty()) return std::nullopt;
    return models_->Score(in.workload_key, *in.workload, in.target_key, in.target, in.space_version, configs);
  }

  // The unmeasured points to rank: the whole unmeasured space when it fits in
  // a population, else a population evolved from the best measured points.
  std::vector<ScheduleConfig> Pool(const SearchInput& in, std::mt19937_64& rng) {
    std::vector<ScheduleConfig> unmeasured;
    for (const ScheduleConfig& c : in.space) {
      if (!in.measured.count(c.ToString())) unmeasured.push_back(c);
    }
    if (static_cast<int>(unmeasured.size()) <= kPopulation) return unmeasured;

    const std::set<ScheduleConfig> space(in.space.begin(), in.space.end());
    std::map<std::string, std::vector<int64_t>> values;  // every value each knob takes in the space
    for (const ScheduleConfig& c : in.space) {
      for (const auto& [k, v] : c.knobs) values[k].push_back(v);
    }
    for (auto& [k, v] : values) {
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
    }

    // Generation 0: the best measured points, then random unmeasured ones.
    std::vector<ScheduleConfig> population;
    std::set<ScheduleConfig> seen;
    for (const auto& [c, ms] : in.results) {
      if (static_cast<int>(population.size()) >= kParents) break;
      if (seen.insert(c).second) population.push_back(c);
    }
    std::shuffle(unmeasured.begin(), unmeasured.end(), rng);
    for (const ScheduleConfig& c : unmeasured) {
      if (static_cast<int>(population.size()) >= kPopulation) break;
      if (seen.insert(c).second) population.push_back(c);
    }

    std::uniform_real_distribution<double> coin(0.0, 1.0);
    for (int g = 0; g < kGenerations; ++g) {
      std::vector<float> scores;
      if (auto s = Score(in, population)) scores = std::move(*s);
      if (scores.empty()) break;  // nothing to select by: the random population stands
      std::vector<size_t> order(population.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
      const size_t parents = std::min<size_t>(order.size(), kParents);
      auto parent = [&]() -> const ScheduleConfig& {
        return population[order[std::uniform_int_distribution<size_t>(0, parents - 1)(rng)]];
      };
      std::vector<ScheduleConfig> next;
      for (size_t i = 0; i < parents; ++i) next.push_back(population[order[i]]);
      for (int attempt = 0; attempt < 4 * kPopulation && static_cast<int>(next.size()) < kPopulation; ++attempt) {
        ScheduleConfig child = parent();
        if (coin(rng) < kMutationProbability) {
          if (child.knobs.empty()) continue;
          auto it = std::next(child.knobs.begin(),
                              std::uniform_int_distribution<size_t>(0, child.knobs.size() - 1)(rng));
          const std::vector<int64_t>& vs = values[it->first];
          it->second = vs[std::uniform_int_distribution<size_t>(0, vs.size() - 1)(rng)];
        } else {
          const ScheduleConfig& other = parent();
          for (auto& [k, v] : child.knobs) {
            if (coin(rng) < 0.5) v = other.Get(k, v);
          }
        }
        if (space.count(child) && seen.insert(child).second) next.push_back(child);
      }
      population = std::move(next);
    }
    std::vector<ScheduleConfig> pool;
    for (const ScheduleConfig& c : population) {
      if (!in.measured.count(c.ToString())) pool.push_back(c);
    }
    return pool;
  }

  CostModelStore* models_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SearchStrategy>> MakeSearchStrategy(const std::string& name, CostModelStore* models) {
  if (name == "random") return std::unique_ptr<SearchStrategy>(new RandomSearch());
  if (name == "evolutionary") return std::unique_ptr<SearchStrategy>(new EvolutionarySearch(models));
  return absl::InvalidArgumentError(
      absl::StrCat("unknown search strategy '", name, "'; the choices are random, evolutionary"));
}

}  // namespace kiln::server
