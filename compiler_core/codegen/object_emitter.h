// Ahead-of-time compilation of workload kernels into one ELF64 relocatable
// x86-64 object for packages. The object references no external symbols except
// memcpy/memset/memmove, has no TLS, static constructors or EH tables; kernel
// symbols are global/default visibility, everything else local. Same input,
// same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/ir/graph.h"

namespace kiln {

struct KernelRequest {
  const Graph* workload = nullptr;
  ScheduleConfig config;
  std::string symbol;  // C identifier, unique within the request list
};

struct KernelInfo {
  std::string symbol;
  int64_t num_tasks = 0;
  int num_args = 0;  // workload inputs + outputs
};

struct ObjectCode {
  std::string elf;                  // the object file's bytes
  std::vector<KernelInfo> kernels;  // in request order
  std::string llvm_ir;              // optimized IR of the whole module
};

absl::StatusOr<ObjectCode> CompileToObject(const std::vector<KernelRequest>& kernels,
                                           const CpuTarget& target);

}  // namespace kiln
