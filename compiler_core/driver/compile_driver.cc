// The compile driver's stages (see compile_driver.h).
#include "compiler_core/driver/compile_driver.h"

#include <limits>
#include <regex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/loop_ir/gpu/lower.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/graph_proto.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "compiler_core/passes/optimize.h"
#include "kiln/v1/package_layout.h"

namespace kiln {

absl::StatusOr<std::unique_ptr<Graph>> ImportModel(const ModelSource& source) {
  if (source.graph != nullptr) return GraphFromProto(*source.graph);
  if (source.onnx_model.empty()) {
    return absl::InvalidArgumentError("compile request carries no model (set onnx_model or graph)");
  }
  ImportOptions options;
  options.input_shapes = source.input_shapes;
  options.input_values = source.input_values;
  return ImportOnnxModel(source.onnx_model, options);
}

absl::StatusOr<PreparedModel> PrepareModel(std::unique_ptr<Graph> graph, const PrepareOptions& options) {
  PreparedModel m;
  m.imported_nodes = static_cast<int>(graph->nodes().size());
  const AlgorithmChoice algorithms = options.gpu                 ? AlgorithmChoice::kNone
                                     : options.blocked_pointwise ? AlgorithmChoice::kCpuBlockedPointwise
                                                                 : AlgorithmChoice::kCpu;
  ASSIGN_OR_RETURN(m.passes, OptimizeGraph(*graph, options.passes, algorithms, options.matmul_panel));
  FusionOptions fusion;
  fusion.cost = options.fusion_cost;
  fusion.classify = LoweringKind;
  // Concats written in place by their inputs' kernels, on CPUs: the memory
  // plan keeps every buffer package::kAlignment aligned.
  fusion.view_alignment = options.gpu ? 0 : package::kAlignment;
  if (options.gpu) {
    const GpuTarget gpu = *options.gpu;
    fusion.cost.min_conv_pair_bytes = std::numeric_limits<double>::infinity();
    fusion.classify = [gpu](const Graph& workload) -> std::optional<std::string> {
      if (!CanCompile(workload, gpu)) return std::nullopt;
      return LoweringKind(workload);
    };
  }
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

namespace {

std::string NodeList(const FusionGroup& g) {
  std::vector<std::string> nodes;
  for (const Node* n : g.nodes) nodes.push_back(absl::StrCat("node '", n->name(), "' (", n->op_type(), ")"));
  return absl::StrJoin(nodes, ", ");
}

// `message` about a workload with its nodes n0, n1, ... named as in the model.
std::string InModelTerms(const std::string& message, const FusionGroup& g) {
  static const std::regex kWorkloadNode("\\bn([0-9]+)\\b");
  std::string out;
  auto begin = std::sregex_iterator(message.begin(), message.end(), kWorkloadNode);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const size_t k = std::stoul((*it)[1].str());
    if (k >= g.nodes.size()) continue;
    out += message.substr(last, it->position() - last);
    out += absl::StrCat("'", g.nodes[k]->name(), "'");
    last = it->position() + it->length();
  }
  return out + message.substr(last);
}

}  // namespace

PrepareOptions PrepareOptionsFor(const Target& target) {
  PrepareOptions options;
  if (target.is_gpu()) {
    options.gpu = target.gpu();
    return options;
  }
  options.matmul_panel = target.cpu().FloatLanes();
  if (target.cpu().NumVectorRegisters() < 32) {
    // With 16 vector registers the conv pair's expansion block (kb channels
    // by pu vectors of pixels) spills, and the pair lost to its two convs
    // run apart, even with the expanded tensor written out as well, on
    // every MobileNet-style shape measured on Zen 3 (1 thread: 16 -> 96 on
    // 112x112 1.71 ms fused, 1.50 apart; 24 -> 144 on 56x56 0.74, 0.53;
    // Xception's 728 -> 728 on 20x20 18.0, 5.2).
    options.fusion_cost.min_conv_pair_bytes = std::numeric_limits<double>::infinity();
    // Without conv pairs, every pointwise conv can take blocked weights.
    options.blocked_pointwise = true;
  }
  return options;
}

absl::Status CheckCompilable(const PreparedModel& model, const Target& target) {
  std::vector<std::string> problems;
  std::set<std::string> checked;
  for (size_t i = 0; i < model.partition.groups.size(); ++i) {
    const FusionGroup& g = model.partition.groups[i];
    const Workload& w = model.workloads[i];
    if (g.kind == "unsupported") {
      absl::Status why;
      if (target.is_gpu()) {
        loop_ir::gpu::FindGpuLowering(*w.graph, &why);
      } else {
        loop_ir::FindLowering(*w.graph, &why);
      }
      problems.push_back(absl::StrCat("no code generator for ", NodeList(g),
                                      why.ok() ? "" : absl::StrCat(": ", InModelTerms(std::string(why.message()), g))));
      continue;
    }
    if (!checked.insert(w.key).second) continue;
    const ScheduleConfig config = DefaultSchedule(*w.graph, target);
    absl::Status lowered = target.is_gpu() ? LowerWorkload(*w.graph, config, target.gpu()).status()
                                           : LowerWorkload(*w.graph, config, target.cpu()).status();
    if (!lowered.ok()) {
      problems.push_back(absl::StrCat("group ", g.index, " [", NodeList(g), "]: ",
                                      InModelTerms(std::string(lowered.message()), g)));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("unsupported: ", absl::StrJoin(problems, "; "), " (target ",
                                                 target.Key(), ")"));
}

std::vector<ScheduleConfig> DefaultSchedules(const PreparedModel& model, const Target& target) {
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
  const Target target = options.gpu ? Target(options.gpu->target) : Target(options.target);
  ASSIGN_OR_RETURN(PreparedModel model, PrepareModel(std::move(graph), PrepareOptionsFor(target)));
  RETURN_IF_ERROR(CheckCompilable(model, target));
  return BuildPackage(model, DefaultSchedules(model, target), options);
}

}  // namespace kiln
