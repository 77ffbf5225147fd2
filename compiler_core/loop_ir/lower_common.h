// Knob and form helpers shared by the loop-IR lowerings (internal to
// compiler_core/loop_ir).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "compiler_core/graph.h"
#include "compiler_core/schedule_space.h"
#include "compiler_core/target.h"

namespace kiln::loop_ir {

// f32 everywhere, static shapes, at least one node and one output, at most
// 2^31 elements per value.
absl::Status CheckWorkloadBasics(const Graph& g);
// 1, 4, 8, 16 up to the target's lanes, leaving out widths beyond the extent.
std::vector<int64_t> VectorWidths(const CpuTarget& target, int64_t extent);
// {1} or {1, 16} (parallel split when there is work to share).
std::vector<int64_t> TaskCounts(int64_t elements, bool can_parallelize);
// Widest vw, then most tasks.
ScheduleConfig PickDefault(const std::vector<ScheduleConfig>& space, const CpuTarget& target);
// Only `known` knobs; vw a power of two <= lanes; tasks in [1, 1024].
absl::Status ValidateKnobs(const Graph& g, const ScheduleConfig& c, const CpuTarget& target,
                           const std::vector<std::string>& known);

}  // namespace kiln::loop_ir
