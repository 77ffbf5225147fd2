// Schedule spaces: each question goes to the lowering that takes the workload.
#include "compiler_core/codegen/schedule_space.h"

#include "compiler_core/codegen/loop_ir/gpu/lower.h"
#include "compiler_core/codegen/loop_ir/lower.h"

namespace kiln {

std::optional<std::string> LoweringKind(const Graph& workload) {
  const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(workload);
  if (l == nullptr) return std::nullopt;
  return l->kind;
}

std::string WorkloadKind(const Graph& workload) { return LoweringKind(workload).value_or("unsupported"); }

bool CanCompile(const Graph& workload) { return loop_ir::FindLowering(workload) != nullptr; }

std::vector<ScheduleConfig> EnumerateSchedules(const Graph& workload, const CpuTarget& target) {
  const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(workload);
  return l != nullptr ? l->enumerate(workload, target) : std::vector<ScheduleConfig>{};
}

ScheduleConfig DefaultSchedule(const Graph& workload, const CpuTarget& target) {
  const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(workload);
  return l != nullptr ? l->default_schedule(workload, target) : ScheduleConfig{};
}

absl::Status ValidateSchedule(const Graph& workload, const ScheduleConfig& config, const CpuTarget& target) {
  absl::Status why;
  const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(workload, &why);
  if (l == nullptr) return why;
  return l->validate(workload, config, target);
}

bool CanCompile(const Graph& workload, const GpuTarget& target) {
  const loop_ir::gpu::GpuWorkloadLowering* l = loop_ir::gpu::FindGpuLowering(workload);
  return l != nullptr && !l->enumerate(workload, target).empty();
}

std::vector<ScheduleConfig> EnumerateSchedules(const Graph& workload, const GpuTarget& target) {
  const loop_ir::gpu::GpuWorkloadLowering* l = loop_ir::gpu::FindGpuLowering(workload);
  return l != nullptr ? l->enumerate(workload, target) : std::vector<ScheduleConfig>{};
}

ScheduleConfig DefaultSchedule(const Graph& workload, const GpuTarget& target) {
  const loop_ir::gpu::GpuWorkloadLowering* l = loop_ir::gpu::FindGpuLowering(workload);
  return l != nullptr ? l->default_schedule(workload, target) : ScheduleConfig{};
}

absl::Status ValidateSchedule(const Graph& workload, const ScheduleConfig& config, const GpuTarget& target) {
  absl::Status why;
  const loop_ir::gpu::GpuWorkloadLowering* l = loop_ir::gpu::FindGpuLowering(workload, &why);
  if (l == nullptr) return why;
  return l->validate(workload, config, target);
}

bool CanCompile(const Graph& workload, const Target& target) {
  return target.is_gpu() ? CanCompile(workload, target.gpu()) : CanCompile(workload);
}

std::vector<ScheduleConfig> EnumerateSchedules(const Graph& workload, const Target& target) {
  return target.is_gpu() ? EnumerateSchedules(workload, target.gpu()) : EnumerateSchedules(workload, target.cpu());
}

ScheduleConfig DefaultSchedule(const Graph& workload, const Target& target) {
  return target.is_gpu() ? DefaultSchedule(workload, target.gpu()) : DefaultSchedule(workload, target.cpu());
}

absl::Status ValidateSchedule(const Graph& workload, const ScheduleConfig& config, const Target& target) {
  return target.is_gpu() ? ValidateSchedule(workload, config, target.gpu())
                         : ValidateSchedule(workload, config, target.cpu());
}

}  // namespace kiln
