// The package writer: generates code for every fusion group with its chosen
// schedule, plans buffers, and writes the self-contained .kpkg file whose
// layout proto/kiln/v1/package_layout.h fixes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/fusion/partitioner.h"
#include "compiler_core/fusion/workload.h"
#include "compiler_core/ir/graph.h"
#include "kiln/v1/package.pb.h"

namespace kiln {

// A package for a CUDA GPU: kernels as PTX (kept for newer GPUs, which the
// driver JITs it for) and a cubin for target's SM assembled by ptxas.
struct GpuPackageOptions {
  GpuTarget target;
  // The ptxas to assemble with (PtxAssembler::Find: empty looks on the PATH
  // and in /usr/local/cuda). Without one the package carries PTX only; one
  // named here that is not an executable file is an error (NOT_FOUND).
  std::string ptxas;
  // false: PTX only, even where there is a ptxas (the driver JIT-compiles
  // the PTX when the package loads).
  bool cubin = true;
};

struct PackageOptions {
  std::string model_name;
  CpuTarget target;  // the CPU the package runs on (a GPU package: its host side)
  // Set: a GPU package for this GPU; unset: a CPU package for `target`.
  std::optional<GpuPackageOptions> gpu;
  int tuned_threads = 1;  // PackageManifest.tuned_threads
  // PackageGroup.provenance of group i; empty: none recorded (a package built
  // without a tuning database).
  std::vector<kiln::v1::ScheduleProvenance> provenance;
};

struct PackageBytes {
  std::string bytes;
  std::string digest;     // "sha256:<hex>" of bytes
  std::string llvm_ir;    // the module's IR, for --dump
};

// `workloads[i]` and `configs[i]` belong to `partition.groups[i]`. Same inputs
// give the same bytes.
absl::StatusOr<PackageBytes> WritePackage(const Graph& graph, const Partition& partition,
                                          const std::vector<Workload>& workloads,
                                          const std::vector<ScheduleConfig>& configs,
                                          const PackageOptions& options);

}  // namespace kiln
