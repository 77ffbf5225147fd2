// Lowering of workload graphs (fusion groups) to loop IR, by kind. Each kind
// is a WorkloadLowering: a matcher, a small deterministic schedule space and
// the lowering of the graph at one point of it. The CPU back end lowers every
// workload through one of these (MatMul/Gemm: MatMulLowering, over the matmul
// space of compiler_core/codegen/schedule_space.h; the rest: FindLowering).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"

namespace kiln::loop_ir {

// Bump when the meaning of a loop-IR kind's config changes. It enters
// kScheduleSpaceVersion (compiler_core/codegen/schedule_space.h), the version every
// tuning record and measurement task carries, so older records miss.
inline constexpr int kLoopIrScheduleVersion = 2;  // 2: every dtype, elementwise DAGs
static_assert(kLoopIrScheduleVersion == kLoopIrSpaceVersion,
              "bump kLoopIrSpaceVersion in compiler_core/codegen/schedule_space.h too");

struct WorkloadLowering {
  std::string kind;  // "reduction", "data_movement", ...
  // OK when this lowering takes the workload; UNIMPLEMENTED / INVALID_ARGUMENT
  // naming the node otherwise.
  std::function<absl::Status(const Graph&)> match;
  // Deterministic, non-empty for a matched workload.
  std::function<std::vector<ScheduleConfig>(const Graph&, const CpuTarget&)> enumerate;
  // A member of `enumerate`.
  std::function<ScheduleConfig(const Graph&, const CpuTarget&)> default_schedule;
  // Knobs in range (missing knobs take defaults); INVALID_ARGUMENT otherwise.
  std::function<absl::Status(const Graph&, const ScheduleConfig&, const CpuTarget&)> validate;
  std::function<absl::StatusOr<LoopFunc>(const Graph&, const ScheduleConfig&, const CpuTarget&)> lower;
};

// Reduce*, Softmax, LogSoftmax, LayerNormalization, GlobalAverage/MaxPool with
// fused elementwise and data-movement producers/consumers (lower_reduction.cc).
WorkloadLowering ReductionLowering();
// DAGs of elementwise operators of any Kiln dtype, with broadcasting
// (lower_data_movement.cc).
WorkloadLowering ElementwiseLowering();
// Such DAGs mixed with Transpose, Reshape, Flatten, (Un)Squeeze, Identity,
// Slice, Concat, Pad (constant), Expand as index arithmetic
// (lower_data_movement.cc).
WorkloadLowering DataMovementLowering();

// Every loop-IR lowering, in the order they are tried.
const std::vector<WorkloadLowering>& AllLowerings();

// The first lowering that matches `workload`, or nullptr (with the first
// lowering's refusal in `why`, if given).
const WorkloadLowering* FindLowering(const Graph& workload, absl::Status* why = nullptr);

}  // namespace kiln::loop_ir
