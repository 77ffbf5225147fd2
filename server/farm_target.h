// How the farm names CPU targets: the LLVM CPU name plus the sorted set of
// enabled features. The server's own target and a worker's self-description
// map to the same CpuTarget (and key) exactly when they would compile and run
// the same code, so records never cross between different machines.
#pragma once

#include <optional>
#include <string>

#include "compiler_core/codegen/target.h"
#include "kiln/v1/worker.pb.h"

namespace kiln::server {

// The host's target, keeping only enabled ("+") features.
CpuTarget HostFarmTarget();
// The target a CPU worker described in its registration.
CpuTarget FarmTargetOf(const kiln::v1::DeviceInfo& device);

// The key a worker's records are filed under. A CPU: FarmTargetOf(device).Key().
// A CUDA GPU: "cuda/<arch>/<device model>/<8 hex digits>", the model in
// lower case with dashes ("nvidia-h100-80gb-hbm3") and the digits a hash of
// the driver and toolkit versions: records never cross between GPU models,
// and a new driver or ptxas starts new ones (it may generate other code).
std::string FarmTargetKeyOf(const kiln::v1::DeviceInfo& device);

// The code-generation target a farm target key stands for: a "cuda/sm_XY..."
// key's GpuTarget; nullopt for another key (CPU keys resolve through the
// workers that registered them).
std::optional<GpuTarget> GpuTargetOfKey(const std::string& target_key);

// Records measured on more than one thread are filed under a key of their
// own, the target's key and "/t<threads>" ("cpu/x86_64/znver4/1a2b3c4d/t2"):
// a schedule that splits its work well across two threads is not the one
// that runs fastest on one. One thread (or fewer) is the target's key itself,
// so single-thread records keep the key they always had.
std::string RecordTargetKey(const std::string& target_key, int threads);

// The parts of a record's target key: the target's own key and the threads
// its records were measured on (1 when it has no "/t<threads>" suffix).
struct RecordTarget {
  std::string target_key;
  int threads = 1;
};
RecordTarget ParseRecordTargetKey(const std::string& record_key);

// The threads a worker may give one measurement (DeviceInfo.measure_threads;
// 0 is 1).
int MeasureThreadsOf(const kiln::v1::DeviceInfo& device);

// True when a worker of `worker_target_key` that runs up to `measure_threads`
// threads per measurement can measure tasks filed under `record_key`.
bool WorkerServes(const std::string& worker_target_key, int measure_threads, const std::string& record_key);

}  // namespace kiln::server
