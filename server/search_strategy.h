// Search strategies: what a tuning job measures next. A job asks for a round
// of candidates at a time; every round sees what the earlier ones measured
// (for this workload: in this job, earlier jobs, imports). No strategy proposes
// a schedule that was measured before.
//
//   random        the heuristic default, then a shuffle of the space seeded by
//                 the workload key (a rerun proposes the same ones)
//   evolutionary  the default, then a population evolved from the best measured
//                 schedules (mutation of one knob, crossover of two parents;
//                 only points of the space survive), ranked by the target's
//                 learned cost model (server/cost_model_store.h); a share
//                 epsilon of each round is random, for exploration. With no
//                 model yet (an empty database) it proposes random points.
//                 Seeds (the workload's best configs on sibling targets)
//                 that are unmeasured points of the space come right after
//                 the default, up to half of a round.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/schedule_config.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/ir/graph.h"
#include "server/cost_model_store.h"

namespace kiln::server {

struct SearchInput {
  std::string workload_key;
  const Graph* workload = nullptr;
  std::string target_key;
  Target target;
  int space_version = 0;
  std::vector<ScheduleConfig> space;  // EnumerateSchedules
  ScheduleConfig default_config;
  std::set<std::string> measured;     // configs with any record (ToString)
  // Valid measurements of this workload, fastest first: (config, median ms).
  std::vector<std::pair<ScheduleConfig, double>> results;
  // The workload's fastest configs on sibling targets (same ISA, another
  // CPU), best first: a warm start for a target that has measured little.
  std::vector<ScheduleConfig> seeds;
};

class SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;
  virtual std::string name() const = 0;
  // Up to `count` distinct points of in.space that are not in in.measured;
  // fewer only when fewer remain.
  virtual std::vector<ScheduleConfig> Propose(const SearchInput& in, int count) = 0;
};

// "random" or "evolutionary"; INVALID_ARGUMENT naming the choices otherwise.
// `models` may be null for "random".
absl::StatusOr<std::unique_ptr<SearchStrategy>> MakeSearchStrategy(const std::string& name, CostModelStore* models);

// The strategy a compile uses when it names none.
inline constexpr char kDefaultSearchStrategy[] = "evolutionary";

}  // namespace kiln::server
