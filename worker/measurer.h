// Measurement of one candidate kernel on this CPU: build it with the JIT, check
// its numbers against the reference interpreter, then time it with a sound
// protocol (warm-up, repeats scaled to a minimum measured time, optional cache
// flush between runs, median and spread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/schedule_config.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/ir/graph.h"
#include "compiler_core/ir/tensor.h"
#include "kiln/v1/worker.pb.h"
#include "worker/reference_cache.h"

namespace kiln::worker {

// Effective measurement options: the task's, with zero fields replaced by the
// defaults below (proto3 cannot tell "unset" from 0).
struct MeasureSettings {
  int warmup_runs = 2;
  int min_repeats = 5;
  double min_time_ms = 20.0;
  double rtol = 1e-4;
  double atol = 1e-5;
  bool flush_cache = false;
  // Caps that keep a tiny kernel from looping for long once min_repeats is met:
  // at most max_repeats runs, and no new run after max_total_ms of wall time
  // (cache flushes included) since the first timed run.
  int max_repeats = 1000;
  double max_total_ms = 1'000.0;

  static MeasureSettings FromProto(const kiln::v1::MeasureOptions& options);
};

// The q-quantile (0..1) of `sorted` (ascending, non-empty), interpolated
// linearly between the closest ranks.
double Percentile(const std::vector<double>& sorted, double q);

// A result carrying only `error` and its message, for task `task_id`.
kiln::v1::MeasureResult FailedMeasurement(const std::string& task_id, kiln::v1::MeasureError error,
                                          std::string message);

// What a measurement starts from, on any device: the workload, the
// candidate's schedule, deterministic inputs (MakeMeasureInputs) and the
// reference interpreter's outputs (both from ReferenceCache::Process(), once
// per workload in a process), with output tensors of the same shapes for
// the candidate to write.
struct MeasureSetup {
  std::unique_ptr<Graph> graph;
  ScheduleConfig config;
  std::map<std::string, Tensor> inputs;        // a copy of the reference's, for the candidate
  std::shared_ptr<const Reference> reference;  // shared with the workload's other candidates
  std::vector<Tensor> outputs;                 // per graph output, for the candidate
};

// The ReferenceCache key of `task`'s reference: the digest of its workload
// and its workload key (the inputs' seed).
std::string ReferenceKey(const kiln::v1::MeasureTask& task);

// `graph`'s measurement inputs (MakeMeasureInputs with `workload_key`) and
// the reference interpreter's outputs for them. INVALID_ARGUMENT naming the
// workload when the interpreter fails.
absl::StatusOr<Reference> ComputeReference(const Graph& graph, const std::string& workload_key);

// Fills `setup` for `task` on `target`. A candidate the target refuses (a
// schedule that does not parse or validate, another space version) is the
// BUILD_ERROR result returned; nullopt: ready to build. A Status error: the
// workload itself is unusable (as Measure).
absl::StatusOr<std::optional<kiln::v1::MeasureResult>> SetUpMeasurement(const kiln::v1::MeasureTask& task,
                                                                         const Target& target, MeasureSetup* setup);

// The WRONG_ANSWER result when an output written by the candidate differs
// from the reference (CompareOutput), else nullopt; *max_abs_error gets the
// largest error over the outputs.
std::optional<kiln::v1::MeasureResult> CheckOutputs(const kiln::v1::MeasureTask& task, const MeasureSetup& setup,
                                                    const MeasureSettings& settings, double* max_abs_error);

// Times `run_ms` (one run; its own measured milliseconds) until both
// min_repeats and min_time_ms are met, capped by max_repeats and
// max_total_ms; the times, sorted.
std::vector<double> TimeRuns(const MeasureSettings& settings, const std::function<double()>& run_ms);

// MEASURE_OK with the median, p10, p90 of `sorted_ms` and the repeat count.
kiln::v1::MeasureResult TimedResult(const kiln::v1::MeasureTask& task, const std::vector<double>& sorted_ms,
                                    double max_abs_error);

// Measures `task` on `target`. A candidate's failure is a result, not a Status:
//   - schedule config that does not parse, space-version mismatch, JIT failure -> BUILD_ERROR
//   - an output outside |got-ref| <= atol + rtol*(|ref| + rms(ref)) (rms over the
//     output's finite reference values; NaN vs non-NaN counts)          -> WRONG_ANSWER
//     with max_abs_error and the first bad index in the message
//   - otherwise MEASURE_OK with median/p10/p90 in ms and the repeat count.
// A Status error means the workload itself is unusable (INVALID_ARGUMENT: graph
// does not convert, dynamic shapes, constants, reference interpreter failure).
// The kernel's tasks run on task.threads() threads (split by the runtime's
// ThreadPool, as a package runs on that many), both for the check and the
// timing; on the calling thread alone when it is 0 or 1. One measurement at a
// time per device.
absl::StatusOr<kiln::v1::MeasureResult> Measure(const kiln::v1::MeasureTask& task,
                                                const CpuTarget& target);

// Measure() with a Status error folded into a BUILD_ERROR result ("invalid
// workload: ..."), so that the server records it instead of re-leasing the task.
kiln::v1::MeasureResult MeasureAsResult(const kiln::v1::MeasureTask& task, const CpuTarget& target);

// Deterministic inputs for every graph input: a stream seeded from `seed_key`
// (FNV-1a) and the input's position; floats uniform in [-1, 1), integers in
// [0, 4) (in [0, n) for indices into an axis of n < 4 elements: Gather,
// GatherElements, GatherND, ScatterElements, ScatterND), bools 0/1; weights
// are scaled by 1/sqrt(fan-in): a kiln.Recurrence's recurrent weights [ND,
// H, G*H] by 1/sqrt(H) (a long recurrence with uniform [-1, 1) weights is
// chaotic), a Conv's (kiln.BlockedConv's) by 1/sqrt(input channels per group
// x taps), a MatMul's or Gemm's B by 1/sqrt(K) (unscaled, a long reduction's
// correct rounding outgrows a tolerance set by a clipped output's scale).
// The same key gives the same bytes on every host.
absl::StatusOr<std::map<std::string, Tensor>> MakeMeasureInputs(const Graph& graph,
                                                                const std::string& seed_key);

// Compares one output with its reference. Returns "" when every element is within
// |got - ref| <= atol + rtol * (|ref| + rms), rms over the output's finite
// reference values, else a description of the first mismatch; *max_abs_error gets the
// largest |got - ref| (infinity for a NaN mismatch).
std::string CompareOutput(const std::string& name, const Tensor& got, const Tensor& ref,
                          double rtol, double atol, double* max_abs_error);

}  // namespace kiln::worker
