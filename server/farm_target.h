// How the farm names CPU targets: the LLVM CPU name plus the sorted set of
// enabled features. The server's own target and a worker's self-description
// map to the same CpuTarget (and key) exactly when they would compile and run
// the same code, so records never cross between different machines.
#pragma once

#include "compiler_core/codegen/target.h"
#include "kiln/v1/worker.pb.h"

namespace kiln::server {

// The host's target, keeping only enabled ("+") features.
CpuTarget HostFarmTarget();
// The target a CPU worker described in its registration.
CpuTarget FarmTargetOf(const kiln::v1::DeviceInfo& device);

}  // namespace kiln::server
