// The default graph optimisation: the ordered list of graph passes the compile
// pipeline runs after import and shape inference, and a driver that repeats it
// until nothing changes.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"
#include "compiler_core/passes/pass_pipeline.h"

namespace kiln {

// legacy_forms, einsum_decomposition, constant_folding, algebraic_simplification, dce, batchnorm_folding, the
// composite recognitions (hardswish, gelu, layer_norm, softmax), cse, dce.
PassPipeline DefaultOptimizationPipeline();

// Which algorithm selection OptimizeGraph ends with. kCpuBlockedPointwise:
// kCpu, and pointwise convs' weights blocked too (blocked_conv_weights.h),
// for CPUs whose conv pairs are off.
enum class AlgorithmChoice { kCpu, kCpuBlockedPointwise, kNone };

// Run once after the default pipeline's fixed point: rewrites that pick an
// algorithm for the CPU code generator (live_tap_regions,
// winograd_convolution, pointwise_conv_as_matmul, blocked_conv_weights, and
// packed_matmul_weights where `matmul_panel` (the target's f32 lanes) is
// set, which winograd_convolution's vector rules read too), then dce. A GPU
// compile runs none: its convs are implicit GEMMs, whatever their shape.
PassPipeline AlgorithmSelectionPipeline(AlgorithmChoice choice = AlgorithmChoice::kCpu, int64_t matmul_panel = 0);

// Most rounds OptimizeGraph runs the pipeline.
inline constexpr int kMaxOptimizationRounds = 4;

// Runs DefaultOptimizationPipeline() on `graph` until a round changes nothing
// (at most kMaxOptimizationRounds rounds), then
// AlgorithmSelectionPipeline(algorithms, matmul_panel) unless `algorithms`
// is kNone.
// `graph` must be shape-inferred.
// Returns the record of every pass run, in order. A pass error (the pass name
// prefixed) or a verifier failure after a pass (INTERNAL) is returned as is.
absl::StatusOr<std::vector<PassRecord>> OptimizeGraph(Graph& graph, const PassPipelineOptions& options,
                                                      AlgorithmChoice algorithms = AlgorithmChoice::kCpu,
                                                      int64_t matmul_panel = 0);

}  // namespace kiln
