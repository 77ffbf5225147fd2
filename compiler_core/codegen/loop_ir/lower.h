// Lowering of workload graphs (fusion groups) to loop IR, by kind. Each kind
// is a WorkloadLowering: a matcher, a small deterministic schedule space and
// the lowering of the graph at one point of it. AllLowerings is the registry
// the CPU back end (schedule_space.h, kernel_emitter.h) asks; a new kind is a
// new lower_<family>.cc registered there.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/schedule_config.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/ir/graph.h"

namespace kiln::loop_ir {

// A change to a lowering's space or to what a knob means changes the kernels
// tuning records describe: bump kScheduleSpaceVersion (schedule_space.h).
struct WorkloadLowering {
  std::string kind;  // "matmul", "reduction", "data_movement", ...
  // OK when this lowering takes the workload; otherwise UNIMPLEMENTED when the
  // workload is not of this kind, INVALID_ARGUMENT (naming the node or value)
  // when it is but is malformed.
  std::function<absl::Status(const Graph&)> match;
  // Deterministic, non-empty for a matched workload.
  std::function<std::vector<ScheduleConfig>(const Graph&, const CpuTarget&)> enumerate;
  // A member of `enumerate`.
  std::function<ScheduleConfig(const Graph&, const CpuTarget&)> default_schedule;
  // Knobs in range (missing knobs take defaults); INVALID_ARGUMENT otherwise.
  std::function<absl::Status(const Graph&, const ScheduleConfig&, const CpuTarget&)> validate;
  std::function<absl::StatusOr<LoopFunc>(const Graph&, const ScheduleConfig&, const CpuTarget&)> lower;
};

// Every lowering (each declared in its lower_<family>.h), in the order they
// are tried.
const std::vector<WorkloadLowering>& AllLowerings();

// The first lowering that matches `workload`, or nullptr with the refusal in
// `why` (if given): the first INVALID_ARGUMENT (a lowering recognised the
// workload but found it malformed), else the first lowering's refusal.
const WorkloadLowering* FindLowering(const Graph& workload, absl::Status* why = nullptr);

}  // namespace kiln::loop_ir
