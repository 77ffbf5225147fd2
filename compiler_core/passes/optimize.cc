// The default optimisation pipeline and its fixed-point driver.
#include "compiler_core/passes/optimize.h"

#include <memory>

#include "base/status_macros.h"

#include "compiler_core/passes/algebraic_simplification.h"
#include "compiler_core/passes/batchnorm_folding.h"
#include "compiler_core/passes/blocked_conv_weights.h"
#include "compiler_core/passes/common_subexpression_elimination.h"
#include "compiler_core/passes/constant_folding.h"
#include "compiler_core/passes/conv_branch_merging.h"
#include "compiler_core/passes/dead_code_elimination.h"
#include "compiler_core/passes/einsum_decomposition.h"
#include "compiler_core/passes/gelu_recognition.h"
#include "compiler_core/passes/hardswish_recognition.h"
#include "compiler_core/passes/layer_norm_recognition.h"
#include "compiler_core/passes/legacy_forms.h"
#include "compiler_core/passes/live_tap_regions.h"
#include "compiler_core/passes/packed_matmul_weights.h"
#include "compiler_core/passes/pad_folding.h"
#include "compiler_core/passes/pointwise_conv_as_matmul.h"
#include "compiler_core/passes/rnn_recurrence.h"
#include "compiler_core/passes/softmax_recognition.h"
#include "compiler_core/passes/strided_pointwise_conv.h"
#include "compiler_core/passes/transpose_sinking.h"
#include "compiler_core/passes/winograd_convolution.h"

namespace kiln {

PassPipeline DefaultOptimizationPipeline() {
  PassPipeline p("default_optimization");
  p.Add(std::make_unique<LegacyFormCanonicalization>())
      .Add(std::make_unique<EinsumDecomposition>())
      .Add(std::make_unique<RnnRecurrence>())
      .Add(std::make_unique<ConstantFolding>())
      .Add(std::make_unique<TransposeSinking>())
      .Add(std::make_unique<AlgebraicSimplification>())
      .Add(std::make_unique<DeadCodeElimination>())
      .Add(std::make_unique<BatchNormFolding>())
      .Add(std::make_unique<PadFolding>())
      .Add(std::make_unique<ConvBranchMerging>())
      .Add(std::make_unique<StridedPointwiseConv>())
      .Add(std::make_unique<HardSwishRecognition>())
      .Add(std::make_unique<GeluRecognition>())
      .Add(std::make_unique<LayerNormRecognition>())
      .Add(std::make_unique<SoftmaxRecognition>())
      .Add(std::make_unique<CommonSubexpressionElimination>())
      .Add(std::make_unique<DeadCodeElimination>());
  return p;
}

PassPipeline AlgorithmSelectionPipeline(AlgorithmChoice choice, int64_t matmul_panel) {
  PassPipeline p("algorithm_selection");
  p.Add(std::make_unique<LiveTapRegions>())
      .Add(std::make_unique<WinogradConvolution>(matmul_panel))
      .Add(std::make_unique<PointwiseConvAsMatMul>())
      .Add(std::make_unique<BlockedConvWeights>(choice == AlgorithmChoice::kCpuBlockedPointwise));
  if (matmul_panel > 0) p.Add(std::make_unique<PackedMatMulWeights>(matmul_panel));
  p.Add(std::make_unique<DeadCodeElimination>());
  return p;
}

absl::StatusOr<std::vector<PassRecord>> OptimizeGraph(Graph& graph, const PassPipelineOptions& options,
                                                      AlgorithmChoice algorithms, int64_t matmul_panel) {
  const PassPipeline pipeline = DefaultOptimizationPipeline();
  std::vector<PassRecord> all;
  for (int round = 0; round < kMaxOptimizationRounds; ++round) {
    absl::StatusOr<std::vector<PassRecord>> records = pipeline.Run(graph, options);
    if (!records.ok()) return records.status();
    bool changed = false;
    for (PassRecord& r : *records) {
      changed = changed || r.changed;
      all.push_back(std::move(r));
    }
    if (!changed) break;
  }
  if (algorithms == AlgorithmChoice::kNone) return all;
  ASSIGN_OR_RETURN(std::vector<PassRecord> late,
                   AlgorithmSelectionPipeline(algorithms, matmul_panel).Run(graph, options));
  for (PassRecord& r : late) all.push_back(std::move(r));
  return all;
}

}  // namespace kiln
