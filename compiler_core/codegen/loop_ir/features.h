// Features of one schedule of one workload for the learned cost model: a
// fixed-length vector computed from the workload (kind, flops, bytes), the
// schedule's knobs and, above all, the loop IR the schedule lowers to (how
// many operations run as vectors or scalars, loads and stores, index
// arithmetic, parallel tasks, loop extents, unrolling, stack temporaries,
// arithmetic intensity), and how far the schedule is from the heuristic
// default (which encodes what Kiln knows). The same vector layout for every kind, so that one
// model per target learns across workloads. Counts are dynamic (weighted by
// the trip counts of the enclosing loops) and log2(1 + x) scaled.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/schedule_config.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/ir/graph.h"

namespace kiln::loop_ir {

// The name of every feature, in vector order ("ir.vector_flops", "knob.mr", ...).
const std::vector<std::string>& FeatureNames();

// Features of a lowered kernel alone (the "ir." part of the vector).
std::vector<float> LoopFuncFeatures(const LoopFunc& f);

// The whole vector for `config` on `workload` for `target` (a CPU or a
// GPU): lowers it (INVALID_ARGUMENT or UNIMPLEMENTED as the lowering says
// when it cannot), then workload, knob and loop IR features. A knob the
// schedule does not set is NaN (missing). Lowered as the kind's lowering
// gives it, without the checks and index simplification code generation
// adds (kernel_emitter.h): cheap enough for a search's every candidate.
absl::StatusOr<std::vector<float>> ScheduleFeatures(const Graph& workload, const ScheduleConfig& config,
                                                    const Target& target);

}  // namespace kiln::loop_ir
