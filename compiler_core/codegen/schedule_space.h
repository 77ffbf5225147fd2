// Schedule spaces of the CPU back end: the knobs a tuner may turn for a
// workload on a target, a deterministic enumeration of the valid points, and a
// heuristic default for when nothing has been tuned.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"
#include "compiler_core/codegen/target.h"

namespace kiln {

// Bump when the meaning of a matmul config (the knobs below) changes. 2:
// elementwise DAGs left this space for the loop IR's (vw, tasks).
inline constexpr int kDirectScheduleVersion = 2;
// Mirrors loop_ir::kLoopIrScheduleVersion (compiler_core/codegen/loop_ir/lower.h, which
// static_asserts that they agree).
inline constexpr int kLoopIrSpaceVersion = 2;
// The version every tuning record is filed under and every measurement task
// carries: it changes whenever any schedule space changes, so a record of an
// older space misses instead of steering the new code generator.
inline constexpr int kScheduleSpaceVersion = kDirectScheduleVersion * 1000 + kLoopIrSpaceVersion;

// Knobs of the matmul space (the other kinds' knobs are documented with their
// lowering in compiler_core/loop_ir/lower*.h):
//   matmul:      mr     rows of the register block
//                nr     vectors (of target lanes floats) of the register block
//                ku     unroll of the reduction loop
//                mc     rows per task (rounded up to mr); 0 or missing: ~32
//                nc     columns per task (rounded up to nr * lanes); 0 or
//                       missing: all of N
//                kc     K block; 0 or missing: no K blocking, B read in
//                       place; else B is packed per task and K block into a
//                       stack buffer of kc x columns-per-task floats (at most
//                       kMaxPackedBytes)
// A missing knob takes the DefaultSchedule value (mc, nc, kc: 0).
class ScheduleConfig {
 public:
  std::map<std::string, int64_t> knobs;

  int64_t Get(const std::string& key, int64_t def) const;
  void Set(const std::string& key, int64_t value) { knobs[key] = value; }
  // "mr=4,nr=2,ku=4": keys sorted; "" for no knobs.
  std::string ToString() const;
  // Inverse of ToString. INVALID_ARGUMENT on malformed text or duplicate keys.
  static absl::StatusOr<ScheduleConfig> Parse(const std::string& text);

  bool operator==(const ScheduleConfig& o) const { return knobs == o.knobs; }
  bool operator!=(const ScheduleConfig& o) const { return knobs != o.knobs; }
  bool operator<(const ScheduleConfig& o) const { return knobs < o.knobs; }
};

// Largest stack buffer a matmul kernel packs B into.
inline constexpr int64_t kMaxPackedBytes = 256 * 1024;

struct MatMulSpec;

// How a matmul kernel is cut up for one schedule: register block, tasks over
// (batch, row block, column block), K blocking. Shared by the emitter and the
// validation of the config.
struct MatMulTiling {
  int64_t mr = 6, nr = 2, ku = 4;
  int64_t nb = 0;             // nr * lanes: columns of a register panel
  int64_t rows_per_task = 0;  // a multiple of mr
  int64_t cols_per_task = 0;  // a multiple of nb
  int64_t kc = 0;             // 0: no K blocking
  int64_t row_blocks = 0, col_blocks = 1, num_tasks = 0;
  int64_t pack_floats = 0;    // kc * min(cols_per_task, N rounded up to nb)
};
MatMulTiling TileMatMul(const MatMulSpec& spec, const ScheduleConfig& config, const CpuTarget& target);

// "matmul": one f32 MatMul/Gemm over workload inputs followed by a DAG of
// fusible elementwise operators (the epilogue), every output of the anchor's
// shape; otherwise the kind of the loop-IR lowering that takes the workload
// ("data_movement" for elementwise DAGs with or without data movement,
// "reduction", "conv", "conv_transpose", "pool", "index", "resize", "topk");
// "unsupported" when none does (operators no lowering takes, dynamic shapes,
// a malformed workload).
std::string WorkloadKind(const Graph& workload);

// True exactly when the CPU back end compiles the workload (WorkloadKind is
// not "unsupported"): the fusion partitioner asks this before it hands a
// multi-node group to codegen.
bool CanCompile(const Graph& workload);

// Every point of the workload's space, in a deterministic order; points that
// can only repeat a smaller one on this shape (a vector wider than the data, a
// register block taller than the matrix, ...) are left out. Empty for an
// unsupported workload.
std::vector<ScheduleConfig> EnumerateSchedules(const Graph& workload, const CpuTarget& target);

// Heuristic choice, always a member of EnumerateSchedules (or empty if none).
ScheduleConfig DefaultSchedule(const Graph& workload, const CpuTarget& target);

// OK when `config` can be compiled for the workload on `target` (knobs known
// and in range; it need not be a point of the enumerated space).
absl::Status ValidateSchedule(const Graph& workload, const ScheduleConfig& config,
                              const CpuTarget& target);

}  // namespace kiln
