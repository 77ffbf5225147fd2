// The compile driver's stages (see compile_driver.h).
#include "compiler_core/driver/compile_driver.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/graph_proto.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "compiler_core/passes/optimize.h"

namespace kiln {

absl::StatusOr<std::unique_ptr<Graph>> ImportModel(const ModelSource& source) {
  if (source.graph != nullptr) return GraphFromProto(*source.graph);
  if (source.onnx_model.empty()) {
    return absl::InvalidArgumentError("compile request carries no model (set onnx_model or graph)");
  }
  ImportOptions options;
  options.input_shapes = source.input_shapes;
  return ImportOnnxModel(source.onnx_model, options);
}

absl::StatusOr<PreparedModel> PrepareModel(std::unique_ptr<Graph> graph, const PrepareOptions& options) {
  PreparedModel m;
  m.imported_nodes = static_cast<int>(graph->nodes().size());
  ASSIGN_OR_RETURN(m.passes, OptimizeGraph(*graph, options.passes));
  FusionOptions fusion;
  fusion.cost = options.fusion_cost;
  fusion.classify = LoweringKind;
  ASSIGN_OR_RETURN(m.partition, PartitionGraph(*graph, fusion));
  std::set<std::string> keys;
  for (const FusionGroup& g : m.partition.groups) {
    ASSIGN_OR_RETURN(Workload w, ExtractWorkload(*graph, g));
    keys.insert(w.key);
    m.workloads.push_back(std::move(w));
  }
  m.distinct_workloads = static_cast<int>(keys.size());
  m.graph = std::move(graph);
  return m;
}

absl::Status CheckCompilable(const PreparedModel& model, const std::string& target_key) {
  std::vector<std::string> nodes;
  for (const FusionGroup& g : model.partition.groups) {
    if (g.kind != "unsupported") continue;
    for (const Node* n : g.nodes) nodes.push_back(absl::StrCat("'", n->name(), "' (", n->op_type(), ")"));
  }
  if (nodes.empty()) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat("no code generator for node", nodes.size() > 1 ? "s " : " ",
                                               absl::StrJoin(nodes, ", "), " on target ", target_key, " yet"));
}

std::vector<ScheduleConfig> DefaultSchedules(const PreparedModel& model, const CpuTarget& target) {
  std::vector<ScheduleConfig> configs;
  for (const Workload& w : model.workloads) configs.push_back(DefaultSchedule(*w.graph, target));
  return configs;
}

absl::StatusOr<PackageBytes> BuildPackage(const PreparedModel& model, const std::vector<ScheduleConfig>& configs,
                                          const PackageOptions& options) {
  return WritePackage(*model.graph, model.partition, model.workloads, configs, options);
}

absl::StatusOr<PackageBytes> CompileWithDefaultSchedules(std::unique_ptr<Graph> graph,
                                                         const PackageOptions& options) {
  ASSIGN_OR_RETURN(PreparedModel model, PrepareModel(std::move(graph)));
  RETURN_IF_ERROR(CheckCompilable(model, options.target.Key()));
  return BuildPackage(model, DefaultSchedules(model, options.target), options);
}

}  // namespace kiln
