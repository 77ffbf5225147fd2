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
#include "compiler_core/graph.h"
#include "compiler_core/target.h"

namespace kiln {

// Bump when the meaning of a config changes: tuning records of an older version
// must miss.
inline constexpr int kScheduleSpaceVersion = 1;

// Knobs, by kind of workload:
//   elementwise: vw     floats per vector (1 = scalar code), <= target lanes
//                unroll vectors (or scalars) per loop iteration
//                chunk  output elements per task
//   matmul:      mr     rows of the register block
//                nr     vectors (of target lanes floats) of the register block
//                ku     unroll of the reduction loop
// A missing knob takes the DefaultSchedule value.
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

// "elementwise": a DAG of fusible elementwise operators (Add, Sub, Mul, Div,
// Max, Min, Relu, Sigmoid, Neg, Abs, Sqrt, Exp, Tanh, Erf, Reciprocal, Clip,
// LeakyRelu, HardSigmoid, HardSwish, Gelu) whose outputs all have one shape;
// "matmul": one MatMul/Gemm over workload inputs followed by such a DAG (the
// epilogue), every output of the anchor's shape; "unsupported" otherwise
// (other operators, non-f32 or dynamic shapes, a malformed workload).
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
