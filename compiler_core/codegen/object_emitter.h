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

// The same module as CompileToObject, as the target's assembly text: LLVM's
// verbose listing, which names each loop's nesting ("Inner Loop Header") and
// every register spill and reload, so that a kernel's register pressure can
// be read without timing it (`kiln inspect --group N --asm`).
absl::StatusOr<std::string> CompileToAssembly(const std::vector<KernelRequest>& kernels, const CpuTarget& target);

// What the innermost loops of an assembly listing do: the loops, their vector
// multiply-adds, and the spills and reloads among their instructions (a
// reload folded into an instruction counts as a reload). A loop's code is
// every block LLVM's comments place in it: the block it marks as an inner
// loop's header and those "in Loop: Header=" that block (a body behind a
// header that only tests the bound, a latch).
struct InnerLoopCounts {
  int loops = 0;
  int multiply_adds = 0;
  int spills = 0;
  int reloads = 0;
};
InnerLoopCounts CountInnerLoops(const std::string& assembly);

}  // namespace kiln
