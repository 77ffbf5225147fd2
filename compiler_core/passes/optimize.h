// The default graph optimisation: the ordered list of graph passes the compile
// pipeline runs after import and shape inference, and a driver that repeats it
// until nothing changes.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"
#include "compiler_core/passes/pass_pipeline.h"

namespace kiln {

// legacy_forms, einsum_decomposition, constant_folding, algebraic_simplification, dce, batchnorm_folding, the
// composite recognitions (hardswish, gelu, layer_norm, softmax), cse, dce.
PassPipeline DefaultOptimizationPipeline();

// Run once after the default pipeline's fixed point: rewrites that pick an
// algorithm for the CPU code generator (winograd_convolution,
// pointwise_conv_as_matmul), then dce. A GPU compile runs none: its convs
// are implicit GEMMs, whatever their shape.
PassPipeline AlgorithmSelectionPipeline();

// Which algorithm selection OptimizeGraph ends with.
enum class AlgorithmChoice { kCpu, kNone };

// Most rounds OptimizeGraph runs the pipeline.
inline constexpr int kMaxOptimizationRounds = 4;

// Runs DefaultOptimizationPipeline() on `graph` until a round changes nothing
// (at most kMaxOptimizationRounds rounds), then AlgorithmSelectionPipeline()
// when `algorithms` is kCpu. `graph` must be shape-inferred.
// Returns the record of every pass run, in order. A pass error (the pass name
// prefixed) or a verifier failure after a pass (INTERNAL) is returned as is.
absl::StatusOr<std::vector<PassRecord>> OptimizeGraph(Graph& graph, const PassPipelineOptions& options,
                                                      AlgorithmChoice algorithms = AlgorithmChoice::kCpu);

}  // namespace kiln
