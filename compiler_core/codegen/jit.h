// In-process compilation of one workload kernel with LLVM ORC (LLJIT), for
// measuring candidate schedules on a worker and for tests. Each JitKernel owns
// its own LLVMContext and LLJIT, so kernels may be compiled concurrently from
// several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/ir/graph.h"

namespace kiln {

class JitKernel {
 public:
  using Fn = void (*)(void* const* args, int64_t task_begin, int64_t task_end);
  ~JitKernel();
  JitKernel(const JitKernel&) = delete;
  JitKernel& operator=(const JitKernel&) = delete;

  // args: the workload's inputs then its outputs, dense row-major float buffers.
  // Tasks [task_begin, task_end) of [0, num_tasks()); disjoint ranges may run
  // concurrently on different threads.
  void Run(void* const* args, int64_t task_begin, int64_t task_end) const {
    fn_(args, task_begin, task_end);
  }
  int64_t num_tasks() const { return num_tasks_; }
  int num_args() const { return num_args_; }
  // The optimized LLVM IR of the kernel module.
  const std::string& llvm_ir() const { return llvm_ir_; }

 private:
  friend absl::StatusOr<std::unique_ptr<JitKernel>> JitCompile(const loop_ir::LoopFunc&, const CpuTarget&);
  struct Impl;
  JitKernel() = default;
  std::unique_ptr<Impl> impl_;
  Fn fn_ = nullptr;
  int64_t num_tasks_ = 0;
  int num_args_ = 0;
  std::string llvm_ir_;
};

// The target must be the host (or a subset of its features) for the code to run.
absl::StatusOr<std::unique_ptr<JitKernel>> JitCompile(const Graph& workload,
                                                      const ScheduleConfig& config,
                                                      const CpuTarget& target);

// A CPU LoopFunc as it is (for GPU schedules emulated on the CPU:
// loop_ir/gpu_emulation.h); INVALID_ARGUMENT as loop_ir::LowerToLlvm.
absl::StatusOr<std::unique_ptr<JitKernel>> JitCompile(const loop_ir::LoopFunc& f, const CpuTarget& target);

}  // namespace kiln
