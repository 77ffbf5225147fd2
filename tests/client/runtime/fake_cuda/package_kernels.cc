// A CUDA package's kernels as CPU emulations (see package_kernels.h).
#include "tests/client/runtime/fake_cuda/package_kernels.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/gpu_emulation.h"
#include "compiler_core/codegen/schedule_config.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/package/manifest_reader.h"

namespace kiln::testing {
namespace {

// `w` at the configuration `config_text`, lowered for `target` and emulated.
absl::StatusOr<EmulatedKernel> Emulate(const Workload& w, const std::string& config_text, const GpuTarget& target) {
  ASSIGN_OR_RETURN(ScheduleConfig config, ScheduleConfig::Parse(config_text));
  ASSIGN_OR_RETURN(loop_ir::LoopFunc gpu, LowerWorkload(*w.graph, config, target));
  ASSIGN_OR_RETURN(loop_ir::LoopFunc cpu, loop_ir::EmulateOnCpu(gpu));
  ASSIGN_OR_RETURN(std::unique_ptr<JitKernel> jit, JitCompile(cpu, CpuTarget::Host()));
  EmulatedKernel k{"", std::shared_ptr<const JitKernel>(std::move(jit)), loop_ir::GpuLaunchOf(gpu), {}};
  auto bytes_of = [](const Value* v) { return NumElements(v->type().StaticDims()) * DTypeSize(v->type().dtype); };
  for (const Value* v : w.graph->inputs()) k.arg_bytes.push_back(bytes_of(v));
  for (const Value* v : w.graph->outputs()) k.arg_bytes.push_back(bytes_of(v));
  return k;
}

}  // namespace

absl::StatusOr<std::vector<EmulatedKernel>> EmulatePackageKernels(std::string_view package,
                                                                  const std::vector<Workload>& workloads) {
  ASSIGN_OR_RETURN(PackageInfo info, ReadPackageInfo(package));
  const kiln::v1::PackageManifest& m = info.manifest;
  if (!m.has_cuda()) return absl::InvalidArgumentError("EmulatePackageKernels: not a CUDA package");
  if (m.groups_size() != static_cast<int>(workloads.size())) {
    return absl::InvalidArgumentError(absl::StrCat("EmulatePackageKernels: the package has ", m.groups_size(),
                                                   " groups, given ", workloads.size(), " workloads"));
  }
  const GpuTarget target{m.cuda().sm()};
  // (workload key, configuration) -> the emulation and launch made for it.
  std::map<std::pair<std::string, std::string>, EmulatedKernel> made;
  std::vector<EmulatedKernel> kernels;
  for (const kiln::v1::PackageStep& step : m.steps()) {
    const int gi = step.group();
    if (gi < 0 || gi >= m.groups_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("EmulatePackageKernels: step ", step.symbol(), " names group ", gi));
    }
    const kiln::v1::PackageGroup& group = m.groups(gi);
    const Workload& w = workloads[static_cast<size_t>(gi)];
    if (group.workload_key() != w.key) {
      return absl::InvalidArgumentError(absl::StrCat("EmulatePackageKernels: group ", gi, " is workload ",
                                                     group.workload_key(), ", given ", w.key));
    }
    auto key = std::make_pair(w.key, group.schedule_config());
    auto it = made.find(key);
    if (it == made.end()) {
      absl::StatusOr<EmulatedKernel> k = Emulate(w, group.schedule_config(), target);
      if (!k.ok()) return absl::Status(k.status().code(), absl::StrCat(step.symbol(), ": ", k.status().message()));
      it = made.emplace(key, std::move(*k)).first;
    }
    EmulatedKernel k = it->second;
    k.symbol = step.symbol();
    kernels.push_back(std::move(k));
  }
  return kernels;
}

void RegisterKernels(FakeCudaDriver& fake, const std::vector<EmulatedKernel>& kernels) {
  for (const EmulatedKernel& k : kernels) fake.AddKernel(k.symbol, k.emulation, k.launch, k.arg_bytes);
}

}  // namespace kiln::testing
