// Helpers for the GPU code generator's tests, which run without a GPU: a
// GPU schedule is checked against the reference interpreter through its CPU
// emulation (loop_ir/gpu_emulation.h), and its PTX is assembled by ptxas
// for sm_80 and sm_90 (the ptxas the build found: KILN_PTXAS).
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/gpu_emulation.h"
#include "compiler_core/codegen/object_emitter.h"
#include "compiler_core/codegen/ptx_assembler.h"
#include "compiler_core/codegen/ptx_emitter.h"
#include "compiler_core/codegen/schedule_space.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"

namespace kiln::gpu_testing {

// The SM versions every GPU kernel is assembled for in the tests.
inline const std::vector<GpuTarget>& AssembledTargets() {
  static const std::vector<GpuTarget> targets = {GpuTarget{80}, GpuTarget{90}};
  return targets;
}

// The ptxas the build found, or nullopt with the reason in *why.
inline std::optional<PtxAssembler> TestPtxas(std::string* why) {
  const std::string path = KILN_PTXAS;
  if (path.empty()) {
    *why = "no ptxas was found at configure time (CUDA toolkit, or PyPI's nvidia-cuda-nvcc-cu12 in the venv)";
    return std::nullopt;
  }
  absl::StatusOr<PtxAssembler> a = PtxAssembler::Find(path);
  if (!a.ok()) {
    *why = std::string(a.status().message());
    return std::nullopt;
  }
  return *a;
}

// The GPU schedule `config` of `g` lowered, emulated on the CPU and JIT
// compiled for this host.
inline absl::StatusOr<std::unique_ptr<JitKernel>> CompileEmulated(const Graph& g, const ScheduleConfig& config,
                                                                 const GpuTarget& target) {
  absl::Status valid = ValidateSchedule(g, config, target);
  if (!valid.ok()) return valid;
  absl::StatusOr<loop_ir::LoopFunc> gpu = LowerWorkload(g, config, target);
  if (!gpu.ok()) return gpu.status();
  absl::StatusOr<loop_ir::LoopFunc> cpu = loop_ir::EmulateOnCpu(*gpu);
  if (!cpu.ok()) return cpu.status();
  return JitCompile(*cpu, CpuTarget::Host());
}

// The target the emulated checks lower for.
inline const GpuTarget kEmulatedTarget{90};

// Every config of `g` through the emulation against the interpreter.
inline void CheckGpuConfigsAgainstInterpreter(const Graph& g, const std::map<std::string, Tensor>& feeds,
                                              const std::vector<ScheduleConfig>& configs,
                                              codegen_testing::Tolerance tol = {}) {
  codegen_testing::CheckKernelsAgainstInterpreter(
      g, feeds, configs, [&](const ScheduleConfig& c) { return CompileEmulated(g, c, kEmulatedTarget); }, tol);
}

// Every config of `g` compiled into one PTX module per SM version and
// assembled by ptxas (skips, saying why, without one).
inline void CheckPtxAssembles(const Graph& g, const std::vector<ScheduleConfig>& configs) {
  std::string why;
  std::optional<PtxAssembler> ptxas = TestPtxas(&why);
  for (const GpuTarget& target : AssembledTargets()) {
    std::vector<KernelRequest> requests;
    for (size_t i = 0; i < configs.size(); ++i) {
      requests.push_back(KernelRequest{&g, configs[i], absl::StrCat("k", i)});
    }
    absl::StatusOr<PtxCode> code = CompileToPtx(requests, target);
    ASSERT_TRUE(code.ok()) << code.status() << "\n" << g.ToText();
    if (!ptxas) continue;
    absl::StatusOr<std::string> cubin = ptxas->Assemble(code->ptx, target);
    ASSERT_TRUE(cubin.ok()) << cubin.status() << "\n" << g.ToText();
    EXPECT_EQ(cubin->substr(0, 4), std::string("\x7f" "ELF", 4));
  }
  if (!ptxas) GTEST_SKIP() << "PTX generated but not assembled: " << why;
}

// Every point of `g`'s space for kEmulatedTarget, which holds the default:
// `g` is a workload of `kind`, each point through the emulation against the
// interpreter on `feeds` (to `tol`), and all of them assembled.
inline void CheckEveryPoint(const Graph& g, const std::string& kind, const std::map<std::string, Tensor>& feeds,
                            codegen_testing::Tolerance tol = {}) {
  ASSERT_EQ(WorkloadKind(g), kind) << g.ToText();
  std::vector<ScheduleConfig> space = EnumerateSchedules(g, kEmulatedTarget);
  ASSERT_FALSE(space.empty()) << g.ToText();
  EXPECT_NE(std::find(space.begin(), space.end(), DefaultSchedule(g, kEmulatedTarget)), space.end());
  CheckGpuConfigsAgainstInterpreter(g, feeds, space, tol);
  CheckPtxAssembles(g, space);
}

}  // namespace kiln::gpu_testing
