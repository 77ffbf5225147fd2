// Isolation of candidate kernels: a measurement runs in a forked child process so
// that a kernel that crashes or hangs costs one typed result (RUNTIME_ERROR,
// TIMEOUT), never the worker.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kiln/v1/worker.pb.h"

namespace kiln::worker {

// The names the children take (prctl PR_SET_NAME: ps, top and /proc/PID/comm
// show them), so that an operator, or a test, tells a measurement from the
// computation of its reference.
inline constexpr char kMeasureChildName[] = "kiln-measure";
inline constexpr char kReferenceChildName[] = "kiln-reference";

// Runs `measure` in a child made with fork(); the child sends the serialized
// MeasureResult back through a pipe and _exits. The parent waits up to `timeout`:
//   - result received, child exited 0  -> that result (task_id set to `task_id`)
//   - timeout                          -> child SIGKILLed, error TIMEOUT
//   - child killed by signal N         -> RUNTIME_ERROR "kernel crashed: signal N (name)"
//   - child exited otherwise           -> RUNTIME_ERROR with the exit code
// When `cancel` becomes true the child is killed and CANCELLED is returned (the
// caller is shutting down and reports nothing). fork/pipe failures give INTERNAL.
//
// The child of a multi-threaded parent runs only `measure`; it must not take locks
// that other parent threads may hold (gRPC, logging). Heap allocation is fine
// (glibc makes malloc fork-safe).
absl::StatusOr<kiln::v1::MeasureResult> RunIsolated(
    const std::string& task_id, const std::function<kiln::v1::MeasureResult()>& measure,
    absl::Duration timeout, const std::atomic<bool>* cancel = nullptr);

// Puts `task`'s reference (ComputeReference) into ReferenceCache::Process()
// unless it is there, computing it in a forked child (the interpreter runs on
// the workload the server sent: a crash or a hang costs the child) that pipes
// it back. Measurement children forked afterwards find it there instead of
// computing it again for every candidate. A child that crashes, fails or
// outlives `timeout` leaves the cache as it was and the status says why; the
// measurement then meets the same failure in its own child and reports it.
absl::Status CacheReferenceIsolated(const kiln::v1::MeasureTask& task, absl::Duration timeout,
                                    const std::atomic<bool>* cancel = nullptr);

}  // namespace kiln::worker
