// GPU lowerings of workload graphs to GPU loop IR (loop_ir.h: a gpu_block
// loop of gpu_thread loops), one per kind. The kind is the CPU back end's
// (loop_ir/lower.h decides what a workload is, so a fusion group has one
// kind on every target); each GPU lowering owns its GPU schedule space:
// knobs, a deterministic enumeration, a heuristic default, validation and
// the lowering at one point. AllGpuLowerings is the registry the GPU side of
// schedule_space.h and kernel_emitter.h asks; a kind's GPU lowering lives in
// loop_ir/gpu/lower_<family>.cc.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/schedule_config.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/ir/graph.h"

namespace kiln::loop_ir::gpu {

// A change to a GPU space or to what a GPU knob means changes the kernels
// tuning records describe: bump kScheduleSpaceVersion (schedule_space.h), as
// for the CPU spaces.
struct GpuWorkloadLowering {
  std::string kind;  // the CPU lowering's kind it takes: "elementwise", "matmul", ...
  // Deterministic, non-empty for a workload of the kind.
  std::function<std::vector<ScheduleConfig>(const Graph&, const GpuTarget&)> enumerate;
  // A member of `enumerate`.
  std::function<ScheduleConfig(const Graph&, const GpuTarget&)> default_schedule;
  // Knobs in range (missing knobs take defaults); INVALID_ARGUMENT otherwise.
  std::function<absl::Status(const Graph&, const ScheduleConfig&, const GpuTarget&)> validate;
  // A GPU LoopFunc (IsGpuKernel) that passes Verify.
  std::function<absl::StatusOr<LoopFunc>(const Graph&, const ScheduleConfig&, const GpuTarget&)> lower;
};

// Every GPU lowering (each declared in loop_ir/gpu/lower_<family>.h).
const std::vector<GpuWorkloadLowering>& AllGpuLowerings();

// The GPU lowering of the workload's kind, or nullptr with the reason in
// `why` (if given): the CPU matcher's refusal when no lowering takes the
// workload, else UNIMPLEMENTED "no GPU lowering for kind K".
const GpuWorkloadLowering* FindGpuLowering(const Graph& workload, absl::Status* why = nullptr);

// ---- shared by the GPU lowerings ------------------------------------------

// What the heuristic defaults size their grids for: an H100 SXM's 132 SMs
// (an A100's 108 are filled by as many blocks), and the threads in flight
// that keep them busy (4 blocks of 128 per SM). Tuning finds the rest.
inline constexpr int64_t kDefaultGpuSms = 132;
inline constexpr int64_t kGpuFillThreads = kDefaultGpuSms * 512;
inline constexpr int64_t kWarpSize = 32;

// Threads per block the flat (one item per thread) lowerings choose from.
std::vector<int64_t> GpuBlockSizes();

// The space of a flat lowering: vw from 1 to max_vw in powers of two (none
// wider than `inner`, the row its vectors run along), every GpuBlockSizes()
// bt, and each of `unrolls` as un.
std::vector<ScheduleConfig> FlatSpace(int64_t max_vw, int64_t inner, const std::vector<int64_t>& unrolls);

// How a flat lowering spreads `items` independent work items over the grid:
// `threads` per block, each thread `unroll` items `threads` apart, so that a
// block covers threads * unroll consecutive items.
struct FlatGrid {
  int64_t items = 0;
  int64_t threads = 256;
  int64_t unroll = 1;
  int64_t blocks() const;
};

// The gpu_block loop (variable "blk") over thread loops (variable "tid")
// that give body(item) every item < grid.items, where `item` is the i64
// expression of the item's index (guarded only when the grid overhangs).
// `bodies` are laid out one after another in the same block, each with its
// own items: one launch for several outputs or Concat segments.
Stmt FlatKernel(const std::vector<std::pair<int64_t, std::function<Stmt(Expr item)>>>& bodies, int64_t threads,
                int64_t unroll);

// Knob validation shared by the lowerings: only `known` knobs; bt (threads
// per block) a multiple of 32 in [32, 1024].
absl::Status ValidateGpuKnobs(const Graph& g, const ScheduleConfig& c, const std::vector<std::string>& known);

}  // namespace kiln::loop_ir::gpu
