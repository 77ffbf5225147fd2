// `kiln inspect`: imports and optimises a model, partitions it into fusion
// groups and prints the optimised graph, every group (kind, ops, inputs,
// outputs, workload key, estimated bytes, schedule space size and default)
// and the totals; --json for tools, --dot for Graphviz with one cluster per
// group. Given a package (.kpkg), it prints the package's manifest instead:
// target (for a CUDA package its SM, PTX and cubin, device plan and every
// step's launch), tensors, sections, and every group's schedule with the
// tuning records it came from.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/exit_codes.h"
#include "client/commands.h"
#include "client/json_output.h"
#include "client/onnx_model_file.h"
#include "client/tuning_report_view.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/object_emitter.h"
#include "compiler_core/codegen/ptx_emitter.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/package/manifest_reader.h"

namespace kiln::client {
namespace {

std::string DotId(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Megabytes(double bytes) { return absl::StrFormat("%.2f MB", bytes / 1e6); }

absl::StatusOr<PreparedModel> Inspect(const InspectOptions& o) {
  auto bytes = ReadOnnxModelFile(o.model);
  if (!bytes.ok()) return bytes.status();
  ModelSource source;
  source.onnx_model = std::move(*bytes);
  for (const std::string& flag : o.shapes) {
    std::string name;
    std::vector<int64_t> dims;
    if (absl::Status s = ParseShapeFlag(flag, &name, &dims); !s.ok()) return s;
    source.input_shapes[name] = dims;
  }
  auto graph = ImportModel(source);
  if (!graph.ok()) return graph.status();
  absl::StatusOr<Target> target = Target::Named(o.target);
  if (!target.ok()) return absl::InvalidArgumentError(absl::StrCat("--target: ", target.status().message()));
  PrepareOptions options = PrepareOptionsFor(*target);
  options.passes.dump_after = std::set<std::string>(o.dump_after.begin(), o.dump_after.end());
  options.passes.dump = [](const std::string& pass, const std::string& text) {
    std::fprintf(stderr, "// after %s\n%s", pass.c_str(), text.c_str());
  };
  auto model = PrepareModel(std::move(*graph), options);
  if (!model.ok()) return model.status();
  if (o.pass_timing) {
    for (const PassRecord& r : model->passes) {
      std::fprintf(stderr, "pass %-24s %8.3f ms%s\n", r.name.c_str(), r.milliseconds, r.changed ? "  changed" : "");
    }
  }
  return model;
}

std::vector<std::string> Names(const std::vector<Value*>& values) {
  std::vector<std::string> out;
  for (const Value* v : values) out.push_back(v->name());
  return out;
}

std::string Dot(const PreparedModel& in) {
  std::string s = "digraph kiln {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n";
  std::map<const Value*, std::string> writer;  // value -> DOT id of the node that writes it
  for (const Value* v : in.graph->inputs()) {
    std::string id = DotId(absl::StrCat("input:", v->name()));
    absl::StrAppend(&s, "  ", id, " [shape=ellipse, label=", DotId(absl::StrCat(v->name(), "\n", v->type().ToString())),
                    "];\n");
    writer[v] = id;
  }
  // A Concat placed in place has no node: its readers' edges come from the
  // writers of the values stored in it (Partition::views).
  std::map<const Value*, std::vector<const Value*>> parts;
  for (const ValueView& v : in.partition.views) parts[v.into].push_back(v.value);
  std::function<void(const Value*, const std::string&, std::string*)> edges_from_parts =
      [&](const Value* v, const std::string& to, std::string* out) {
        auto it = parts.find(v);
        if (it == parts.end()) return;
        for (const Value* part : it->second) {
          auto wt = writer.find(part);
          if (wt != writer.end()) {
            absl::StrAppend(out, "  ", wt->second, " -> ", to, ";\n");
          } else {
            edges_from_parts(part, to, out);
          }
        }
      };
  std::string edges;
  for (size_t gi = 0; gi < in.partition.groups.size(); ++gi) {
    const FusionGroup& g = in.partition.groups[gi];
    const Workload& w = in.workloads[gi];
    absl::StrAppend(&s, "  subgraph cluster_", g.index, " {\n    label=",
                    DotId(absl::StrCat("group ", g.index, " ", g.kind, " ", w.key.substr(0, 12), "\n",
                                       Megabytes(g.bytes_fused))),
                    ";\n    style=rounded;\n");
    std::map<const Value*, std::string> local;
    for (const Node* n : g.nodes) {
      std::string id = DotId(absl::StrCat("g", g.index, ":", n->name()));
      absl::StrAppend(&s, "    ", id, " [label=", DotId(absl::StrCat(n->op_type(), "\n", n->name())), "];\n");
      for (const Value* v : n->inputs()) {
        if (!v || v->is_constant()) continue;
        auto it = local.find(v);
        const std::string* from = it != local.end() ? &it->second : nullptr;
        if (!from) {
          auto wt = writer.find(v);
          if (wt != writer.end()) from = &wt->second;
        }
        if (from) {
          absl::StrAppend(&edges, "  ", *from, " -> ", id, ";\n");
        } else if (parts.count(v)) {
          edges_from_parts(v, id, &edges);
        }
      }
      for (const Value* v : n->outputs()) local[v] = id;
    }
    for (const Value* v : g.outputs) writer[v] = local[v];
    s += "  }\n";
  }
  s += edges;
  for (const Value* v : in.graph->outputs()) {
    std::string id = DotId(absl::StrCat("output:", v->name()));
    absl::StrAppend(&s, "  ", id, " [shape=ellipse, label=", DotId(v->name()), "];\n");
    if (writer.count(v)) absl::StrAppend(&s, "  ", writer[v], " -> ", id, ";\n");
  }
  return s + "}\n";
}

// The --target the model was prepared for (Inspect checked it parses).
Target InspectTarget(const InspectOptions& o) { return *Target::Named(o.target); }

std::string Json(const PreparedModel& in, const Target& target) {
  std::string s = "{\n";
  absl::StrAppend(&s, "  \"nodes_before\": ", in.imported_nodes, ",\n");
  absl::StrAppend(&s, "  \"nodes_after\": ", in.graph->nodes().size(), ",\n");
  absl::StrAppend(&s, "  \"num_groups\": ", in.partition.groups.size(), ",\n");
  absl::StrAppend(&s, "  \"distinct_workloads\": ", in.distinct_workloads, ",\n");
  absl::StrAppend(&s, "  \"bytes_fused\": ", absl::StrFormat("%.0f", in.partition.bytes_fused), ",\n");
  absl::StrAppend(&s, "  \"bytes_unfused\": ", absl::StrFormat("%.0f", in.partition.bytes_unfused), ",\n");
  absl::StrAppend(&s, "  \"graph\": ", JsonString(in.graph->ToText()), ",\n");
  s += "  \"groups\": [";
  for (size_t gi = 0; gi < in.partition.groups.size(); ++gi) {
    const FusionGroup& g = in.partition.groups[gi];
    std::vector<std::string> ops, nodes, ins, outs, rec;
    for (const Node* n : g.nodes) {
      ops.push_back(JsonString(n->op_type()));
      nodes.push_back(JsonString(n->name()));
    }
    for (const std::string& n : Names(g.inputs)) ins.push_back(JsonString(n));
    for (const std::string& n : Names(g.outputs)) outs.push_back(JsonString(n));
    for (const Node* n : g.recomputed) rec.push_back(JsonString(n->name()));
    absl::StrAppend(&s, gi ? "," : "", "\n    {\"index\": ", g.index, ", \"kind\": ", JsonString(g.kind),
                    ", \"ops\": [", absl::StrJoin(ops, ", "), "], \"nodes\": [", absl::StrJoin(nodes, ", "),
                    "], \"inputs\": [", absl::StrJoin(ins, ", "), "], \"outputs\": [", absl::StrJoin(outs, ", "),
                    "], \"recomputed\": [", absl::StrJoin(rec, ", "), "], \"workload_key\": ",
                    JsonString(in.workloads[gi].key), ", \"bytes_fused\": ",
                    absl::StrFormat("%.0f", g.bytes_fused), ", \"bytes_unfused\": ",
                    absl::StrFormat("%.0f", g.bytes_unfused), ", \"schedules\": ",
                    EnumerateSchedules(*in.workloads[gi].graph, target).size(),
                    ", \"default_schedule\": ",
                    JsonString(DefaultSchedule(*in.workloads[gi].graph, target).ToString()), "}");
  }
  s += "\n  ],\n  \"views\": [";
  for (size_t i = 0; i < in.partition.views.size(); ++i) {
    const ValueView& v = in.partition.views[i];
    absl::StrAppend(&s, i ? "," : "", "\n    {\"value\": ", JsonString(v.value->name()), ", \"into\": ",
                    JsonString(v.into->name()), ", \"offset\": ", v.offset, "}");
  }
  s += "\n  ]\n}\n";
  return s;
}

std::string Text(const PreparedModel& in, const Target& target) {
  std::string s = "optimised graph:\n";
  s += in.graph->ToText();
  s += "\nfusion groups:\n";
  for (size_t gi = 0; gi < in.partition.groups.size(); ++gi) {
    const FusionGroup& g = in.partition.groups[gi];
    std::vector<std::string> ops;
    for (const Node* n : g.nodes) ops.push_back(absl::StrCat(n->name(), ":", n->op_type()));
    absl::StrAppend(&s, "  group ", g.index, " ", g.kind, " [", absl::StrJoin(ops, ", "), "]\n");
    absl::StrAppend(&s, "    inputs:  ", absl::StrJoin(Names(g.inputs), ", "), "\n");
    absl::StrAppend(&s, "    outputs: ", absl::StrJoin(Names(g.outputs), ", "), "\n");
    if (!g.recomputed.empty()) {
      std::vector<std::string> rec;
      for (const Node* n : g.recomputed) rec.push_back(n->name());
      absl::StrAppend(&s, "    recomputes: ", absl::StrJoin(rec, ", "), "\n");
    }
    absl::StrAppend(&s, "    workload: ", in.workloads[gi].key, "  bytes: ", Megabytes(g.bytes_fused),
                    " (unfused ", Megabytes(g.bytes_unfused), ")\n");
    const Graph& wg = *in.workloads[gi].graph;
    absl::StrAppend(&s, "    schedules: ", EnumerateSchedules(wg, target).size(), ", default ",
                    DefaultSchedule(wg, target).ToString(), "\n");
  }
  if (!in.partition.views.empty()) {
    s += "\nwritten in place (Concats that need no kernel):\n";
    for (const ValueView& v : in.partition.views) {
      absl::StrAppend(&s, "  ", v.value->name(), " in ", v.into->name(), " at byte ", v.offset, "\n");
    }
  }
  double saved = in.partition.bytes_unfused > 0 ? 100.0 * (1.0 - in.partition.bytes_fused / in.partition.bytes_unfused) : 0;
  s += "\nsummary:\n";
  absl::StrAppend(&s, "  nodes:              ", in.imported_nodes, " before optimisation, ", in.graph->nodes().size(),
                  " after\n");
  absl::StrAppend(&s, "  groups (kernels):   ", in.partition.groups.size(), "\n");
  absl::StrAppend(&s, "  distinct workloads: ", in.distinct_workloads, "\n");
  absl::StrAppend(&s, "  target:             ", target.Key(), "\n");
  if (absl::Status compilable = CheckCompilable(in, target); !compilable.ok()) {
    absl::StrAppend(&s, "  code generation:    ", compilable.message(), "\n");
  }
  absl::StrAppend(&s, "  memory traffic:     ", Megabytes(in.partition.bytes_fused), " fused, ",
                  Megabytes(in.partition.bytes_unfused), " unfused (", absl::StrFormat("%.1f", saved), "% saved)\n");
  return s;
}

// --group N: the group's workload graph, the schedule (the default, or
// --schedule) and the loop IR it lowers to; --llvm-ir adds the kernel's
// optimized LLVM IR for this machine, --asm its assembly (inner loops
// counted: CountInnerLoops).
absl::StatusOr<std::string> GroupText(const PreparedModel& in, const InspectOptions& o) {
  const int n = static_cast<int>(in.partition.groups.size());
  if (o.group >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("--group ", o.group, ": the model has ", n, " groups (0 to ", n - 1, ")"));
  }
  const FusionGroup& g = in.partition.groups[o.group];
  const Graph& wg = *in.workloads[o.group].graph;
  const Target target = InspectTarget(o);
  if (o.ptx && !target.is_gpu()) return absl::InvalidArgumentError("--ptx needs a GPU --target (cuda:sm_XY)");
  if ((o.llvm_ir || o.assembly) && target.is_gpu()) {
    return absl::InvalidArgumentError(absl::StrCat(o.llvm_ir ? "--llvm-ir" : "--asm",
                                                   " is for CPU targets; a GPU kernel's code is its --ptx"));
  }
  ScheduleConfig config = DefaultSchedule(wg, target);
  if (!o.schedule.empty()) {
    auto parsed = ScheduleConfig::Parse(o.schedule);
    if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("--schedule: ", parsed.status().message()));
    config = *parsed;
  }
  auto lowered = LowerWorkload(wg, config, target);
  if (!lowered.ok()) {
    return absl::Status(lowered.status().code(), absl::StrCat("group ", o.group, " at schedule '", config.ToString(),
                                                              "': ", lowered.status().message()));
  }
  std::string s = absl::StrCat("group ", g.index, " ", g.kind, ", workload ", in.workloads[o.group].key, "\n");
  absl::StrAppend(&s, "\nworkload graph:\n", wg.ToText());
  absl::StrAppend(&s, "\nschedule: ", config.ToString(), o.schedule.empty() ? " (default)" : "", " of ",
                  EnumerateSchedules(wg, target).size(), "\n\nloop IR:\n", loop_ir::Print(*lowered));
  if (target.is_gpu()) {
    const loop_ir::GpuLaunch launch = loop_ir::GpuLaunchOf(*lowered);
    absl::StrAppend(&s, "\nlaunch: ", launch.blocks, " blocks of ", launch.threads, " threads, ", launch.shared_bytes,
                    " bytes of shared memory\n");
  }
  if (o.llvm_ir) {
    auto kernel = JitCompile(wg, config, target.cpu());
    if (!kernel.ok()) return kernel.status();
    absl::StrAppend(&s, "\noptimized LLVM IR (", target.cpu().cpu, "):\n", (*kernel)->llvm_ir());
  }
  if (o.assembly) {
    auto text = CompileToAssembly({KernelRequest{&wg, config, absl::StrCat("group_", g.index)}}, target.cpu());
    if (!text.ok()) return text.status();
    const InnerLoopCounts c = CountInnerLoops(*text);
    absl::StrAppend(&s, "\nassembly (", target.cpu().cpu, "): ", c.loops, " innermost loops with ", c.multiply_adds,
                    " vector multiply-adds, ", c.spills, " spills and ", c.reloads, " reloads\n", *text);
  }
  if (o.ptx) {
    auto ptx = LoopFuncToPtx(*lowered, target.gpu());
    if (!ptx.ok()) return ptx.status();
    absl::StrAppend(&s, "\nPTX (", target.gpu().Arch(), "):\n", *ptx);
  }
  return s;
}

std::string TensorText(const kiln::v1::PackageTensor& t) {
  return absl::StrCat(t.name(), " ", absl::AsciiStrToLower(kiln::v1::DataType_Name(t.dtype())), "[",
                      absl::StrJoin(t.dims(), ","), "]");
}

std::string Kilobytes(int64_t bytes) { return absl::StrFormat("%.1f KB", bytes / 1e3); }

// Where a group's schedule came from, in words.
std::string ProvenanceText(const kiln::v1::PackageGroup& g) {
  if (!g.has_provenance()) return "not recorded (built without a tuning database)";
  const kiln::v1::ScheduleProvenance& p = g.provenance();
  if (p.source() != kiln::v1::ScheduleProvenance::RECORDS) {
    return absl::StrCat("the default schedule: no valid record on ", p.record_target(), " (space ", p.space_version(),
                        ")");
  }
  return absl::StrCat(p.record_keys_size(), p.record_keys_size() == 1 ? " record" : " records", " on ",
                      p.record_target(), " (space ", p.space_version(), "), mean ", FormatLatency(p.mean_ms()),
                      ", fastest of ", p.schedules_ranked(), p.schedules_ranked() == 1 ? " schedule" : " schedules",
                      " measured");
}

// A CUDA package's device, sections and device plan (the lines that replace
// a CPU package's target and sections).
std::string CudaText(const kiln::v1::PackageManifest& m) {
  const kiln::v1::PackageCuda& c = m.cuda();
  std::string s;
  absl::StrAppend(&s, "  device    CUDA sm_", c.sm(), " (host ", m.target_triple(), "), tuned for ",
                  std::max(1, m.tuned_threads()), m.tuned_threads() > 1 ? " threads" : " thread", "\n");
  absl::StrAppend(&s, "  model     ", m.model_name().empty() ? "(unnamed)" : m.model_name(), "\n");
  for (const auto& t : m.inputs()) absl::StrAppend(&s, "  input     ", TensorText(t), "\n");
  for (const auto& t : m.outputs()) absl::StrAppend(&s, "  output    ", TensorText(t), "\n");
  absl::StrAppend(&s, "  sections  PTX ", Kilobytes(c.ptx_size()), ", cubin ",
                  c.cubin_size() > 0 ? absl::StrCat(Kilobytes(c.cubin_size()), " for sm_", c.sm(), " (",
                                                    c.ptxas_version(), ")")
                                     : absl::StrCat("none: ", c.cubin_missing()),
                  ", weights ", Kilobytes(m.weights_size()), "\n");
  absl::StrAppend(&s, "  memory    device arena ", Kilobytes(c.arena_bytes()), " (inputs, outputs, scratch), every buffer ",
                  c.buffer_alignment(), "-byte aligned; ", m.buffers_size(), " buffers, ", m.steps_size(),
                  " steps\n");
  return s;
}

std::string LaunchText(const kiln::v1::PackageStep& step) {
  const kiln::v1::PackageLaunch& l = step.launch();
  return absl::StrCat(step.symbol(), ": ", l.blocks(), l.blocks() == 1 ? " block" : " blocks", " x ", l.threads(),
                      " threads, ", l.shared_bytes(), " B shared, args [", absl::StrJoin(step.args(), ", "), "]");
}

std::string PackageText(const std::string& path, const PackageInfo& info) {
  const kiln::v1::PackageManifest& m = info.manifest;
  const bool cuda = m.device() == kiln::v1::DEVICE_CUDA;
  std::string s = absl::StrCat("package ", path, "\n");
  absl::StrAppend(&s, "  digest    ", info.digest, "\n");
  absl::StrAppend(&s, "  size      ", info.size, " bytes, checksum ok\n");
  absl::StrAppend(&s, "  format    ", m.format_version(), ", compiled by ", m.compiler_version(), "\n");
  if (cuda) {
    s += CudaText(m);
  } else {
    absl::StrAppend(&s, "  target    ", m.target_triple(), ", cpu ", m.target_cpu(),
                    m.isa_level().empty() ? "" : absl::StrCat(", ISA level ", m.isa_level()), ", tuned for ",
                    std::max(1, m.tuned_threads()), m.tuned_threads() > 1 ? " threads" : " thread", "\n");
    absl::StrAppend(&s, "  model     ", m.model_name().empty() ? "(unnamed)" : m.model_name(), "\n");
    for (const auto& t : m.inputs()) absl::StrAppend(&s, "  input     ", TensorText(t), "\n");
    for (const auto& t : m.outputs()) absl::StrAppend(&s, "  output    ", TensorText(t), "\n");
    absl::StrAppend(&s, "  sections  code ", Kilobytes(m.code_size()), ", weights ", Kilobytes(m.weights_size()),
                    ", arena ", Kilobytes(m.arena_bytes()), "; ", m.buffers_size(), " buffers, ", m.steps_size(),
                    " steps\n");
  }
  int from_records = 0;
  for (const auto& g : m.groups()) {
    from_records += g.provenance().source() == kiln::v1::ScheduleProvenance::RECORDS ? 1 : 0;
  }
  absl::StrAppend(&s, "\ngroups: ", m.groups_size(), " (", from_records, " with schedules from tuning records)\n");
  for (int i = 0; i < m.groups_size(); ++i) {
    const kiln::v1::PackageGroup& g = m.groups(i);
    absl::StrAppend(&s, "  group ", i, " ", g.kind(), " [", absl::StrJoin(g.nodes(), ", "), "]\n");
    absl::StrAppend(&s, "    workload  ", g.workload_key(), "\n");
    absl::StrAppend(&s, "    schedule  ", g.schedule_config(), "\n");
    absl::StrAppend(&s, "    from      ", ProvenanceText(g), "\n");
    for (const std::string& key : g.provenance().record_keys()) absl::StrAppend(&s, "    record    ", key, "\n");
    if (!cuda) continue;
    for (const kiln::v1::PackageStep& step : m.steps()) {
      if (step.group() == i) absl::StrAppend(&s, "    launch    ", LaunchText(step), "\n");
    }
  }
  return s;
}

// Whether the file at `path` starts with the package magic (false when it
// cannot be read: the ONNX path reports that).
bool StartsLikePackage(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char head[16] = {};
  f.read(head, sizeof(head));
  return LooksLikePackage(std::string_view(head, static_cast<size_t>(f.gcount())));
}

int InspectPackage(const InspectOptions& o, const std::string& bytes) {
  if (!o.shapes.empty() || !o.dot.empty() || !o.dump_after.empty() || o.pass_timing || o.group >= 0) {
    std::fprintf(stderr,
                 "kiln inspect: %s is a package: --shape, --dot, --dump-after, --pass-timing and --group "
                 "apply to ONNX models only\n",
                 o.model.c_str());
    return kExitUsage;
  }
  auto info = ReadPackageInfo(bytes);
  if (!info.ok()) {
    return ReportError("inspect", absl::Status(info.status().code(),
                                               absl::StrCat("package '", o.model, "': ", info.status().message())));
  }
  std::string out = o.json ? JsonObject()
                                     .Add("path", o.model)
                                     .Add("digest", info->digest)
                                     .Add("size", info->size)
                                     .AddRaw("manifest", ProtoToJson(info->manifest))
                                     .str() +
                                 "\n"
                           : PackageText(o.model, *info);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

int RunInspect(const InspectOptions& o) {
  // A package is told by its magic; anything else is read as ONNX.
  if (StartsLikePackage(o.model)) {
    auto bytes = ReadFile(o.model);
    if (!bytes.ok()) return ReportError("inspect", bytes.status());
    return InspectPackage(o, *bytes);
  }
  auto in = Inspect(o);
  if (!in.ok()) return ReportError("inspect", in.status());
  if (!o.dot.empty()) {
    if (absl::Status s = WriteFileAtomic(o.dot, Dot(*in)); !s.ok()) return ReportError("inspect", s);
  }
  if (o.group >= 0) {
    auto text = GroupText(*in, o);
    if (!text.ok()) return ReportError("inspect", text.status());
    std::fwrite(text->data(), 1, text->size(), stdout);
    return 0;
  }
  std::string out = o.json ? Json(*in, InspectTarget(o)) : Text(*in, InspectTarget(o));
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace kiln::client
