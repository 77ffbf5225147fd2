// The compile driver: the one spelling of Kiln's compile pipeline, from a
// model to a package. Each stage is a function; together, in this order, they
// are the pipeline:
//
//   ImportModel        ONNX bytes or a kiln.v1.Graph -> verified, shape-inferred graph
//   PrepareModel       optimise (pass pipeline) -> partition under the code
//                      generator's constraint -> one workload per group
//   CheckCompilable    every group has a lowering, or one error naming them all
//   [schedules]        DefaultSchedules, or the server's tuner
//   BuildPackage       codegen every group with its schedule -> .kpkg bytes
//
// The server adds tuning and storage around it; `kiln inspect`, `kiln eval
// --dump-graph`, the conformance runner and the model tests call it as is.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/schedule_config.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/fusion/partitioner.h"
#include "compiler_core/fusion/workload.h"
#include "compiler_core/ir/graph.h"
#include "compiler_core/package/package_writer.h"
#include "compiler_core/passes/pass_pipeline.h"
#include "kiln/v1/graph.pb.h"

namespace kiln {

// A model as a client sends it: ONNX bytes, or else a native graph message.
struct ModelSource {
  std::string onnx_model;
  const kiln::v1::Graph* graph = nullptr;
  // Bindings of symbolic input dimensions (`--shape x=1,3,224,224`; ONNX only).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Values of inputs known at import (ImportOptions::input_values).
  std::map<std::string, Tensor> input_values;
};

// Imports, verifies and infers shapes. INVALID_ARGUMENT naming the node (or
// the field) for a bad model.
absl::StatusOr<std::unique_ptr<Graph>> ImportModel(const ModelSource& source);

struct PrepareOptions {
  PassPipelineOptions passes;  // --dump-after and its sink
  FusionCostOptions fusion_cost;
  // Set: prepared for this GPU. No CPU algorithm selection (Winograd, 1x1
  // convs as Gemms), no conv-pair groups (each conv is its own kernel), and
  // a group grows only while the GPU lowerings take it.
  std::optional<GpuTarget> gpu;
  // CPU only: pointwise convs' weights blocked at compile time
  // (AlgorithmChoice::kCpuBlockedPointwise); such a conv no longer joins a
  // conv pair.
  bool blocked_pointwise = false;
  // CPU only: a matrix product's constant B stored in column panels of this
  // many columns, the target's f32 lanes (passes/packed_matmul_weights.h);
  // 0: B as the model has it.
  int64_t matmul_panel = 0;
};

// A model optimised and cut into fusion groups, each with its workload.
struct PreparedModel {
  std::unique_ptr<Graph> graph;      // the optimised graph the groups refer to
  int imported_nodes = 0;            // before optimisation
  std::vector<PassRecord> passes;    // every pass run: name, time, changed
  Partition partition;               // group kinds are the lowerings' kinds
  std::vector<Workload> workloads;   // workloads[i] belongs to partition.groups[i]
  int distinct_workloads = 0;        // distinct workload keys
};

// Optimises `graph` and partitions it under the code generator's constraint
// (a group grows only while some lowering takes it). A group no lowering
// takes is kept, with kind "unsupported": CheckCompilable says which.
absl::StatusOr<PreparedModel> PrepareModel(std::unique_ptr<Graph> graph, const PrepareOptions& options = {});

// OK when every group has a lowering and lowers to loop IR at its default
// schedule on `target` (no LLVM: cheap), so that a group that cannot be built
// is refused before anything is tuned. Otherwise INVALID_ARGUMENT starting
// "unsupported: " and naming, with the model's node names, every group that
// fails ("no code generator for node 'a' (Foo); group 7 [node 'x' (MatMul),
// node 'y' (Add)]: <why>").
absl::Status CheckCompilable(const PreparedModel& model, const Target& target);

// The heuristic default schedule of every group on `target`.
std::vector<ScheduleConfig> DefaultSchedules(const PreparedModel& model, const Target& target);

// The PrepareOptions a compile for `target` starts from: gpu set for a GPU;
// no conv-pair groups on a CPU of 16 vector registers (AVX2), where the
// fused kernel loses to the two convs apart.
PrepareOptions PrepareOptionsFor(const Target& target);

// Code for every group with configs[i] for group i, the buffer plan, the package.
absl::StatusOr<PackageBytes> BuildPackage(const PreparedModel& model, const std::vector<ScheduleConfig>& configs,
                                          const PackageOptions& options);

// PrepareModel, CheckCompilable, DefaultSchedules and BuildPackage: a package
// without tuning (what a compile with no tuning records gives), for the CPU
// or, when options.gpu is set, for that GPU.
absl::StatusOr<PackageBytes> CompileWithDefaultSchedules(std::unique_ptr<Graph> graph,
                                                         const PackageOptions& options);

}  // namespace kiln
